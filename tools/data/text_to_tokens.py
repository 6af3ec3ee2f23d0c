#!/usr/bin/env python3
"""text_to_tokens.py TEXT OUT [--megatron] [--dtype uint16|uint32]

Tokenizes a text file byte by byte (token id = byte value, vocabulary 256)
into the files runner-host's token datasets read, as the real tools write
them:
  OUT.bin                  nanoGPT's prepare.py layout: the ids, little-endian
                           (`type: token_bin`)
  OUT.bin + OUT.idx        --megatron: Megatron-LM's indexed dataset, one
                           document per paragraph (blank-line separated), the
                           MMIDIDX version 1 index (`type: megatron_indexed`,
                           path_prefix OUT)
Needs numpy (Debian's python3-numpy). The example jobs
configs/gpt_token_bin.yaml and configs/gpt_megatron.yaml read what
`tools/data/text_to_tokens.py README.md work_dirs/tokens/readme` and the
same with --megatron write.
"""
import argparse
import os
import struct

import numpy as np



def main():
    p = argparse.ArgumentParser()
    p.add_argument("text")
    p.add_argument("out", help="the output path without .bin/.idx")
    p.add_argument("--megatron", action="store_true")
    p.add_argument("--dtype", default="uint16", choices=["uint16", "uint32"])
    a = p.parse_args()
    data = open(a.text, "rb").read()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    if not a.megatron:
        np.frombuffer(data, dtype=np.uint8).astype(a.dtype).tofile(a.out + ".bin")
        print(f"{a.out}.bin: {len(data)} tokens ({a.dtype})")
        return
    # Megatron has no uint32: int32 holds the same ids.
    dtype, code = (np.uint16, 8) if a.dtype == "uint16" else (np.int32, 4)
    docs = [d for d in data.split(b"\n\n") if d]
    tokens = [np.frombuffer(d, dtype=np.uint8).astype(dtype) for d in docs]
    np.concatenate(tokens).tofile(a.out + ".bin")
    lengths = np.array([len(t) for t in tokens], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)]) * np.dtype(dtype).itemsize
    with open(a.out + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(tokens)) + struct.pack("<Q", len(tokens) + 1))
        f.write(lengths.tobytes())
        f.write(offsets.astype(np.int64).tobytes())
        f.write(np.arange(len(tokens) + 1, dtype=np.int64).tobytes())
    print(f"{a.out}.bin/.idx: {len(tokens)} documents, {int(lengths.sum())} tokens ({np.dtype(dtype).name})")


if __name__ == "__main__":
    main()
