#!/usr/bin/env python3
"""Compares two training runs: their JSON-lines logs (loss and gradient
norm of every step) and their final checkpoints (every tensor of the model
and of the optimizer state). The equivalence check of every parallel layout:
a layout must train as the single-rank run of the same global batch does.

  compare_runs.py --logs A.jsonl B.jsonl --checkpoints DIR_A DIR_B
                  [--rtol R] [--tensor-rtol T] [--moment-rtol M] [--exact]

A tensor's difference is ||a - b|| / ||a|| (0 when both are zero), held to
--tensor-rtol (default: --rtol), the AdamW moments' (optimizer.safetensors)
to --moment-rtol (default: --tensor-rtol); a loss or norm's is
|a - b| / |a|, held to --rtol. With --exact every value must be bit-identical.
Prints one summary line and exits 1 when anything is beyond the tolerance.
"""
import argparse
import array
import json
import math
import os
import struct
import sys


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = body[begin:end]
        if info["dtype"] == "F32":
            values = array.array("f", raw)
        else:  # compared bit for bit
            values = array.array("B", raw)
        tensors[name] = (info["dtype"], tuple(info["shape"]), values)
    return tensors


def relative(a, b):
    return abs(a - b) / abs(a) if a != 0 else abs(b)


def tensor_difference(a, b):
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    den = math.sqrt(sum(x * x for x in a))
    return num / den if den > 0 else num


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--logs", nargs=2, required=True)
    p.add_argument("--checkpoints", nargs=2, required=True)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--tensor-rtol", type=float)
    p.add_argument("--moment-rtol", type=float)
    p.add_argument("--exact", action="store_true")
    args = p.parse_args()
    tensor_rtol = args.tensor_rtol if args.tensor_rtol is not None else args.rtol
    moment_rtol = args.moment_rtol if args.moment_rtol is not None else tensor_rtol
    problems = []

    la, lb = (read_log(x) for x in args.logs)
    if len(la) != len(lb):
        problems.append(f"the logs have {len(la)} and {len(lb)} steps")
    worst_step = 0.0
    for a, b in zip(la, lb):
        for key in ("loss", "grad_norm"):
            d = relative(a[key], b[key])
            worst_step = max(worst_step, d)
            if (args.exact and a[key] != b[key]) or d > args.rtol:
                problems.append(
                    f"step {a['step']}: {key} {a[key]!r} vs {b[key]!r}")

    worst_tensor = 0.0
    count = 0
    for file, bound in (("model.safetensors", tensor_rtol),
                        ("optimizer.safetensors", moment_rtol)):
        ta, tb = (read_safetensors(os.path.join(d, file))
                  for d in args.checkpoints)
        if sorted(ta) != sorted(tb):
            problems.append(f"{file}: the tensors differ by name")
            continue
        for name, (dtype, shape, a) in ta.items():
            dtype_b, shape_b, b = tb[name]
            count += 1
            if (dtype, shape) != (dtype_b, shape_b):
                problems.append(f"{name}: {dtype}{shape} vs {dtype_b}{shape_b}")
                continue
            if args.exact or dtype != "F32":
                if a.tobytes() != b.tobytes():
                    problems.append(f"{name}: not bit-identical")
                continue
            d = tensor_difference(a, b)
            worst_tensor = max(worst_tensor, d)
            if d > bound:
                problems.append(f"{name}: differs by {d:.3g}")

    if args.exact:
        bound = "bit-identical"
    elif moment_rtol != tensor_rtol:
        bound = (f"within {args.rtol:g} (tensors {tensor_rtol:g}, "
                 f"moments {moment_rtol:g})")
    elif tensor_rtol != args.rtol:
        bound = f"within {args.rtol:g} (tensors {tensor_rtol:g})"
    else:
        bound = f"within {args.rtol:g}"
    verdict = bound if not problems else "DIFFERENT"
    print(f"{len(la)} steps, {count} tensors: losses and norms differ by at "
          f"most {worst_step:.3g}, tensors by {worst_tensor:.3g}: {verdict}")
    for line in problems[:20]:
        print("  " + line)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
