#!/usr/bin/env python3
"""Hugging Face transformers' GPT-2 small decoding with its KV cache, one thread: the peer of
gpt2_decode_bench's decode cases (same shapes, random weights, same contexts and dtypes).

    hf_gpt2_decode.py [--out FILE.json] [--steps N]

Needs torch and transformers (scripts/setup-model-venv --reference). For each dtype (float32,
bfloat16) and context (128, 1023 tokens): the cache is filled by one forward pass of the
context, then each timed step feeds one token and crops the cache back to the context after it
(DynamicCache.crop(-1)), so every step runs at the same position; the median of the steps is
reported. The roofline is the bytes a step
must read (the weights once, the embedding table as the LM head, every layer's keys and values
at the cached positions, in the cache's dtype) over the bandwidth of a numpy copy of two 512 MiB
arrays measured in the same run (bytes read + written per second, the best of 5).
"""
import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from decode_roofline import LAYERS, POSITIONS, V, copy_bandwidth, record, write_report  # noqa: E402
import transformers  # noqa: E402
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bandwidth = copy_bandwidth()
    cfg = GPT2Config(n_layer=LAYERS, n_embd=768, n_head=12, vocab_size=V, n_positions=POSITIONS,
                     attn_implementation="eager")
    base = GPT2LMHeadModel(cfg).eval()
    results = []
    for dtype_name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        model = base.to(dtype)
        size = torch.tensor([], dtype=dtype).element_size()
        for ctx in (128, 1023):
            ids = torch.randint(0, V, (1, ctx))
            with torch.inference_mode():
                out = model(ids, use_cache=True, past_key_values=DynamicCache())
                cache = out.past_key_values
                token = torch.tensor([[464]])
                times = []
                for _ in range(args.steps + 3):
                    t0 = time.perf_counter()
                    model(token, past_key_values=cache, use_cache=True)
                    times.append(time.perf_counter() - t0)
                    cache.crop(-1)  # back to ctx tokens
            t = float(np.median(times[3:]))
            results.append(record(f"hf_decode/weights:{dtype_name}/ctx:{ctx}", t, size, ctx,
                                  bandwidth))
    write_report(args.out, {"torch": torch.__version__, "transformers": transformers.__version__},
                 bandwidth, args.steps, results)

if __name__ == "__main__":
    main()
