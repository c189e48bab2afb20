#!/usr/bin/env python3
"""A transformer on XLA:CPU (jaxlib 0.10.2) beside fusedsl's fused CPU executor, one core.

  xla_model_bench.py MODEL.hlo MODEL_BENCH [--model seed|medium] [--calls N] [--rounds R]
                     [--bench-min-time S] [--cpu C] [--json OUT]

MODEL.hlo is fusedsl's export of the model's graph (`examples/export_hlo DIR [seed|medium]` writes
DIR/<model>.unfused.hlo; the demo writes demo-out/seed_unfused.hlo): the same graph the executor
runs, which XLA then fuses and compiles with its own passes. MODEL_BENCH is the model_bench
binary; its `<model>_fused/1` case runs in the same invocation, after XLA's rounds, and the
script prints the ratio of the two times.

One core for both: the process (and so model_bench, its child) is pinned to one CPU with
os.sched_setaffinity, and XLA's intra-op Eigen thread pool is off (--xla_cpu_multi_thread_eigen=
false). XLA is timed in wall time per call (execute, then block until the output is ready), so
its per-call dispatch from Python is included; the script measures that dispatch on a one-element
module and prints it, to subtract. fusedsl's figure is model_bench's mean wall time per call.
Inputs: normal(0, 0.05) for every parameter, 1 + normal(0, 0.05) for the layernorm gammas (as
model_bench). XLA's output must come back finite, of the input's shape (the interop tests check
the exported graph's numbers). Exit codes: 0 done, 1 a failure, 2 bad usage, 77 jax not importable.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# One host device (run_hlo would ask for 8: with 8 the same module ran ~40% slower here) and no
# intra-op Eigen threads.
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    flags += " --xla_force_host_platform_device_count=1"
if "xla_cpu_multi_thread_eigen" not in flags:
    flags += " --xla_cpu_multi_thread_eigen=false"
os.environ["XLA_FLAGS"] = flags.strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# The interop tests' runner compiles HLO text on XLA:CPU (and exits 77 itself without jax).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "interop"))
import run_hlo  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

TINY_HLO = """HloModule tiny, entry_computation_layout={(f32[1]{0})->f32[1]{0}}

ENTRY main {
  p = f32[1]{0} parameter(0)
  ROOT r = f32[1]{0} add(p, p)
}
"""


def compile_text(text):
    """XLA:CPU executable of HLO text, on one device."""
    with tempfile.NamedTemporaryFile("w", suffix=".hlo") as f:
        f.write(text)
        f.flush()
        exe, devices, _ = run_hlo.compile_module(f.name, 1)
    return exe, devices[0]


def time_calls(exe, args, calls, rounds):
    """Per-call wall seconds: `rounds` rounds of `calls` calls; returns every round's mean."""
    for _ in range(max(3, calls // 10)):  # warm up
        exe.execute_sharded(args).disassemble_into_single_device_arrays()[0][0].block_until_ready()
    means = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = exe.execute_sharded(args).disassemble_into_single_device_arrays()
            out[0][0].block_until_ready()
        means.append((time.perf_counter() - t0) / calls)
    return means


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("hlo")
    ap.add_argument("model_bench")
    ap.add_argument("--model", choices=["seed", "medium"], default="seed",
                    help="which model_bench case to compare with (default seed)")
    ap.add_argument("--calls", type=int, help="calls per round (default 200, medium 10)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("--bench-min-time", type=float, default=1.0,
                    help="model_bench's --benchmark_min_time per repetition (default 1)")
    ap.add_argument("--cpu", type=int, default=0, help="the one CPU to run on (default 0)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    calls = a.calls or (200 if a.model == "seed" else 10)
    if not os.path.isfile(a.hlo) or not os.access(a.model_bench, os.X_OK):
        print(f"xla_model_bench: need an HLO file and an executable model_bench "
              f"(got {a.hlo!r}, {a.model_bench!r})", file=sys.stderr)
        return 2
    os.sched_setaffinity(0, {a.cpu})

    text = open(a.hlo).read()
    params = run_hlo.entry_parameters(text)
    rng = np.random.default_rng(1)
    inputs = [((1.0 if "gamma" in name else 0.0) + 0.05 * rng.standard_normal(shape)).astype(dtype)
              for name, dtype, shape in params]
    exe, device = compile_text(text)
    args = [jax.device_put(x, device) for x in inputs]
    xla = time_calls(exe, args, calls, a.rounds)
    y = np.asarray(exe.execute_sharded(args).disassemble_into_single_device_arrays()[0][0])
    if y.shape != params[0][2] or not np.isfinite(y).all():
        print(f"xla_model_bench: XLA's output is {y.shape}, finite: {bool(np.isfinite(y).all())}; "
              f"expected a finite {params[0][2]}", file=sys.stderr)
        return 1

    tiny, _ = compile_text(TINY_HLO)
    dispatch = time_calls(tiny, [jax.device_put(np.ones(1, np.float32), device)], 2000, 5)

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "model.json")
        run = subprocess.run([a.model_bench, f"--benchmark_filter={a.model}_fused/1$",
                              f"--benchmark_min_time={a.bench_min_time}",
                              "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true",
                              f"--benchmark_out={out}", "--benchmark_out_format=json"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            print(f"xla_model_bench: {a.model_bench} failed ({run.returncode}):\n{run.stderr}",
                  file=sys.stderr)
            return 1
        bench = json.load(open(out))
    mean = next(b for b in bench["benchmarks"] if b.get("aggregate_name") == "mean")
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[mean["time_unit"]]
    fused_wall = mean["real_time"] * scale

    r = {
        "xla_median_round_us": statistics.median(xla) * 1e6,
        "xla_best_round_us": min(xla) * 1e6,
        "xla_dispatch_us": statistics.median(dispatch) * 1e6,
        "fusedsl_wall_us": fused_wall * 1e6,
        "fma_peak_gflops": float(bench["context"].get("fma_peak_gflops_one_core", "nan")),
        "model": a.model,
        "jax_version": jax.__version__,
    }
    r["xla_minus_dispatch_us"] = r["xla_median_round_us"] - r["xla_dispatch_us"]
    r["speedup_vs_xla"] = r["xla_median_round_us"] / r["fusedsl_wall_us"]
    r["speedup_vs_xla_minus_dispatch"] = r["xla_minus_dispatch_us"] / r["fusedsl_wall_us"]
    print(f"{a.model} on one core (CPU {a.cpu}), jax {jax.__version__}:")
    print(f"  XLA:CPU        {r['xla_median_round_us']:8.1f} us per call (median of {a.rounds} rounds "
          f"of {calls}; best round {r['xla_best_round_us']:.1f}); dispatch of a one-element "
          f"module {r['xla_dispatch_us']:.1f} us")
    print(f"  fusedsl fused  {r['fusedsl_wall_us']:8.1f} us per call (model_bench {a.model}_fused/1, "
          f"mean wall time of 3 repetitions)")
    print(f"  fusedsl is {r['speedup_vs_xla']:.2f}x faster ({r['speedup_vs_xla_minus_dispatch']:.2f}x "
          f"with XLA's dispatch taken out)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
