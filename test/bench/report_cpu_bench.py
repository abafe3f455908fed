"""Prints the CPU benchmark table from run_cpu_bench.sh's outputs.

MFU = model FLOPs per second / peak, with model FLOPs from Megatron's formula
(the plan's flops_per_token; causal attention not halved) and the peak the
best sgemm rate measured in the same run.
"""
import json
import sys


def main():
    out, configs = sys.argv[1], sys.argv[2:]
    with open(f"{out}/braid.json") as f:
        runs = json.load(f)["benchmarks"]
    peak = max(r["flops"] for r in runs if r["name"].startswith("sgemm"))
    print(f"\nsgemm peak: {peak / 1e9:.1f} GFLOP/s (best of 1024^3 and 2048^3, same run)")
    print(f"{'config':8} {'Braid tok/s':>12} {'PyTorch tok/s':>14} {'ratio':>7} "
          f"{'Braid MFU':>10} {'PyTorch MFU':>12}")
    for c in configs:
        braid = next(r for r in runs if r["name"].startswith(f"train_step/{c}"))
        with open(f"{out}/torch-{c}.json") as f:
            torch = json.loads(f.read().strip().splitlines()[-1])
        flops_per_token = braid["model_flops"] / braid["tokens_per_s"]
        b_tps, t_tps = braid["tokens_per_s"], torch["tokens_per_s"]
        print(f"{c:8} {b_tps:12.0f} {t_tps:14.0f} {b_tps / t_tps:6.2f}x "
              f"{100 * b_tps * flops_per_token / peak:9.1f}% "
              f"{100 * t_tps * flops_per_token / peak:11.1f}%")


if __name__ == "__main__":
    main()
