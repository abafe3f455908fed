"""Prints the CPU benchmark tables from run_cpu_bench.sh's outputs.

Each side's figure is its best round. Braid runs every configuration fused
(--fusion=all) and unfused (--fusion=none); `long` (llama-tiny at sequence
2048) also reports the planned activation peak of both. MFU = model FLOPs per second / peak,
with model FLOPs from Megatron's formula (the plan's flops_per_token; causal
attention not halved) and the peak the best sgemm rate measured in the same
run.
"""
import json
import sys


def main():
    out, rounds, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    runs = []
    for r in range(1, rounds + 1):
        with open(f"{out}/braid-{r}.json") as f:
            runs.extend(json.load(f)["benchmarks"])
    peak = max(r["flops"] for r in runs if r["name"].startswith("sgemm"))
    print(f"\nsgemm peak: {peak / 1e9:.1f} GFLOP/s (best of 1024^3 and 2048^3 over "
          f"{rounds} rounds, same run)")
    def best(name):
        return max((r for r in runs if r["name"].split("/")[1] == name),
                   key=lambda r: r["tokens_per_s"])

    print(f"{'config':8} {'fused tok/s':>12} {'unfused tok/s':>14} {'fused/unf':>10} "
          f"{'PyTorch tok/s':>14} {'vs PyTorch':>11} {'Braid MFU':>10} "
          f"{'PyTorch MFU':>12}")
    for c in configs:
        fused, unfused = best(c), best(f"{c}-unfused")
        torch = []
        for r in range(1, rounds + 1):
            with open(f"{out}/torch-{c}-{r}.json") as f:
                torch.append(json.loads(f.read().strip().splitlines()[-1]))
        t_tps = max(t["tokens_per_s"] for t in torch)
        b_tps, u_tps = fused["tokens_per_s"], unfused["tokens_per_s"]
        flops_per_token = fused["model_flops"] / b_tps
        print(f"{c:8} {b_tps:12.0f} {u_tps:14.0f} {b_tps / u_tps:9.2f}x "
              f"{t_tps:14.0f} {b_tps / t_tps:10.2f}x "
              f"{100 * b_tps * flops_per_token / peak:9.1f}% "
              f"{100 * t_tps * flops_per_token / peak:11.1f}%")

    fused, unfused = best("long"), best("long-unfused")
    mib = 1 << 20
    f_peak, u_peak = fused["activation_peak_bytes"], unfused["activation_peak_bytes"]
    print(f"\nlong (llama-tiny, seq 2048): step {1e3 / fused['steps_per_s']:.0f} ms "
          f"fused vs {1e3 / unfused['steps_per_s']:.0f} ms unfused "
          f"({fused['tokens_per_s'] / unfused['tokens_per_s']:.2f}x); activation peak "
          f"{f_peak / mib:.1f} MiB fused vs {u_peak / mib:.1f} MiB unfused "
          f"({100 * f_peak / u_peak:.0f}%)")


if __name__ == "__main__":
    main()
