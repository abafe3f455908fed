#!/usr/bin/env python3
"""Summary of a GPU benchmark run (test/bench/gpu/run.sh OUT).

Reads OUT/stages.jsonl, OUT/tests.jsonl, OUT/nccl/nccl.txt (nccl_check.sh),
OUT/braid-fused/ and OUT/braid/ (braid-run's JSON-lines log and start-up
report of the fused and the unfused plan), OUT/gemm.json, OUT/torch/*.json
and OUT/flash/*.jsonl; writes
OUT/summary.json and OUT/summary.txt and prints the latter.

  tokens/s   Braid: the median of the per-step tokens/s of braid-run's --log
             after the warm-up steps; PyTorch: tokens of a step over the
             median step time (torch_llama.py)
  MFU        tokens/s x flops_per_token / peak, flops_per_token by Megatron's
             formula (the plan's model.flops_per_token: 6 x the weight-matrix
             parameters incl. the LM head, plus 12 L S d for attention, causal
             attention not halved); peak = the measured bf16 GEMM ceiling
             (gemm_ceiling.py) and the H200 datasheet's 989 TFLOP/s
  ratios     Braid tokens/s over each PyTorch mode's, for the fused
             (--fusion=all) and the unfused (--fusion=none) plan, and fused
             over unfused; the targets are fused Braid at 1.0x torch.compile
             or better, unfused Braid at 0.8x or better
  attention  OUT/flash/: braid_flash_attention_bench (Braid's CUDA
             flash_attention and reference attention) and sdpa_bench.py
             (torch's scaled_dot_product_attention), TFLOP/s by the
             flash-attention benchmarks' count (forward 4 B H S^2 Dh, halved
             when causal; forward+backward 3.5x that), and Braid flash / SDPA

  report.py OUT [--spec SPEC] [--braid-warmup N]
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

DATASHEET_TFLOPS = 989.0  # H100/H200 SXM dense bf16
TARGET_VS_COMPILE = 0.8        # unfused Braid / torch.compile
TARGET_FUSED_VS_COMPILE = 1.0  # fused Braid / torch.compile
BRAIDS = (("braid-fused", "Braid fused (--fusion=all)"),
          ("braid", "Braid unfused (--fusion=none)"))
TORCH_MODES = (("compile", "torch.compile (SDPA)"), ("eager", "torch eager (reference attn)"),
               ("eager-sdpa", "torch eager (SDPA)"))


def read_json(path):
    try:
        return json.loads(Path(path).read_text().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def read_jsonl(path):
    rows = []
    try:
        for line in Path(path).read_text().splitlines():
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return rows


def flops_per_token(spec):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import torch_llama

        shapes = torch_llama.load_shapes(spec, False)
        return shapes.flops_per_token(), shapes.num_parameters(), shapes.seq_len
    except (SystemExit, Exception) as e:  # the report must still come out
        print(f"report.py: cannot read {spec}: {e}", file=sys.stderr)
        return None, None, None


def braid_result(out, warmup, seq_len, sub="braid"):
    log = read_jsonl(out / sub / "log.jsonl")
    choice = read_json(out / sub / "choice.json") or {}
    if not log:
        return None
    rates = [r.get("tokens_per_s") for r in log]
    timed = [x for x in rates[warmup:] if isinstance(x, (int, float))]
    if not timed:
        timed = [x for x in rates if isinstance(x, (int, float))]
    if not timed:
        return None
    losses = [r.get("loss") for r in log]
    result = {"micro_batch": choice.get("micro_batch"), "fusion": choice.get("fusion"),
              "plan": choice.get("plan"), "seq_len": seq_len,
              "tokens_per_s": statistics.median(timed), "steps": len(log),
              "timed_steps": len(timed), "first_loss": losses[0], "last_loss": losses[-1],
              "finite_losses": all(isinstance(x, (int, float)) and math.isfinite(x)
                                   for x in losses),
              "first_step_tokens_per_s": rates[0]}
    run_log = out / sub / "run.log"
    try:
        text = run_log.read_text(errors="replace")
        result["startup"] = [line for line in text.splitlines()[:8]
                             if line.startswith(("plan ", "memory", "data:", "peak:", "device"))]
        result["graphs"] = "off" if (out / sub / "graphs-off").exists() else "on"
    except OSError:
        pass
    return result


def profile_plan(out):
    try:
        return (out / "braid" / "profile-plan.txt").read_text().strip()
    except OSError:
        return ""


def profile_top(out, count=15):
    try:
        lines = (out / "braid" / "profile.log").read_text(errors="replace").splitlines()
    except OSError:
        return []
    for i, line in enumerate(lines):
        if line.startswith("kernel profile"):
            return lines[i:i + count + 2]
    return []


def attention_result(out):
    """Rows of OUT/flash/{braid,sdpa}.jsonl by (seq, pass): TFLOP/s of Braid's
    flash and reference attention and of SDPA, and Braid flash / SDPA."""
    rows = read_jsonl(out / "flash" / "braid.jsonl") + read_jsonl(out / "flash" / "sdpa.jsonl")
    meta = {}
    table = {}
    for r in rows:
        if "convention" in r:
            meta.setdefault("convention", r["convention"])
            meta.setdefault("device", r.get("device"))
            if "torch_version" in r:
                meta["torch_version"] = r["torch_version"]
            continue
        impl = r.get("impl")
        if impl == "torch_math":
            impl = "torch_sdpa"
        if impl not in ("braid_flash", "braid_reference", "torch_sdpa") or "seq" not in r:
            continue
        if "pass" not in r:  # a shape skipped or failed as a whole
            meta.setdefault("notes", []).append(
                f"{impl} S={r['seq']}: {r.get('error') or r.get('skipped') or 'no figure'}")
            continue
        key = (r["seq"], r["pass"])
        entry = table.setdefault(key, {"batch": r.get("batch"), "seq": r["seq"],
                                       "heads": r.get("heads"), "head_dim": r.get("head_dim"),
                                       "pass": r["pass"]})
        if isinstance(r.get("tflops"), (int, float)):
            entry[impl] = r["tflops"]
            entry[impl + "_ms"] = r.get("ms")
        else:
            entry[impl + "_note"] = r.get("error") or r.get("skipped") or "no figure"
        if "flash_max_abs_diff" in r:
            entry["flash_max_abs_diff"] = r["flash_max_abs_diff"]
    for entry in table.values():
        if entry.get("braid_flash") and entry.get("torch_sdpa"):
            entry["flash_vs_sdpa"] = entry["braid_flash"] / entry["torch_sdpa"]
    # Forward rows carry the reference comparison; give it to both passes.
    for (seq, _), entry in table.items():
        diff = table.get((seq, "fwd"), {}).get("flash_max_abs_diff")
        if diff is not None:
            entry.setdefault("flash_max_abs_diff", diff)
    if not table and not meta.get("notes"):
        return None
    meta["rows"] = [table[k] for k in sorted(table, key=lambda k: (k[0], k[1] != "fwd"))]
    return meta


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--spec", default=str(Path(__file__).resolve().parents[1] / "specs"
                                              / "gpu-llama-1b.pbtxt"))
    parser.add_argument("--braid-warmup", type=int, default=3,
                        help="braid-run steps left out of the median (default 3)")
    args = parser.parse_args()
    out = Path(args.out)

    fpt, params, seq_len = flops_per_token(args.spec)
    gemm = read_json(out / "gemm.json")
    ceiling = gemm.get("ceiling_tflops") if gemm else None
    machine = ""
    try:
        machine = (out / "machine.txt").read_text()
    except OSError:
        pass

    systems = {}
    for key, _ in BRAIDS:
        result = braid_result(out, args.braid_warmup, seq_len, key)
        if result:
            systems[key] = result
    for mode, _ in TORCH_MODES:
        r = read_json(out / "torch" / f"{mode}.json")
        if r and "tokens_per_s" in r:
            systems[mode] = {k: r.get(k) for k in (
                "micro_batch", "seq_len", "tokens_per_s", "step_s", "peak_memory_bytes",
                "first_step_s", "losses", "torch_version", "gpu", "memory_model",
                "oom_attempts", "compile_scope")}
    for s in systems.values():
        tps = s["tokens_per_s"]
        if fpt:
            s["model_tflops"] = tps * fpt / 1e12
            s["mfu_datasheet"] = s["model_tflops"] / DATASHEET_TFLOPS
            if ceiling:
                s["mfu_measured"] = s["model_tflops"] / ceiling

    ratios = {}
    for key, _ in BRAIDS:
        if key in systems:
            for other in [b for b, _ in BRAIDS] + [m for m, _ in TORCH_MODES]:
                if other != key and other in systems:
                    ratios[f"{key}/{other}"] = (systems[key]["tokens_per_s"]
                                                / systems[other]["tokens_per_s"])
    ratios.pop("braid/braid-fused", None)  # braid-fused/braid says it
    targets = []
    for key, label, goal in (("braid-fused/compile", "fused Braid", TARGET_FUSED_VS_COMPILE),
                             ("braid/compile", "unfused Braid", TARGET_VS_COMPILE)):
        entry = {"ratio_name": key, "label": label, "target": goal,
                 "ratio": ratios.get(key), "met": None}
        if key in ratios:
            entry["met"] = ratios[key] >= goal
        targets.append(entry)
    target = None
    if "braid/compile" in ratios:
        target = {"ratio": ratios["braid/compile"], "target": TARGET_VS_COMPILE,
                  "met": ratios["braid/compile"] >= TARGET_VS_COMPILE}
    attention = attention_result(out)

    stages = read_jsonl(out / "stages.jsonl")
    tests = read_jsonl(out / "tests.jsonl")
    # nccl_check.sh's verdict: the library asked for, steps, the verdict.
    nccl_file = out / "nccl" / "nccl.txt"
    nccl = nccl_file.read_text().splitlines() if nccl_file.exists() else []
    summary = {"model": Path(args.spec).stem, "parameters": params, "seq_len": seq_len,
               "flops_per_token": fpt, "datasheet_tflops": DATASHEET_TFLOPS,
               "gemm_ceiling_tflops": ceiling,
               "gemm_ceiling_shape": gemm.get("ceiling_shape") if gemm else None,
               "gemm_mix_tflops": gemm.get("gemm_mix_tflops") if gemm else None,
               "systems": systems, "ratios": ratios, "target_vs_compile": target,
               "targets": targets, "attention": attention,
               "stages": stages, "tests": tests, "nccl": nccl,
               "machine": machine.splitlines(),
               "braid_profile": profile_top(out)}

    lines = []
    w = lines.append
    w(f"GPU benchmark: {summary['model']}"
      + (f", {params / 1e6:.0f}M parameters, seq {seq_len}" if params else "")
      + (f", {fpt / 1e9:.3f} GFLOP/token (Megatron)" if fpt else ""))
    for m in machine.splitlines()[1:3]:
        w(f"  {m}")
    if gemm:
        w(f"bf16 GEMM ceiling (measured): {ceiling:.0f} TFLOP/s ({gemm.get('ceiling_shape')}); "
          f"the step's GEMM mix {gemm.get('gemm_mix_tflops', 0):.0f} TFLOP/s; "
          f"datasheet {DATASHEET_TFLOPS:.0f}")
    else:
        w("bf16 GEMM ceiling: not measured (see stages)")
    w("")
    w(f"{'system':40} {'mb':>4} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU meas':>9} "
      f"{'MFU 989':>8} {'fused/x':>8} {'unfused/x':>9}")
    names = [(key, f"{label}, graphs {systems.get(key, {}).get('graphs', 'on')}")
             for key, label in BRAIDS]
    names += list(TORCH_MODES)
    for key, label in names:
        s = systems.get(key)
        if not s:
            status = next((st["status"] for st in stages
                           if st["stage"] in (key, f"torch-{key}")), "not run")
            w(f"{label:40} {'-':>4} {status:>10}")
            continue
        mfu_m = f"{100 * s['mfu_measured']:.1f}%" if "mfu_measured" in s else "-"
        mfu_d = f"{100 * s['mfu_datasheet']:.1f}%" if "mfu_datasheet" in s else "-"
        tflops = f"{s['model_tflops']:.0f}" if "model_tflops" in s else "-"
        cols = []
        for braid_key in ("braid-fused", "braid"):
            ratio = ratios.get(f"{braid_key}/{key}")
            cols.append(f"{ratio:.2f}x" if ratio else "")
        w(f"{label:40} {s.get('micro_batch') or '-':>4} {s['tokens_per_s']:>10,.0f} {tflops:>8} "
          f"{mfu_m:>9} {mfu_d:>8} {cols[0]:>8} {cols[1]:>9}")
    w("")
    if "braid-fused/braid" in ratios:
        w(f"fused / unfused Braid: {ratios['braid-fused/braid']:.2f}x")
    for t in targets:
        if t["ratio"] is None:
            w(f"target {t['label']} >= {t['target']}x torch.compile: not measured")
        else:
            w(f"target {t['label']} >= {t['target']}x torch.compile: "
              f"{'MET' if t['met'] else 'NOT MET'} ({t['ratio']:.2f}x)")
    for key, label in BRAIDS:
        b = systems.get(key)
        if not b:
            continue
        w(f"{label}: {b['steps']} steps, loss {b['first_loss']} -> {b['last_loss']}"
          + ("" if b["finite_losses"] else "  NON-FINITE LOSS"))
        for line in b.get("startup", []):
            w(f"  {line}")
    w("")
    w("flash attention vs SDPA (bf16, causal; TFLOP/s: forward 4 B H S^2 Dh / 2, "
      "fwd+bwd 3.5x forward):")
    if attention:
        w(f"  {'B':>3} {'S':>5} {'H':>3} {'Dh':>4} {'pass':8} {'Braid flash':>11} "
          f"{'Braid ref':>10} {'SDPA':>8} {'flash/SDPA':>10}")
        for r in attention["rows"]:
            def fig(name):
                v = r.get(name)
                return f"{v:.1f}" if isinstance(v, (int, float)) else "-"
            ratio = r.get("flash_vs_sdpa")
            w(f"  {r.get('batch') or '-':>3} {r['seq']:>5} {r.get('heads') or '-':>3} "
              f"{r.get('head_dim') or '-':>4} {r['pass']:8} {fig('braid_flash'):>11} "
              f"{fig('braid_reference'):>10} {fig('torch_sdpa'):>8} "
              f"{(f'{ratio:.2f}x' if ratio else '-'):>10}")
        diffs = [r["flash_max_abs_diff"] for r in attention["rows"]
                 if r["pass"] == "fwd" and r.get("flash_max_abs_diff") is not None]
        if diffs:
            w(f"  flash output vs reference output, largest |difference|: {max(diffs):.3g}")
        notes = sorted({f"{k[:-5]} S={r['seq']} {r['pass']}: {v}" for r in attention["rows"]
                        for k, v in r.items() if k.endswith("_note")})
        notes += attention.get("notes", [])
        for note in notes:
            w(f"  {note}")
    else:
        status = next((st["status"] for st in stages if st["stage"] == "flash"), "not run")
        w(f"  no figures ({status})")
    w("")
    w("stages:")
    for st in stages:
        note = f"  {st['note']}" if st.get("note") else ""
        w(f"  {st['stage']:18} {st['status']:8} {st['seconds']:>4}s{note[:300]}")
    if tests:
        w("GPU tests: " + ", ".join(f"{t['test']} {t['status']}" for t in tests))
    if nccl:
        w("NCCL: " + nccl[0])
        w("  " + nccl[-1])
    if summary["braid_profile"]:
        w("")
        w("Braid kernel profile (graphs off, "
          + ("fused" if "fused" in profile_plan(out) else "unfused") + " plan):")
        for line in summary["braid_profile"]:
            w(f"  {line}")
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(text, end="")


if __name__ == "__main__":
    main()
