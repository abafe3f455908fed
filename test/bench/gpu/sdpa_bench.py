#!/usr/bin/env python3
"""PyTorch peer of braid_flash_attention_bench (docs/benchmarks.md, "Flash
attention"): times torch.nn.functional.scaled_dot_product_attention, bf16,
is_causal=True, forward and forward+backward, at the same shapes.

Shapes: q, k, v of [B, S, H, Dh] viewed as [B, H, S, Dh] (transpose(1, 2)),
as a model's attention calls it; H = Hkv. Each figure is the median of
CUDA-event-timed runs after warm-up, on random data; forward+backward is
one forward and the backward of a random output gradient, the input
gradients cleared between runs. FLOPs follow the convention of the
flash-attention papers' benchmarks, as braid_flash_attention_bench does:

  forward           4 B H S^2 Dh, halved when causal
  backward          2.5 x forward
  forward+backward  3.5 x forward

Output: one JSON object per line on stdout (and in --out): a "convention"
line, then one per measurement. --device cpu (wall-clock timing) runs a
tiny shape unless shapes are given, which checks the script, not the speed;
a PyTorch without scaled_dot_product_attention (before 2.0) runs the math
of it (impl "torch_math").

  sdpa_bench.py --batch 8 --seq 2048,4096 --out sdpa.jsonl
  sdpa_bench.py --device cpu
"""

import argparse
import json
import math
import statistics
import sys
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=None, help="B (default 4; tiny: 1)")
    parser.add_argument("--seq", default=None,
                        help="sequence lengths, comma-separated (default 2048,4096; tiny: 64,128)")
    parser.add_argument("--heads", type=int, default=None, help="H (default 16; tiny: 2)")
    parser.add_argument("--head-dim", type=int, default=None, help="Dh (default 128; tiny: 32)")
    parser.add_argument("--causal", type=int, choices=(0, 1), default=1)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    parser.add_argument("--backend", choices=("auto", "flash", "efficient", "cudnn", "math"),
                        default="auto",
                        help="SDPA backend (default auto: PyTorch's choice)")
    parser.add_argument("--tiny", action="store_true",
                        help="B 1, S 64 and 128, H 2, Dh 32 (implied by --device cpu "
                             "when no shape is given)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs (default 3)")
    parser.add_argument("--iters", type=int, default=20, help="most timed runs (default 20)")
    parser.add_argument("--max-seconds", type=float, default=3.0,
                        help="stop timing a figure after this many seconds (default 3)")
    parser.add_argument("--out", help="also write the JSON lines here")
    args = parser.parse_args(argv)
    given = any(x is not None for x in (args.batch, args.seq, args.heads, args.head_dim))
    if args.device == "cpu" and not given:
        args.tiny = True
    small = args.tiny
    args.batch = args.batch or (1 if small else 4)
    args.seq = [int(s) for s in (args.seq or ("64,128" if small else "2048,4096")).split(",")]
    args.heads = args.heads or (2 if small else 16)
    args.head_dim = args.head_dim or (32 if small else 128)
    return args


def forward_flops(b, s, h, dh, causal):
    f = 4.0 * b * h * s * s * dh
    return f / 2 if causal else f


class Emitter:
    def __init__(self, path):
        self.file = open(path, "w") if path else None

    def __call__(self, obj):
        line = json.dumps(obj)
        print(line, flush=True)
        if self.file:
            self.file.write(line + "\n")
            self.file.flush()


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.nn.functional as F

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("sdpa_bench.py: CUDA is not available (use --device cpu for a smoke test)",
              file=sys.stderr)
        return 77
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    have_sdpa = hasattr(F, "scaled_dot_product_attention")
    impl = "torch_sdpa" if have_sdpa else "torch_math"
    emit = Emitter(args.out)

    def math_attention(q, k, v, causal):
        # The math of SDPA for a PyTorch without it: fp32 softmax.
        scores = torch.matmul(q, k.transpose(-2, -1)).float() / math.sqrt(q.shape[-1])
        if causal:
            s = q.shape[-2]
            mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1).to(q.dtype), v)

    def backend_context():
        if not have_sdpa or args.backend == "auto":
            return None
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError:
            raise SystemExit(f"sdpa_bench.py: --backend needs torch.nn.attention "
                             f"(PyTorch 2.3+); this is {torch.__version__}")
        name = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                "cudnn": "CUDNN_ATTENTION", "math": "MATH"}[args.backend]
        return sdpa_kernel(getattr(SDPBackend, name))

    def attention(q, k, v):
        if have_sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(args.causal))
        return math_attention(q, k, v, bool(args.causal))

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    def measure(fn):
        spent = 0.0
        for _ in range(args.warmup):
            t0 = time.perf_counter()
            fn()
            sync()
            spent += time.perf_counter() - t0
            if spent > args.max_seconds / 2:
                break
        times = []
        for _ in range(args.iters):
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            if sum(times) > args.max_seconds:
                break
        return statistics.median(times), min(times), len(times)

    emit({"convention": "forward FLOPs 4*B*H*S^2*Dh, halved when causal; backward 2.5x "
                        "forward; forward+backward 3.5x forward",
          "timing": "median of CUDA-event-timed runs after warm-up" if cuda
                    else "median wall-clock time after warm-up (CPU smoke test)",
          "device": torch.cuda.get_device_name(device) if cuda else "cpu",
          "torch_version": torch.__version__, "impl": impl, "backend": args.backend})

    ctx = backend_context()
    if ctx is not None:
        ctx.__enter__()
    rc = 0
    try:
        for s in args.seq:
            b, h, dh = args.batch, args.heads, args.head_dim
            shape = {"batch": b, "seq": s, "heads": h, "kv_heads": h, "head_dim": dh,
                     "causal": bool(args.causal), "dtype": args.dtype}
            fwd = forward_flops(b, s, h, dh, bool(args.causal))
            gen = torch.Generator(device=device).manual_seed(s)

            def rand():
                x = torch.rand(b, s, h, dh, device=device, dtype=torch.float32, generator=gen)
                return (2 * x - 1).to(dtype).transpose(1, 2)

            try:
                q, k, v, dout = rand(), rand(), rand(), rand()
                qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))

                def forward():
                    with torch.no_grad():
                        attention(q, k, v)

                def forward_backward():
                    for t in (qg, kg, vg):
                        t.grad = None
                    attention(qg, kg, vg).backward(dout)

                for name, fn, flops in (("fwd", forward, fwd),
                                        ("fwd+bwd", forward_backward, 3.5 * fwd)):
                    med, best, n = measure(fn)
                    kernels = (f"scaled_dot_product_attention ({args.backend})" if have_sdpa
                               else "matmul, softmax, matmul (no SDPA in this PyTorch)")
                    row = {"impl": impl, "kernels": kernels,
                           "pass": name, **shape, "flops": flops, "ms": med * 1e3,
                           "ms_min": best * 1e3, "iters": n, "tflops": flops / med / 1e12}
                    emit(row)
                    print(f"[sdpa] {impl} {name:8} B={b} S={s}: {med * 1e3:.3f} ms, "
                          f"{row['tflops']:.1f} TFLOP/s", file=sys.stderr, flush=True)
                del q, k, v, dout, qg, kg, vg
            except RuntimeError as e:  # out of memory, an unsupported backend
                emit({"impl": impl, **shape, "error": str(e).splitlines()[0][:300]})
                rc = 1
            if cuda:
                torch.cuda.empty_cache()
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    return rc


if __name__ == "__main__":
    sys.exit(main())
