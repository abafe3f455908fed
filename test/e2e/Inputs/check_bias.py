#!/usr/bin/env python3
"""Lists the expert biases (e_score_correction_bias) of a model.safetensors:
name, shape, and whether any value moved from 0. Exits 1 when there is none.

  check_bias.py MODEL.safetensors
"""
import json
import struct
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    found = 0
    for name in sorted(header):
        if not name.endswith("e_score_correction_bias"):
            continue
        info = header[name]
        begin, end = info["data_offsets"]
        values = struct.unpack(f"<{(end - begin) // 4}f", body[begin:end])
        moved = "moved" if any(v != 0.0 for v in values) else "zero"
        print(f"{name} {info['shape']} {moved}".replace(", ", ","))
        found += 1
    if not found:
        sys.exit(f"{sys.argv[1]}: no expert bias")


if __name__ == "__main__":
    main()
