#!/usr/bin/env python3
"""torch.mm (Intel MKL's sgemm in PyPI's x86-64 torch) at cpu_gemm_bench's shapes, on one thread,
as fractions of the FMA peak cpu_gemm_bench measured in the same run.

  python3 -m venv .venv-bench && .venv-bench/bin/pip install torch numpy   # once
  build/<dir>/benchmarks/cpu/cpu_gemm_bench --benchmark_out=gemm.json --benchmark_out_format=json
  .venv-bench/bin/python benchmarks/cpu/torch_mm_bench.py --peak-from gemm.json [--out torch.json]

Each shape (m, n, k: C[m,n] = A[m,k] B[k,n], f32, row-major, as in cpu_gemm_bench) is timed as
torch.mm(a, b, out=c) with torch.set_num_threads(1): warm-up calls, then calls for at least
--min-time seconds. Reported like cpu_gemm_bench's counters: `peak_fraction` (the mean call,
thread CPU time) and `peak_fraction_best` (the fastest call, wall time), each 2mnk / time / peak;
and, when the JSON holds them, the same shape's BM_gemm_fusedsl (B packed in the call),
BM_gemm_fusedsl_prepacked and BM_gemm_eigen fastest-call fractions beside it. --out writes the
rows as Google Benchmark-style JSON (context + benchmarks).
"""
import argparse
import json
import platform
import sys
import time

SHAPES = [(128, 512, 128), (128, 128, 512), (512, 512, 512), (512, 2048, 512), (512, 512, 2048)]


def read_gemm_json(path):
    """(peak FLOP/s, {benchmark name: row}) from cpu_gemm_bench's JSON output."""
    with open(path) as f:
        data = json.load(f)
    peak = data.get("context", {}).get("fma_peak_gflops")
    if peak is None:
        sys.exit(f"torch_mm_bench: {path} has no context.fma_peak_gflops (not cpu_gemm_bench output?)")
    rows = {b["name"]: b for b in data.get("benchmarks", []) if "name" in b}
    return float(peak) * 1e9, rows


def time_mm(torch, m, n, k, min_time):
    """(mean thread CPU seconds per call, fastest call in wall seconds, calls)."""
    gen = torch.Generator().manual_seed(m * 7 + n * 3 + k)
    a = torch.rand(m, k, generator=gen) * 2 - 1
    b = torch.rand(k, n, generator=gen) * 2 - 1
    c = torch.empty(m, n)
    for _ in range(3):
        torch.mm(a, b, out=c)
    # As cpu_gemm_bench times (fastest_call.hpp): the mean over the calls' thread CPU time (torch
    # runs a one-thread mm on the calling thread), the fastest call in wall time.
    calls, total, fastest = 0, 0.0, float("inf")
    while total < min_time or calls < 10:
        c0, w0 = time.thread_time(), time.perf_counter()
        torch.mm(a, b, out=c)
        w1 = time.perf_counter()
        total += time.thread_time() - c0
        fastest = min(fastest, w1 - w0)
        calls += 1
    return total / calls, fastest, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peak-from", required=True, metavar="GEMM_JSON",
                    help="cpu_gemm_bench's --benchmark_out JSON of the same run (its FMA peak)")
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds of calls per shape")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        sys.exit(f"torch_mm_bench: cannot import torch ({e}); make the venv as the usage says")
    peak, rows = read_gemm_json(args.peak_from)
    torch.set_num_threads(1)
    context = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host_machine": platform.machine(),
               "torch_version": torch.__version__, "torch_num_threads": torch.get_num_threads(),
               "mkl_available": bool(torch.backends.mkl.is_available()),
               "fma_peak_gflops": peak * 1e-9, "peak_from": args.peak_from}
    print(f"torch {torch.__version__}, MKL {'available' if context['mkl_available'] else 'NOT available'}, "
          f"{torch.get_num_threads()} thread; FMA peak {peak * 1e-9:.1f} GFLOP/s (from {args.peak_from})")
    print("| m x n x k | torch.mm mean | torch.mm fastest | fusedsl (packs B) fastest | "
          "fusedsl (B prepacked) fastest | Eigen fastest |")
    print("|---|---|---|---|---|---|")
    results = []
    for m, n, k in SHAPES:
        mean, fastest, calls = time_mm(torch, m, n, k, args.min_time)
        flops = 2.0 * m * n * k
        row = {"name": f"torch_mm/m:{m}/n:{n}/k:{k}", "run_type": "iteration", "iterations": calls,
               "cpu_time": mean * 1e6, "time_unit": "us", "peak_fraction": flops / mean / peak,
               "peak_fraction_best": flops / fastest / peak}
        results.append(row)
        shape = f"m:{m}/n:{n}/k:{k}"

        def other(name):
            b = rows.get(f"{name}/{shape}")
            return f"{b['peak_fraction_best']:.3f}" if b and "peak_fraction_best" in b else "not run"

        print(f"| {m}x{n}x{k} | {row['peak_fraction']:.3f} | {row['peak_fraction_best']:.3f} | "
              f"{other('BM_gemm_fusedsl')} | {other('BM_gemm_fusedsl_prepacked')} | "
              f"{other('BM_gemm_eigen')} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"context": context, "benchmarks": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
