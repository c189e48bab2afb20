#!/usr/bin/env python3
"""Writes the seeds of checkpoint_fuzzer (seeds_checkpoint/): small safetensors files whose tensors
fit, nearly fit or do not fit the fuzzer's program. Each seed's first byte is part of the 8-byte
header length, and also picks the fuzzer's options (bit 0: BERT renaming, bit 1: no conversion).

  python3 tests/fuzz/make_checkpoint_seeds.py
"""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8}


def safetensors(tensors):
    header, data = {}, b""
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((i * 7 + 3) % 251 for i in range(n))
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


FIT = [("embeddings.word_embeddings.weight", "F32", [5, 4]),
       ("embeddings.LayerNorm.weight", "BF16", [4]),
       ("embeddings.LayerNorm.bias", "F16", [4]),
       ("encoder.layer.0.attention.self.query.weight", "F32", [4, 4]),
       ("encoder.layer.0.attention.self.query.bias", "F32", [4]),
       ("ids", "I32", [2])]


def main():
    out = HERE / "seeds_checkpoint"
    out.mkdir(exist_ok=True)
    seeds = {
        "fit": FIT,
        "converted": [(n, "F16" if d == "F32" else "F32" if d in ("BF16", "F16") else d, s)
                      for n, d, s in FIT],
        "bert_prefixed": [("bert." + n.replace("LayerNorm.weight", "LayerNorm.gamma"), d, s)
                          for n, d, s in FIT] + [("bert.pooler.dense.bias", "F32", [4]),
                                                 ("bert.embeddings.position_ids", "I64", [1, 3])],
        "misfit": [("embeddings.word_embeddings.weight", "F32", [4, 5]), ("ids", "I64", [2]),
                   ("extra", "F32", [1])],
    }
    for name, tensors in seeds.items():
        (out / f"{name}.safetensors").write_bytes(safetensors(tensors))


if __name__ == "__main__":
    main()
