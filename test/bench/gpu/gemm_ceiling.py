#!/usr/bin/env python3
"""bf16 GEMM ceiling of the GPU benchmark (test/bench/gpu/run.sh).

Times torch's bf16 matrix products (cuBLAS/cuBLASLt, fp32 accumulation) at the
shapes one training step of the benchmark model issues, and at 8192^3:

  linear              y  = x W^T      [T, K] x [K, N]
  linear_grad_input   dx = dy W       [T, N] x [N, K]
  linear_grad_weight  dW = dy^T x     [N, T] x [T, K]

for every projection (q, k, v, o: 2048 -> 2048; gate, up: 2048 -> 5632;
down: 5632 -> 2048; lm_head: 2048 -> 32000), T = the tokens of one
micro-batch. Each figure is the median of --reps timed products (CUDA
events) after warm-up, on random data, rotating between input sets larger
than the L2 cache.

Reports per shape TFLOP/s, `ceiling_tflops` (the best rate measured: the MFU
denominator beside the datasheet's 989 TFLOP/s), and `gemm_mix_tflops`: the
rate of one step's weight GEMMs taken together (their FLOPs over their summed
times), the most a step made of these GEMMs could reach.

  gemm_ceiling.py --spec test/bench/specs/gpu-llama-1b.pbtxt --tokens 16384 --out gemm.json
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", help="Braid spec giving the shapes (default: the 1B model's)")
    parser.add_argument("--tokens", type=int, default=16384,
                        help="tokens of one micro-batch, T (default 16384)")
    parser.add_argument("--reps", type=int, default=20, help="timed products per shape")
    parser.add_argument("--warmup", type=int, default=5, help="untimed products per shape")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    parser.add_argument("--square", type=int, default=8192,
                        help="also time this square product (default 8192; 0: none)")
    parser.add_argument("--out", help="also write the JSON result here")
    return parser.parse_args()


def model_dims(spec):
    if spec is None:
        return {"hidden": 2048, "kv": 2048, "ffn": 5632, "vocab": 32000, "layers": 16}
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "numerics"))
    import torch_model as tm

    config, _ = tm.load_spec(spec)
    return {"hidden": config.hidden_size, "kv": config.num_kv_heads * config.head_dim,
            "ffn": config.ffn_hidden_size, "vocab": config.vocab_size,
            "layers": config.num_layers}


def main():
    args = parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gemm_ceiling.py: CUDA is not available")
    device = torch.device(args.device)
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    dims = model_dims(args.spec)
    T, D, KV, F, V, L = (args.tokens, dims["hidden"], dims["kv"], dims["ffn"], dims["vocab"],
                         dims["layers"])

    # (name, a shape, b shape, uses per step): C[m, n] = A[m, k] B[k, n].
    projections = [("qo", D, D, 2 * L), ("kv", D, KV, 2 * L), ("gate_up", D, F, 2 * L),
                   ("down", F, D, L), ("lm_head", D, V, 1)]
    shapes = []
    for name, k_in, n_out, uses in projections:
        shapes.append((f"{name}.linear", T, k_in, n_out, uses))
        shapes.append((f"{name}.grad_input", T, n_out, k_in, uses))
        shapes.append((f"{name}.grad_weight", n_out, T, k_in, uses))
    if args.square:
        shapes.append((f"square{args.square}", args.square, args.square, args.square, 0))

    def time_product(m, k, n):
        elem = torch.finfo(dtype).bits // 8
        # Enough input sets that one pass overruns the L2 cache (60 MB).
        sets = max(1, min(8, int(2 * 64e6 // ((m * k + k * n) * elem)) + 1))
        gen = torch.Generator(device=device).manual_seed(m * 131 + k * 17 + n)
        a = [torch.randn(m, k, device=device, dtype=dtype, generator=gen) for _ in range(sets)]
        b = [torch.randn(k, n, device=device, dtype=dtype, generator=gen) for _ in range(sets)]
        c = torch.empty(m, n, device=device, dtype=dtype)
        for i in range(args.warmup):
            torch.mm(a[i % sets], b[i % sets], out=c)
        sync()
        times = []
        for i in range(args.reps):
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                torch.mm(a[i % sets], b[i % sets], out=c)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:  # a smoke test on the CPU: wall clock
                t0 = time.perf_counter()
                torch.mm(a[i % sets], b[i % sets], out=c)
                times.append(time.perf_counter() - t0)
        del a, b, c
        return statistics.median(times)

    results = []
    step_flops = step_time = 0.0
    for name, m, k, n, uses in shapes:
        seconds = time_product(m, k, n)
        flops = 2.0 * m * k * n
        tflops = flops / seconds / 1e12
        results.append({"name": name, "m": m, "k": k, "n": n, "uses_per_step": uses,
                        "seconds": seconds, "tflops": tflops})
        step_flops += uses * flops
        step_time += uses * seconds
        print(f"[gemm] {name:24} {m:6}x{k:6}x{n:6} {seconds * 1e3:8.3f} ms {tflops:7.1f} TFLOP/s",
              file=sys.stderr, flush=True)

    out = {"dtype": args.dtype, "tokens": T, "device": torch.cuda.get_device_name(device) if cuda else "cpu",
           "torch_version": torch.__version__,
           "ceiling_tflops": max(r["tflops"] for r in results),
           "ceiling_shape": max(results, key=lambda r: r["tflops"])["name"],
           "gemm_mix_tflops": step_flops / step_time / 1e12,
           "gemm_step_s": step_time, "shapes": results}
    text = json.dumps(out)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
