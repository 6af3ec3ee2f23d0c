#!/usr/bin/env python3
"""compare_safetensors.py A B --rel R [--what TEXT]

The float32 tensors of two .safetensors files (read with the standard
library: 8-byte little-endian header length, JSON header, raw data) must
have the same names and agree within R of each tensor's largest magnitude
in B (pass the reference as B). R has no default: 0 where both runs do the
same arithmetic (bit for bit), else a bound the caller derives beside the
call. Prints the worst relative difference; exits 1 naming the first tensor
that differs more. The out-of-tree and multi-node tests compare two runs'
checkpoints with it.
"""
import argparse
import json
import struct
import sys


def load(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__" or e["dtype"] != "F32":
            continue
        b, end = e["data_offsets"]
        out[name] = struct.unpack("<%df" % ((end - b) // 4), data[8 + n + b:8 + n + end])
    return out


def delta(x, y):
    # NaN on both sides is equal; on one side only, as far apart as can be
    # (max() would otherwise keep or drop a NaN by its position).
    if x != x or y != y:
        return 0.0 if (x != x) == (y != y) else float("inf")
    return abs(x - y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rel", type=float, required=True)
    p.add_argument("--what", default="")
    # The key third of a fused qkv bias (`*.attn.qkv.bias`, laid out q, k, v)
    # has a zero gradient in exact arithmetic (softmax is invariant to a
    # constant added to every score of a row), so AdamW moves it by its
    # rounding noise alone, up to lr per step whatever the noise's size: two
    # runs that round differently drift apart there without bound. With
    # --key-bias-apart that third is reported, not checked; q and v are.
    p.add_argument("--key-bias-apart", action="store_true")
    args = p.parse_args()
    a, b = load(args.a), load(args.b)
    if a.keys() != b.keys() or not a:
        sys.exit(f"FAIL: {args.what}: the tensors differ: {sorted(a)} vs {sorted(b)}")
    worst, apart = 0.0, []
    for name in sorted(a):
        scale = max(max(abs(x) for x in b[name]), 1e-12)
        pairs = list(zip(a[name], b[name]))
        if args.key_bias_apart and name.endswith("attn.qkv.bias") and len(pairs) % 3 == 0:
            third = len(pairs) // 3
            key = pairs[third:2 * third]
            apart.append(f"{name} key third {max(delta(x, y) for x, y in key) / scale:.2g}")
            pairs = pairs[:third] + pairs[2 * third:]
        diff = max(delta(x, y) for x, y in pairs)
        worst = max(worst, diff / scale)
        if diff > args.rel * scale:
            sys.exit(f"FAIL: {args.what}: {name}: max |diff| {diff} > {args.rel} x {scale}")
    note = f" (apart: {'; '.join(apart)})" if apart else ""
    print(f"ok   {args.what}: {len(a)} tensors, max rel diff {worst:.2g}{note}")


if __name__ == "__main__":
    main()
