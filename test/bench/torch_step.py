#!/usr/bin/python3
"""PyTorch eager peer of Braid's CPU training-step benchmark.

Builds the spec's model with test/numerics/torch_model.py (fp32, eager, Braid's
initial weights), feeds random token batches of the spec's shapes and times
full optimizer steps: forward and backward of every micro-batch, gradient
clipping, AdamW, zero_grad. Prints one JSON line:

  {"tokens_per_s": ..., "step_s": <median step seconds>, "threads": ..., "torch_version": ...}

  torch_step.py --spec test/bench/specs/cpu-small.pbtxt --threads 2 --warmup 2 --steps 5
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="model spec (.pbtxt)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="CPU threads (default: all)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    args = parser.parse_args()
    if args.threads < 1 or args.warmup < 0 or args.steps < 1:
        parser.error("--threads and --steps must be at least 1, --warmup at least 0")
    return args


def main():
    args = parse_args()
    # Both libraries read these when they load, so before torch does. The
    # GEMMs run on OpenBLAS's own threads and everything else on OpenMP's;
    # OpenMP workers that spin between parallel regions take the cores from
    # OpenBLAS (a step runs several times slower on a busy machine), so they
    # sleep instead.
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "numerics"))
    import torch_model as tm

    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float32)
    try:
        config, train = tm.load_spec(args.spec)
    except (tm.SpecError, OSError) as e:
        raise SystemExit(str(e))

    model = tm.build_model(config, train)
    model.train()
    optimizer = torch.optim.AdamW(tm.weight_decay_groups(model, train.weight_decay), lr=train.lr,
                                  betas=(train.beta1, train.beta2), eps=train.eps, foreach=True)
    dropout = tm.torch_dropout if max(train.hidden_dropout, train.attention_dropout) > 0 else None
    forward_args = {"dropout": dropout} if dropout else {}

    generator = torch.Generator().manual_seed(train.seed)
    batches = [[torch.randint(0, config.vocab_size, (train.micro_batch_size, train.seq_len + 1),
                              generator=generator) for _ in range(train.micro_batches)]
               for _ in range(args.warmup + args.steps)]

    def train_step(step, micro_batches):
        for rows in micro_batches:
            logits = model(rows[:, :-1], **forward_args)
            loss = F.cross_entropy(logits.view(-1, config.vocab_size), rows[:, 1:].reshape(-1))
            (loss / train.micro_batches).backward()
        if train.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train.grad_clip)
        for group in optimizer.param_groups:
            group["lr"] = train.learning_rate(step)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    times = []
    for step, micro_batches in enumerate(batches, 1):
        start = time.perf_counter()
        train_step(step, micro_batches)
        if step > args.warmup:
            times.append(time.perf_counter() - start)

    step_s = statistics.median(times)
    tokens = train.global_batch_size * train.seq_len
    print(json.dumps({"tokens_per_s": tokens / step_s, "step_s": step_s,
                      "threads": args.threads, "torch_version": torch.__version__}))


if __name__ == "__main__":
    main()
