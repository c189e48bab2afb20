"""The memory roofline of GPT-2 small's decode step, shared by the peers of gpt2_decode_bench
(hf_gpt2_decode.py, xla_gpt2_decode.py): a copy's bandwidth, the bytes a step must read, and the
record each peer writes per case."""
import json
import platform
import time

import numpy as np

D, F, V, LAYERS, HEADS, POSITIONS = 768, 3072, 50257, 12, 12, 1024
# Every weight once; the embedding table is also the LM head.
PARAMS = LAYERS * (D * 3 * D + 3 * D + D * D + D + D * F + F + F * D + D + 4 * D) + V * D + 2 * D


def copy_bandwidth():
    """Bytes read + written per second by a numpy copy of two 512 MiB arrays, the best of 5."""
    n = 1 << 27
    a = np.ones(n, dtype=np.float32)
    b = np.zeros(n, dtype=np.float32)
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = max(best, 2 * n * 4 / (time.perf_counter() - t0))
    return best


def step_bytes(element_size, ctx):
    """The weights once and every layer's keys and values at ctx + 1 positions."""
    return PARAMS * element_size + 2 * LAYERS * D * element_size * (ctx + 1)


def record(name, seconds, element_size, ctx, bandwidth):
    """One case's result, printed as it is made."""
    b = step_bytes(element_size, ctx)
    r = {"name": name, "seconds_per_token": seconds, "tokens_per_second": 1 / seconds,
         "bytes_per_token": b, "roofline_fraction": b / seconds / bandwidth}
    print(f"{name:34s} {1e3 * seconds:8.2f} ms  {1 / seconds:6.1f} tokens/s  "
          f"roofline {r['roofline_fraction']:.3f}")
    return r


def write_report(path, peer, bandwidth, steps, results):
    """The peer's JSON file (when path is given): its versions and settings (peer), the run's
    common context, and the per-case records."""
    if not path:
        return
    context = dict(peer, threads=1, machine=platform.machine(), copy_bytes_per_second=bandwidth,
                   statistic="median", steps=steps)
    with open(path, "w") as fh:
        json.dump({"context": context, "benchmarks": results}, fh, indent=1)
