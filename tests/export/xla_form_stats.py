#!/usr/bin/env python3
"""Compiles exported modules on XLA:CPU and prints, per case folder: compile time, the median
of 20 calls after 3 warm-up calls on the folder's own inputs (a call includes putting the inputs
on the device and reading the outputs back), and the all-gathers and all-reduces in XLA's
compiled module (SPMD cases: the folder's `partitions` file).

  tests/interop/run_interop.sh --script tests/export/xla_form_stats.py [--jsonl FILE] CASE_DIR...
      CASE_DIR: a folder written by fusedsl_export_write_cases (module.hlo, input_<k>.npy),
      e.g. build/ci/tests/export/xla_cases/seed_transformer.fused_xla_cpu
      --jsonl FILE: also append one JSON object per case to FILE
"""
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import run_hlo  # noqa: E402  (sets XLA_FLAGS before jax is imported; exits 77 without jax)

WARMUP, CALLS = 3, 20


def collectives(exe):
    text = "\n".join(m.to_string() for m in exe.hlo_modules())
    return {op: len(re.findall(r"\s" + op + r"(?:-start)?\(", text)) for op in ("all-gather", "all-reduce")}


def stats(d, jsonl):
    module, ins, _, parts, _, _ = run_hlo.case_files(d, "hlo")
    start = time.perf_counter()
    exe, devices, types = run_hlo.compile_module(module, parts)
    compile_s = time.perf_counter() - start
    inputs = [run_hlo.np.load(p) for p in ins]
    for _ in range(WARMUP):
        run_hlo.run(exe, devices, types, inputs)
    calls = []
    for _ in range(CALLS):
        start = time.perf_counter()
        run_hlo.run(exe, devices, types, inputs)
        calls.append(time.perf_counter() - start)
    c = collectives(exe)
    case, median_ms = os.path.basename(os.path.normpath(d)), statistics.median(calls) * 1e3
    print(f"{case}: compile {compile_s:.2f} s, median of {CALLS} calls {median_ms:.2f} ms, "
          f"all-gather {c['all-gather']}, all-reduce {c['all-reduce']}")
    if jsonl:
        with open(jsonl, "a") as f:
            f.write(json.dumps({"case": case, "partitions": parts, "compile_s": round(compile_s, 3),
                                "warmup_calls": WARMUP, "calls": CALLS,
                                "median_call_ms": round(median_ms, 3),
                                "all_gather": c["all-gather"], "all_reduce": c["all-reduce"],
                                "jax": run_hlo.jax.__version__,
                                "load_average_1min": round(os.getloadavg()[0], 2)}) + "\n")


def main():
    args, jsonl = sys.argv[1:], None
    if args[:1] == ["--jsonl"] and len(args) >= 2:
        jsonl, args = args[1], args[2:]
    if not args:
        print(__doc__)
        return 2
    for d in args:
        stats(d, jsonl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
