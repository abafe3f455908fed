#!/usr/bin/env python3
"""Writes a checkpoint's manifest.json anew for the files as they are now.

  reseal_checkpoint.py DIR

Every file of DIR but the manifest is listed with its size and CRC-32C,
keeping the manifest's format version and step, so that a test that edits a
file reaches the checks behind the integrity check.
"""
import json
import os
import sys

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    path = os.path.join(d, "manifest.json")
    with open(path) as f:
        old = json.load(f)
    files = []
    for name in sorted(os.listdir(d)):
        if name == "manifest.json":
            continue
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        files.append({"name": name, "bytes": len(data), "crc32c": f"{crc32c(data):08x}"})
    manifest = {"format_version": old["format_version"], "step": old["step"], "files": files}
    with open(path, "w") as f:
        json.dump(manifest, f)


if __name__ == "__main__":
    assert crc32c(b"123456789") == 0xE3069283
    main()
