"""Prints the CPU benchmark table from run_cpu_bench.sh's outputs.

Each side's figure is its best round. MFU = model FLOPs per second / peak,
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
    print(f"{'config':8} {'Braid tok/s':>12} {'PyTorch tok/s':>14} {'ratio':>7} "
          f"{'Braid MFU':>10} {'PyTorch MFU':>12}")
    for c in configs:
        braid = max((r for r in runs if r["name"].startswith(f"train_step/{c}")),
                    key=lambda r: r["tokens_per_s"])
        torch = []
        for r in range(1, rounds + 1):
            with open(f"{out}/torch-{c}-{r}.json") as f:
                torch.append(json.loads(f.read().strip().splitlines()[-1]))
        t_tps = max(t["tokens_per_s"] for t in torch)
        b_tps = braid["tokens_per_s"]
        flops_per_token = braid["model_flops"] / b_tps
        print(f"{c:8} {b_tps:12.0f} {t_tps:14.0f} {b_tps / t_tps:6.2f}x "
              f"{100 * b_tps * flops_per_token / peak:9.1f}% "
              f"{100 * t_tps * flops_per_token / peak:11.1f}%")


if __name__ == "__main__":
    main()
