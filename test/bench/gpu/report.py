#!/usr/bin/env python3
"""Summary of a GPU benchmark run (test/bench/gpu/run.sh OUT).

Reads OUT/stages.jsonl, OUT/tests.jsonl, OUT/braid/ (braid-run's JSON-lines
log and start-up report), OUT/gemm.json and OUT/torch/*.json; writes
OUT/summary.json and OUT/summary.txt and prints the latter.

  tokens/s   Braid: the median of the per-step tokens/s of braid-run's --log
             after the warm-up steps; PyTorch: tokens of a step over the
             median step time (torch_llama.py)
  MFU        tokens/s x flops_per_token / peak, flops_per_token by Megatron's
             formula (the plan's model.flops_per_token: 6 x the weight-matrix
             parameters incl. the LM head, plus 12 L S d for attention, causal
             attention not halved); peak = the measured bf16 GEMM ceiling
             (gemm_ceiling.py) and the H200 datasheet's 989 TFLOP/s
  ratios     Braid tokens/s over each PyTorch mode's; the target is Braid at
             0.8x torch.compile or better

  report.py OUT [--spec SPEC] [--braid-warmup N]
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

DATASHEET_TFLOPS = 989.0  # H100/H200 SXM dense bf16
TARGET_VS_COMPILE = 0.8
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


def braid_result(out, warmup, seq_len):
    log = read_jsonl(out / "braid" / "log.jsonl")
    choice = read_json(out / "braid" / "choice.json") or {}
    if not log:
        return None
    rates = [r.get("tokens_per_s") for r in log]
    timed = [x for x in rates[warmup:] if isinstance(x, (int, float))]
    if not timed:
        timed = [x for x in rates if isinstance(x, (int, float))]
    if not timed:
        return None
    losses = [r.get("loss") for r in log]
    result = {"micro_batch": choice.get("micro_batch"), "seq_len": seq_len,
              "tokens_per_s": statistics.median(timed), "steps": len(log),
              "timed_steps": len(timed), "first_loss": losses[0], "last_loss": losses[-1],
              "finite_losses": all(isinstance(x, (int, float)) and math.isfinite(x)
                                   for x in losses),
              "first_step_tokens_per_s": rates[0]}
    run_log = out / "braid" / "run.log"
    try:
        text = run_log.read_text(errors="replace")
        result["startup"] = [line for line in text.splitlines()[:8]
                             if line.startswith(("plan ", "memory", "data:", "peak:", "device"))]
        result["graphs"] = "off" if (out / "braid" / "graphs-off").exists() else "on"
    except OSError:
        pass
    return result


def profile_top(out, count=15):
    try:
        lines = (out / "braid" / "profile.log").read_text(errors="replace").splitlines()
    except OSError:
        return []
    for i, line in enumerate(lines):
        if line.startswith("kernel profile"):
            return lines[i:i + count + 2]
    return []


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
    braid = braid_result(out, args.braid_warmup, seq_len)
    if braid:
        systems["braid"] = braid
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
    if "braid" in systems:
        for mode, _ in TORCH_MODES:
            if mode in systems:
                ratios[f"braid/{mode}"] = (systems["braid"]["tokens_per_s"]
                                          / systems[mode]["tokens_per_s"])
    target = None
    if "braid/compile" in ratios:
        target = {"ratio": ratios["braid/compile"], "target": TARGET_VS_COMPILE,
                  "met": ratios["braid/compile"] >= TARGET_VS_COMPILE}

    stages = read_jsonl(out / "stages.jsonl")
    tests = read_jsonl(out / "tests.jsonl")
    summary = {"model": Path(args.spec).stem, "parameters": params, "seq_len": seq_len,
               "flops_per_token": fpt, "datasheet_tflops": DATASHEET_TFLOPS,
               "gemm_ceiling_tflops": ceiling,
               "gemm_ceiling_shape": gemm.get("ceiling_shape") if gemm else None,
               "gemm_mix_tflops": gemm.get("gemm_mix_tflops") if gemm else None,
               "systems": systems, "ratios": ratios, "target_vs_compile": target,
               "stages": stages, "tests": tests, "machine": machine.splitlines(),
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
    w(f"{'system':34} {'mb':>4} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU meas':>9} "
      f"{'MFU 989':>8} {'Braid/x':>8}")
    names = [("braid", "Braid (braid-run, CUDA graphs " + (braid or {}).get("graphs", "on") + ")")]
    names += list(TORCH_MODES)
    for key, label in names:
        s = systems.get(key)
        if not s:
            status = next((st["status"] for st in stages
                           if st["stage"] in (key, f"torch-{key}")), "not run")
            w(f"{label:34} {'-':>4} {status:>10}")
            continue
        mfu_m = f"{100 * s['mfu_measured']:.1f}%" if "mfu_measured" in s else "-"
        mfu_d = f"{100 * s['mfu_datasheet']:.1f}%" if "mfu_datasheet" in s else "-"
        tflops = f"{s['model_tflops']:.0f}" if "model_tflops" in s else "-"
        ratio = ratios.get(f"braid/{key}")
        ratio = f"{ratio:.2f}x" if ratio else ""
        w(f"{label:34} {s.get('micro_batch') or '-':>4} {s['tokens_per_s']:>10,.0f} {tflops:>8} "
          f"{mfu_m:>9} {mfu_d:>8} {ratio:>8}")
    w("")
    if target:
        w(f"target Braid >= {TARGET_VS_COMPILE}x torch.compile: "
          f"{'MET' if target['met'] else 'NOT MET'} ({target['ratio']:.2f}x)")
    else:
        w(f"target Braid >= {TARGET_VS_COMPILE}x torch.compile: not measured")
    if braid:
        w(f"Braid: {braid['steps']} steps, loss {braid['first_loss']} -> {braid['last_loss']}"
          + ("" if braid["finite_losses"] else "  NON-FINITE LOSS"))
        for line in braid.get("startup", []):
            w(f"  {line}")
    w("")
    w("stages:")
    for st in stages:
        note = f"  {st['note']}" if st.get("note") else ""
        w(f"  {st['stage']:18} {st['status']:8} {st['seconds']:>4}s{note[:300]}")
    if tests:
        w("GPU tests: " + ", ".join(f"{t['test']} {t['status']}" for t in tests))
    if summary["braid_profile"]:
        w("")
        w("Braid kernel profile (graphs off):")
        for line in summary["braid_profile"]:
            w(f"  {line}")
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(text, end="")


if __name__ == "__main__":
    main()
