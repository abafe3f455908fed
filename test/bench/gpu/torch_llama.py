#!/usr/bin/env python3
"""PyTorch peer of Braid's GPU benchmark (test/bench/gpu/run.sh).

Builds the Llama of a Braid spec (test/bench/specs/gpu-llama-1b.pbtxt) with
the spec's shapes: untied embedding and head, RMSNorm, RoPE, SwiGLU, no bias,
and times full training steps (forward, backward, gradient clipping, AdamW,
zero_grad) after a warm-up. Precision follows Braid's table for BF16 plans
(docs/gpu-backend.md, "Precision"): fp32 master weights, gradients and AdamW
moments; the step's matrix products read bf16 copies of the weights
(autocast); activations are stored in bf16; norms and softmax compute in fp32;
the loss is fp32.

Modes:
  eager       reference attention: scores, causal mask, softmax and the value
              product as separate ops, the probabilities [B, H, S, S]
              materialised and kept for the backward pass, as Braid's
              unfused reference graph does (docs/numerics.md)
  eager-sdpa  eager, attention by F.scaled_dot_product_attention(is_causal)
  compile     torch.compile of every decoder layer and of the head and loss
              (or of the whole model: --compile-scope model), with
              scaled_dot_product_attention

The micro-batch is --micro-batch N, or (0, the default) the largest that
fits: two probe steps at micro-batches 1 and 2 measure the fixed and the
per-sample memory, the largest micro-batch under the device's capacity is
tried first, and an out-of-memory error steps it down. One step is one
micro-batch (the global batch is the micro-batch), as in the benchmark plans.

Prints one JSON object as its last line (and writes it to --out):
  {"mode", "micro_batch", "seq_len", "tokens_per_s", "step_s", "step_times_s",
   "flops_per_token", "model_tflops", "peak_memory_bytes", "losses", ...}

  torch_llama.py --spec test/bench/specs/gpu-llama-1b.pbtxt --mode compile
  torch_llama.py --spec test/bench/specs/gpu-llama-1b.pbtxt --tiny --device cpu --mode eager
"""

import argparse
import dataclasses
import gc
import inspect
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

MODES = ("eager", "eager-sdpa", "compile")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="Braid model spec (.pbtxt)")
    parser.add_argument("--mode", choices=MODES, default="eager")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--micro-batch", type=int, default=0,
                        help="micro-batch size; 0 (default): the largest that fits")
    parser.add_argument("--max-micro-batch", type=int, default=32,
                        help="upper bound of the automatic micro-batch (default 32)")
    parser.add_argument("--memory-fraction", type=float, default=0.90,
                        help="share of the device's capacity the automatic micro-batch "
                             "may plan for (default 0.90)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    parser.add_argument("--time-limit", type=float, default=0,
                        help="stop timing after this many seconds of timed steps, "
                             "keeping at least 2 (0: no limit)")
    parser.add_argument("--precision", choices=("spec", "bf16", "fp32"), default="spec",
                        help="bf16 mixed precision or fp32 (default: the spec's train.precision)")
    parser.add_argument("--compile-scope", choices=("layer", "model"), default="layer",
                        help="compile mode: compile each decoder layer and the head (default; "
                             "identical layers compile once) or the whole forward")
    parser.add_argument("--compile-mode", default="default",
                        help="torch.compile mode (default: 'default')")
    parser.add_argument("--tiny", action="store_true",
                        help="shrink the spec's model to a few MB (d 128, 2 layers, 4 heads, "
                             "ffn 352, seq 64, vocab 512) for a smoke test")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    parser.add_argument("--out", help="also write the JSON result to this file")
    args = parser.parse_args(argv)
    if args.micro_batch < 0 or args.max_micro_batch < 1 or args.warmup < 0 or args.steps < 1:
        parser.error("--micro-batch must be >= 0, --max-micro-batch and --steps >= 1, "
                     "--warmup >= 0")
    if not 0.1 <= args.memory_fraction <= 1.0:
        parser.error("--memory-fraction must lie in [0.1, 1]")
    return args


# ---------------------------------------------------------------------------
# The spec
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Shapes:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    seq_len: int
    norm_eps: float
    rope_theta: float
    init_std: float
    micro_batch_size: int
    seed: int
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    grad_clip: float
    bf16: bool
    name: str

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    def flops_per_token(self):
        """Megatron's model FLOPs per trained token, forward and backward, causal
        attention not halved: compiler/import/ImportSpec.cpp, modelFlopsPerToken."""
        d, f = self.hidden_size, self.ffn_hidden_size
        kv = self.num_kv_heads * self.head_dim
        attn_weights = 2 * d * d + 2 * d * kv
        mlp_weights = 3 * d * f
        linear = self.num_layers * (attn_weights + mlp_weights) + self.vocab_size * d
        return 6.0 * linear + 12.0 * self.num_layers * self.seq_len * d

    def num_parameters(self):
        d, f = self.hidden_size, self.ffn_hidden_size
        kv = self.num_kv_heads * self.head_dim
        layer = 2 * d * d + 2 * d * kv + 3 * d * f + 2 * d
        return self.num_layers * layer + 2 * self.vocab_size * d + d


def load_shapes(path, tiny):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "numerics"))
    import torch_model as tm

    try:
        config, train = tm.load_spec(path)
    except (tm.SpecError, OSError) as e:
        raise SystemExit(f"torch_llama.py: {e}")
    if config.family != "llama":
        raise SystemExit(f"torch_llama.py: {path} is not a Llama spec")
    if config.linear_bias or config.tie_embeddings:
        raise SystemExit(f"torch_llama.py: {path}: only untied, bias-free Llamas are modelled")
    text = Path(path).read_text()
    bf16 = re.search(r"^\s*precision\s*:\s*BF16\b", text, re.MULTILINE) is not None
    shapes = Shapes(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_layers=config.num_layers, num_heads=config.num_heads,
        num_kv_heads=config.num_kv_heads, ffn_hidden_size=config.ffn_hidden_size,
        seq_len=train.seq_len, norm_eps=config.norm_eps or 1e-5,
        rope_theta=config.rope_theta or 10000.0, init_std=config.init_std or 0.02,
        micro_batch_size=train.micro_batch_size, seed=train.seed, lr=train.lr,
        beta1=train.beta1, beta2=train.beta2, eps=train.eps, weight_decay=train.weight_decay,
        grad_clip=train.grad_clip, bf16=bf16, name=config.name)
    if tiny:
        shapes = dataclasses.replace(shapes, vocab_size=512, hidden_size=128, num_layers=2,
                                     num_heads=4, num_kv_heads=4, ffn_hidden_size=352,
                                     seq_len=64, micro_batch_size=2, name=shapes.name + "-tiny")
    return shapes


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


def build(shapes, mode, compute_dtype, device):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            # fp32 statistics, output stored in the compute dtype.
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return (h * self.weight).to(compute_dtype)

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    def reference_attention(q, k, v):
        # Scores, mask, softmax, value product: the probabilities are a tensor
        # of their own, kept for the backward pass in the compute dtype (the
        # softmax computes in fp32 inside the kernel).
        s = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu_(1)
        scores = scores.masked_fill(mask, float("-inf"))
        with torch.autocast(device_type=q.device.type, enabled=False):
            probs = torch.softmax(scores.to(compute_dtype), dim=-1)
        return torch.matmul(probs, v.to(compute_dtype))

    def sdpa_attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    attention = reference_attention if mode == "eager" else sdpa_attention

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            d, kv = shapes.hidden_size, shapes.num_kv_heads * shapes.head_dim
            self.input_layernorm = RMSNorm(d, shapes.norm_eps)
            self.q_proj = nn.Linear(d, d, bias=False)
            self.k_proj = nn.Linear(d, kv, bias=False)
            self.v_proj = nn.Linear(d, kv, bias=False)
            self.o_proj = nn.Linear(d, d, bias=False)
            self.post_attention_layernorm = RMSNorm(d, shapes.norm_eps)
            self.gate_proj = nn.Linear(d, shapes.ffn_hidden_size, bias=False)
            self.up_proj = nn.Linear(d, shapes.ffn_hidden_size, bias=False)
            self.down_proj = nn.Linear(shapes.ffn_hidden_size, d, bias=False)

        def forward(self, x, cos, sin):
            b, s, d = x.shape
            hd = shapes.head_dim
            h = self.input_layernorm(x)
            q = self.q_proj(h).view(b, s, shapes.num_heads, hd).transpose(1, 2)
            k = self.k_proj(h).view(b, s, shapes.num_kv_heads, hd).transpose(1, 2)
            v = self.v_proj(h).view(b, s, shapes.num_kv_heads, hd).transpose(1, 2)
            q = (q * cos + rotate_half(q) * sin).to(compute_dtype)
            k = (k * cos + rotate_half(k) * sin).to(compute_dtype)
            groups = shapes.num_heads // shapes.num_kv_heads
            if groups > 1:
                k = k.repeat_interleave(groups, dim=1)
                v = v.repeat_interleave(groups, dim=1)
            a = attention(q, k, v).transpose(1, 2).reshape(b, s, d)
            x = x + self.o_proj(a).to(compute_dtype)
            h = self.post_attention_layernorm(x)
            m = F.silu(self.gate_proj(h)) * self.up_proj(h)
            return x + self.down_proj(m).to(compute_dtype)

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = RMSNorm(shapes.hidden_size, shapes.norm_eps)
            self.lm_head = nn.Linear(shapes.hidden_size, shapes.vocab_size, bias=False)

        def forward(self, x, labels):
            logits = self.lm_head(self.norm(x))
            return F.cross_entropy(logits.view(-1, shapes.vocab_size).float(), labels.reshape(-1))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(shapes.vocab_size, shapes.hidden_size)
            self.layers = nn.ModuleList(DecoderLayer() for _ in range(shapes.num_layers))
            self.head = Head()
            hd = shapes.head_dim
            inv = 1.0 / (shapes.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
            angles = torch.outer(torch.arange(shapes.seq_len, dtype=torch.float64), inv)
            angles = torch.cat((angles, angles), dim=-1)
            self.register_buffer("cos", angles.cos().to(compute_dtype), persistent=False)
            self.register_buffer("sin", angles.sin().to(compute_dtype), persistent=False)

        def forward(self, tokens, labels):
            x = self.embed_tokens(tokens).to(compute_dtype)
            s = tokens.shape[1]
            cos, sin = self.cos[:s], self.sin[:s]
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.head(x, labels)

    torch.manual_seed(shapes.seed)
    if hasattr(torch.device, "__enter__"):
        with torch.device(device):
            model = Llama()
    else:  # PyTorch before 2.0: build on the CPU, then move
        model = Llama().to(device)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, shapes.init_std)
    return model


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


class Runner:
    def __init__(self, args, shapes):
        import torch

        self.torch = torch
        self.args = args
        self.shapes = shapes
        self.device = torch.device(args.device)
        self.cuda = self.device.type == "cuda"
        if args.precision == "spec":
            self.bf16 = shapes.bf16
        else:
            self.bf16 = args.precision == "bf16"
        self.compute_dtype = torch.bfloat16 if self.bf16 else torch.float32
        self.model = build(shapes, args.mode, self.compute_dtype, self.device)
        params = list(self.model.parameters())
        groups = [{"params": [p for p in params if p.dim() == 2], "weight_decay": shapes.weight_decay},
                  {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}]
        kwargs = {"fused": True} if self.cuda else {"foreach": True}
        self.optimizer = torch.optim.AdamW(groups, lr=shapes.lr, betas=(shapes.beta1, shapes.beta2),
                                           eps=shapes.eps, **kwargs)
        self.generator = torch.Generator(device="cpu").manual_seed(shapes.seed)
        self.forward = self.model
        clip_params = inspect.signature(torch.nn.utils.clip_grad_norm_).parameters
        self.clip_kwargs = {"foreach": True} if "foreach" in clip_params else {}

    def compile(self):
        torch = self.torch
        import torch._dynamo

        # Each micro-batch tried is one more static-shape compilation.
        for key in ("recompile_limit", "cache_size_limit"):
            try:
                setattr(torch._dynamo.config, key, max(getattr(torch._dynamo.config, key), 64))
            except (AttributeError, TypeError):
                pass
        opts = {"mode": self.args.compile_mode, "dynamic": False}
        if self.args.compile_scope == "model":
            self.forward = torch.compile(self.model, **opts)
        else:
            for layer in self.model.layers:
                layer.compile(**opts)
            self.model.head.compile(**opts)
            self.forward = self.model

    def batch(self, micro_batch):
        torch = self.torch
        rows = torch.randint(0, self.shapes.vocab_size, (micro_batch, self.shapes.seq_len + 1),
                             generator=self.generator)
        rows = rows.to(self.device, non_blocking=True)
        return rows[:, :-1], rows[:, 1:]

    def step(self, micro_batch):
        """One training step; returns the loss (a tensor; not synchronised)."""
        torch = self.torch
        tokens, labels = self.batch(micro_batch)
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            loss = self.forward(tokens, labels)
        loss.backward()
        if self.shapes.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.shapes.grad_clip,
                                           **self.clip_kwargs)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def release(self):
        self.optimizer.zero_grad(set_to_none=True)
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()

    def peak_after(self, micro_batch):
        torch = self.torch
        self.sync()
        torch.cuda.reset_peak_memory_stats(self.device)
        self.step(micro_batch)
        self.sync()
        return torch.cuda.max_memory_allocated(self.device)

    def capacity(self):
        torch = self.torch
        free, total = torch.cuda.mem_get_info(self.device)
        return free + torch.cuda.memory_reserved(self.device), total

    def auto_micro_batch(self, log):
        """The largest micro-batch the measured memory model says fits."""
        if not self.cuda:
            return self.shapes.micro_batch_size
        # Probe in eager (the compiled steps are no larger): the first step
        # allocates the optimizer state, the next two measure the peaks.
        self.peak_after(1)
        p1 = self.peak_after(1)
        p2 = self.peak_after(2)
        per_sample = max(p2 - p1, 1)
        fixed = max(p1 - per_sample, 0)
        capacity, total = self.capacity()
        fit = int((capacity * self.args.memory_fraction - fixed) // per_sample)
        log(f"memory model: fixed {fixed / 2**30:.2f} GiB + {per_sample / 2**30:.2f} GiB per "
            f"sample; capacity {capacity / 2**30:.1f} GiB of {total / 2**30:.1f} GiB -> fits {fit}")
        self.memory_model = {"fixed_bytes": fixed, "per_sample_bytes": per_sample,
                             "capacity_bytes": capacity, "fits": fit}
        return max(1, nice(min(fit, self.args.max_micro_batch)))


def nice(n):
    """n rounded down to a power of two below 8, else to a multiple of 4."""
    if n < 8:
        return 1 << (max(n, 1).bit_length() - 1)
    return n - n % 4


def step_down(n):
    return nice(n * 3 // 4) if n >= 8 else n // 2


def run(args):
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    shapes = load_shapes(args.spec, args.tiny)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("torch_llama.py: CUDA is not available (use --device cpu)")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    def log(message):
        print(f"[torch_llama {args.mode}] {message}", file=sys.stderr, flush=True)

    if args.mode != "eager" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        raise SystemExit(f"torch_llama.py: mode {args.mode} needs PyTorch 2 "
                         f"(scaled_dot_product_attention); this is {torch.__version__}")
    out_of_memory = getattr(torch, "OutOfMemoryError",
                            getattr(torch.cuda, "OutOfMemoryError", MemoryError))
    runner = Runner(args, shapes)
    log(f"{shapes.name}: {shapes.num_parameters():,} parameters, "
        f"{'bf16 mixed' if runner.bf16 else 'fp32'} precision, seq {shapes.seq_len}, "
        f"device {args.device}")
    result = {"mode": args.mode, "model": shapes.name, "device": args.device,
              "precision": "bf16" if runner.bf16 else "fp32",
              "parameters": shapes.num_parameters(), "seq_len": shapes.seq_len,
              "flops_per_token": shapes.flops_per_token(), "torch_version": torch.__version__}
    if runner.cuda:
        result["gpu"] = torch.cuda.get_device_name(runner.device)
    if args.mode == "compile":
        result["compile_scope"] = args.compile_scope
        result["compile_mode"] = args.compile_mode

    micro_batch = args.micro_batch
    if micro_batch == 0:
        micro_batch = runner.auto_micro_batch(log)
        result["memory_model"] = getattr(runner, "memory_model", None)
    if args.mode == "compile":
        runner.compile()

    attempts = []
    while True:
        try:
            log(f"micro-batch {micro_batch}: {args.warmup} warm-up steps")
            if runner.cuda:
                torch.cuda.reset_peak_memory_stats(runner.device)
            start = time.perf_counter()
            for i in range(max(args.warmup, 1)):
                runner.step(micro_batch)
                runner.sync()
                if i == 0:
                    first_step_s = time.perf_counter() - start
            warmup_s = time.perf_counter() - start
            times, losses = [], []
            timed_start = time.perf_counter()
            for i in range(args.steps):
                t0 = time.perf_counter()
                loss = runner.step(micro_batch)
                runner.sync()
                times.append(time.perf_counter() - t0)
                losses.append(float(loss))
                if (args.time_limit and len(times) >= 2
                        and time.perf_counter() - timed_start > args.time_limit):
                    break
            break
        except out_of_memory as e:
            attempts.append({"micro_batch": micro_batch, "error": "out of memory"})
            log(f"micro-batch {micro_batch}: out of memory ({str(e).splitlines()[0][:120]})")
            del e
            runner.release()
            if micro_batch <= 1:
                raise SystemExit("torch_llama.py: out of memory at micro-batch 1")
            micro_batch = step_down(micro_batch)

    step_s = statistics.median(times)
    tokens = micro_batch * shapes.seq_len
    result.update({
        "micro_batch": micro_batch, "tokens_per_step": tokens,
        "tokens_per_s": tokens / step_s, "step_s": step_s,
        "step_times_s": times, "losses": losses,
        "first_step_s": first_step_s, "warmup_s": warmup_s,
        "model_tflops": tokens / step_s * shapes.flops_per_token() / 1e12,
        "oom_attempts": attempts,
    })
    if args.mode == "compile":
        result["compile_s"] = first_step_s
    if runner.cuda:
        result["peak_memory_bytes"] = torch.cuda.max_memory_allocated(runner.device)
    if not all(math.isfinite(x) for x in losses):
        result["warning"] = "non-finite loss"
    log(f"micro-batch {micro_batch}: {step_s * 1e3:.1f} ms/step, "
        f"{result['tokens_per_s']:,.0f} tok/s, {result['model_tflops']:.1f} model TFLOP/s, "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return result


def main():
    args = parse_args()
    result = run(args)
    text = json.dumps(result)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text, flush=True)


if __name__ == "__main__":
    main()
