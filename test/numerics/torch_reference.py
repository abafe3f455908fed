#!/usr/bin/python3
"""PyTorch goldens of a Braid model spec.

Trains the spec's model for a few optimizer steps exactly as docs/numerics.md
prescribes (Braid's initial weights, byte tokens in sequential order, Braid's
dropout masks, clipping, AdamW, learning-rate schedule), in fp32 on the CPU,
and writes what the C++ tests compare against:

  <name>.json                losses, gradient norms and learning rates of each
                             step, and a summary of every initial parameter;
  <name>.grads.safetensors   the gradient of step 1 (before clipping) of every
                             parameter, Hugging Face names and layout.

  torch_reference.py --spec models/llama-tiny.pbtxt \
      --data /work/shared/data/tinyshakespeare.txt --out test/numerics/golden

--check-rng prints draws of kernels/common/Random.h's functions for fixed
inputs; --check-fp64 compares the fp32 gradients with a float64 run.
"""

import argparse
import hashlib
import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_model as tm  # noqa: E402


def read_corpus(path):
    """Byte tokens of a text file, its size and its SHA-256."""
    data = Path(path).read_bytes()
    return np.frombuffer(data, dtype=np.uint8), len(data), hashlib.sha256(data).hexdigest()


class SequentialBatches:
    """Windows of S + 1 tokens in sequential order (docs/numerics.md)."""

    def __init__(self, tokens, train):
        self.tokens = tokens
        self.train = train
        self.windows = (len(tokens) - 1) // train.seq_len
        if self.windows < 1:
            raise ValueError(f"the corpus holds fewer than {train.seq_len + 1} tokens")

    def micro_batch(self, step, micro_batch):
        """Tokens and labels [B, S] of micro-batch m of optimizer step t (0-based)."""
        t = self.train
        first = (step * t.micro_batches + micro_batch) * t.micro_batch_size
        windows = (first + np.arange(t.micro_batch_size)) % self.windows
        rows = self.tokens[windows[:, None] * t.seq_len + np.arange(t.seq_len + 1)[None, :]]
        rows = torch.from_numpy(rows.astype(np.int64))
        return rows[:, :-1], rows[:, 1:]


def global_grad_norm(params, grad_clip):
    """The gradient L2 norm before clipping; clips when grad_clip > 0."""
    if grad_clip > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, grad_clip))
    return float(torch.norm(torch.stack([p.grad.norm() for p in params])))


def run_training(config, train, tokens, steps, dtype):
    """Trains `steps` optimizer steps in `dtype`; returns the initial weights,
    the step-1 gradients and per-step loss, gradient norm and learning rate."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = tm.build_model(config, train)
    finally:
        torch.set_default_dtype(previous)
    model.train()
    params = dict(model.named_parameters())
    initial = {name: p.detach().clone() for name, p in params.items()}
    optimizer = torch.optim.AdamW(tm.weight_decay_groups(model, train.weight_decay),
                                  lr=train.lr, betas=(train.beta1, train.beta2), eps=train.eps)
    batches = SequentialBatches(tokens, train)
    result = {"losses": [], "grad_norms": [], "lrs": [], "initial": initial}
    for step in range(1, steps + 1):
        optimizer.zero_grad(set_to_none=True)
        micro_losses = []
        for m in range(train.micro_batches):
            inputs, labels = batches.micro_batch(step - 1, m)
            logits = model(inputs, dropout=tm.BraidDropout(train.seed, step, m))
            loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), labels.reshape(-1))
            # MoE layers' balancing losses train, but are not reported.
            side = sum(getattr(module, "side_loss", 0.0) for module in model.modules())
            ((loss + side) / train.micro_batches).backward()
            micro_losses.append(loss.item())
        if step == 1:
            result["grads"] = {name: p.grad.detach().clone() for name, p in params.items()}
        result["grad_norms"].append(global_grad_norm(list(params.values()), train.grad_clip))
        lr = train.learning_rate(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        for module in model.modules():
            if isinstance(module, tm.MoeBlock):
                module.update_bias()
        result["losses"].append(sum(micro_losses) / len(micro_losses))
        result["lrs"].append(lr)
    return result


def write_safetensors(path, tensors):
    """F32 tensors in the safetensors format, sorted by name."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def init_summary(initial):
    summary = {}
    for name, value in initial.items():
        v = value.to(torch.float64)
        summary[name] = {"shape": list(value.shape), "sum": float(v.sum()),
                         "sumsq": float((v * v).sum()),
                         "first": [float(x) for x in value.flatten()[:4]]}
    return summary


def write_goldens(args):
    config, train = tm.load_spec(args.spec)
    tokens, size, sha256 = read_corpus(args.data)
    if int(tokens.max()) >= config.vocab_size:
        raise SystemExit(f"{args.spec}: byte tokens need vocab_size >= 256")
    result = run_training(config, train, tokens, args.steps, torch.float32)
    rows = zip(result["losses"], result["grad_norms"], result["lrs"])
    for step, (loss, norm, lr) in enumerate(rows, 1):
        print(f"{config.name} step {step:2d}  loss {loss!r}  grad_norm {norm!r}  lr {lr!r}")
    if not result["losses"][-1] < result["losses"][0]:
        raise SystemExit(f"{config.name}: the loss did not fall over {args.steps} steps")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    golden = {"model": config.name, "torch_version": torch.__version__, "data_bytes": size,
              "data_sha256": sha256, "steps": args.steps, "losses": result["losses"],
              "grad_norms": result["grad_norms"], "lrs": result["lrs"],
              "init": init_summary(tm.braid_parameters(result["initial"]))}
    (out / f"{config.name}.json").write_text(json.dumps(golden, indent=1) + "\n")
    grads = {name: tm.hf_layout(name, g, config) for name, g in result["grads"].items()}
    write_safetensors(out / f"{config.name}.grads.safetensors", grads)
    print(f"wrote {out / config.name}.json and .grads.safetensors")


def check_fp64(args):
    """fp32 against float64 from the same initial values, data and masks."""
    config, train = tm.load_spec(args.spec)
    tokens, _, _ = read_corpus(args.data)
    single = run_training(config, train, tokens, args.steps, torch.float32)
    double = run_training(config, train, tokens, args.steps, torch.float64)
    worst = 0.0
    print(f"{config.name}: step-1 gradients, fp32 against float64")
    print(f"  {'parameter':48s} {'|d|/|g|':>10s} {'max|d|/max|g|':>14s}")
    for name, g64 in double["grads"].items():
        d = single["grads"][name].to(torch.float64) - g64
        norm_rel = float(d.norm() / g64.norm())
        max_rel = float(d.abs().max() / g64.abs().max())
        worst = max(worst, norm_rel, max_rel)
        print(f"  {name:48s} {norm_rel:10.2e} {max_rel:14.2e}")
    loss_rel = max(abs(a - b) / abs(b) for a, b in zip(single["losses"], double["losses"]))
    norm_rel = max(abs(a - b) / abs(b) for a, b in zip(single["grad_norms"], double["grad_norms"]))
    print(f"  worst gradient difference {worst:.2e}; losses over {args.steps} steps "
          f"{loss_rel:.2e}; gradient norms {norm_rel:.2e}")
    if max(worst, loss_rel, norm_rel) > 1e-5:
        raise SystemExit("fp32 differs from float64 by more than 1e-5 relative")


def check_rng():
    """Draws for fixed inputs, to compare with kernels/common/Random.h."""
    key = 1234
    print(f"mix64(0) = {tm.mix64(0):#018x}")
    print(f"mix64(1234) = {tm.mix64(key):#018x}")
    print("draw(1234, 0..3) =", " ".join(f"{int(d):#018x}" for d in tm.draw(key, np.arange(4))))
    print(f"derive(1234, 7) = {tm.derive(key, 7):#018x}")
    name = "model.embed_tokens.weight"
    print(f"fnv1a64({name!r}) = {tm.fnv1a64(name):#018x}")
    pkey = tm.parameter_key(key, name)
    print(f"parameterKey(1234, {name!r}) = {pkey:#018x}")
    print("normal(parameterKey, 0..3) =", " ".join(repr(float(z)) for z in tm.normal(pkey, 4)))
    dkey = tm.dropout_key(key, 3, 1, 0)
    print(f"dropoutKey(1234, 3, 1, 0) = {dkey:#018x}")
    print("uniform24(dropoutKey, 0..3) =", " ".join(repr(float(u)) for u in tm.uniform24(dkey, 4)))
    print(f"shuffleKey(1234, 0) = {tm.shuffle_key(key, 0):#018x}")
    print("normal(1234, 0..3) =", " ".join(repr(float(z)) for z in tm.normal(key, 4)))
    print("uniform24(1234, 0..3) =", " ".join(repr(float(u)) for u in tm.uniform24(key, 4)))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", help="model spec (.pbtxt)")
    parser.add_argument("--data", help="text corpus; one token per byte")
    parser.add_argument("--out", help="folder for the goldens")
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--check-rng", action="store_true", help="print Random.h draws and exit")
    parser.add_argument("--check-fp64", action="store_true",
                        help="compare fp32 gradients with a float64 run instead of writing goldens")
    args = parser.parse_args()
    if args.check_rng:
        check_rng()
        return
    missing = [f"--{n}" for n in ("spec", "data") if getattr(args, n) is None]
    if not args.check_fp64 and args.out is None:
        missing.append("--out")
    if missing:
        parser.error(f"missing {', '.join(missing)}")
    if args.steps < 1:
        parser.error("--steps must be at least 1")

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    try:
        check_fp64(args) if args.check_fp64 else write_goldens(args)
    except (tm.SpecError, OSError) as e:
        raise SystemExit(str(e))


if __name__ == "__main__":
    main()
