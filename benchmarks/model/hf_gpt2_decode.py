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
import json
import os
import platform
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel  # noqa: E402


def copy_bandwidth():
    n = 1 << 27
    a = np.ones(n, dtype=np.float32)
    b = np.zeros(n, dtype=np.float32)
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = max(best, 2 * n * 4 / (time.perf_counter() - t0))
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bandwidth = copy_bandwidth()
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024,
                     attn_implementation="eager")
    base = GPT2LMHeadModel(cfg).eval()
    d, f, v, layers = 768, 3072, 50257, 12
    params = layers * (d * 3 * d + 3 * d + d * d + d + d * f + f + f * d + d + 4 * d) + v * d + 2 * d
    results = []
    for dtype_name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        model = base.to(dtype)
        size = torch.tensor([], dtype=dtype).element_size()
        for ctx in (128, 1023):
            ids = torch.randint(0, v, (1, ctx))
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
            bytes_per_token = params * size + 2 * layers * d * size * (ctx + 1)
            results.append({"name": f"hf_decode/weights:{dtype_name}/ctx:{ctx}",
                             "seconds_per_token": t, "tokens_per_second": 1 / t,
                             "bytes_per_token": bytes_per_token,
                             "roofline_fraction": bytes_per_token / t / bandwidth})
            print(f"{results[-1]['name']:34s} {1e3 * t:8.2f} ms  {1 / t:6.1f} tokens/s  "
                  f"roofline {results[-1]['roofline_fraction']:.3f}")
    report = {"context": {"torch": torch.__version__, "transformers": transformers.__version__,
                          "threads": 1, "machine": platform.machine(),
                          "copy_bytes_per_second": bandwidth, "statistic": "median",
                          "steps": args.steps},
              "benchmarks": results}
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)


if __name__ == "__main__":
    main()
