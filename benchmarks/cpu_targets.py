#!/usr/bin/env python3
"""The CPU performance goals under the three readings of "fraction of the FMA peak", one table.

Either runs the benchmarks (model_bench, cpu_gemm_bench, cpu_attention_bench of a Release build)
a number of times, or reads Google Benchmark JSON files they wrote, and prints a Markdown table:
for each goal, each reading's range over the runs and how many runs met it.

  benchmarks/cpu_targets.py --build build/ci --runs 5 [--keep DIR]
  benchmarks/cpu_targets.py --from seed1.json gemm1.json attention.json ...

The readings (docs/performance.md, "How fractions of the peak are measured"): `peak_fraction` (the mean call over the
FMA peak measured at start-up), `peak_fraction_best` (the fastest call over it) and
`peak_fraction_paired` (calls against FMA chains of the same length run right after each one).
Exit status 0 whatever the verdicts: this reports; it does not judge a build.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

READINGS = [("mean", "peak_fraction"), ("fastest", "peak_fraction_best"),
            ("paired", "peak_fraction_paired")]

# Fractions of peak, under each reading: (label, benchmark name, target).
PEAK_TARGETS = [
    ("seed, one thread, >= 0.75 of peak", "seed_fused/1", 0.75),
    # B packed once, as the executor packs weights at bind (BM_gemm_fusedsl packs it per call).
    ("GEMM 128x512x128, B prepacked, >= 0.85", "BM_gemm_fusedsl_prepacked/m:128/n:512/k:128", 0.85),
    ("GEMM 128x128x512, B prepacked, >= 0.85", "BM_gemm_fusedsl_prepacked/m:128/n:128/k:512", 0.85),
    ("GEMM 512x512x512, B prepacked, >= 0.85", "BM_gemm_fusedsl_prepacked/m:512/n:512/k:512", 0.85),
]
# Speedups: (label, benchmark name, counter, target).
SPEEDUP_TARGETS = [
    ("seed, one thread, >= 2x the reference backend", "seed_fused/1", "speedup_vs_reference", 2.0),
    ("attention seq 2048 d 64, >= 2x unfused", "BM_attention_fusedsl/seq:2048/d:64/heads:1/causal:0/path:0",
     "speedup_vs_unfused", 2.0),
]

RUNS = [  # (binary under the build folder, filter, file stem, runs it every time)
    ("benchmarks/model/model_bench", "seed_(reference|eigen|fused/1$)", "seed", True),
    ("benchmarks/cpu/cpu_gemm_bench",
     "fma_peak|BM_gemm_fusedsl_prepacked/m:(128|512)/n:(512|128)/k:(128|512)$", "gemm", True),
    ("benchmarks/cpu/cpu_attention_bench", "seq:2048/d:64/heads:1/causal:0", "attention", False),
]


def run_benchmarks(build, runs, out_dir, min_time):
    files = []
    for i in range(1, runs + 1):
        for binary, flt, stem, every_time in RUNS:
            if not every_time and i > 1:
                continue
            exe = os.path.join(build, binary)
            if not os.access(exe, os.X_OK):
                sys.exit(f"cpu_targets: {exe} is not built (cmake --build {build} --target "
                         f"{os.path.basename(binary)})")
            out = os.path.join(out_dir, f"{stem}{i}.json")
            rc = subprocess.run([exe, f"--benchmark_filter={flt}",
                                 f"--benchmark_min_time={min_time}", f"--benchmark_out={out}",
                                 "--benchmark_out_format=json"],
                                stdout=subprocess.DEVNULL).returncode
            if rc != 0:
                sys.exit(f"cpu_targets: {exe} failed (exit status {rc})")
            files.append(out)
    return files


def load(files):
    """{benchmark name: [its result dict, one per file that has it]}, and the runs' dates."""
    found, dates = {}, []
    for path in files:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"cpu_targets: can't read {path}: {e}")
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
            sys.exit(f"cpu_targets: {path} is not Google Benchmark JSON output (no 'benchmarks')")
        dates.append(data.get("context", {}).get("date", "?"))
        # cpu_gemm_bench output without this context key timed BM_gemm_fusedsl with B packed
        # once: the row now named BM_gemm_fusedsl_prepacked.
        renamed = "gemm_fusedsl_pack_b" not in data.get("context", {})
        for b in data["benchmarks"]:
            if b.get("run_type", "iteration") == "iteration" and "name" in b:
                name = b["name"]
                if renamed and name.startswith("BM_gemm_fusedsl/"):
                    name = "BM_gemm_fusedsl_prepacked/" + name[len("BM_gemm_fusedsl/"):]
                found.setdefault(name, []).append(b)
    return found, dates


def cell(values, target):
    if not values:
        return "not measured"
    lo, hi = min(values), max(values)
    met = sum(v >= target for v in values)
    span = f"{lo:.3f}" if len(values) == 1 else f"{lo:.3f}-{hi:.3f}"
    return f"{span} ({met} of {len(values)})"


def table(found):
    lines = ["| target | " + " | ".join(r for r, _ in READINGS) + " |",
             "|---|" + "---|" * len(READINGS)]
    for label, name, target in PEAK_TARGETS:
        runs = found.get(name, [])
        cells = [cell([b[key] for b in runs if key in b], target) for _, key in READINGS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| target | measured |")
    lines.append("|---|---|")
    for label, name, key, target in SPEEDUP_TARGETS:
        runs = found.get(name, [])
        values = [b[key] for b in runs if key in b]
        lines.append(f"| {label} | {cell(values, target)} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--build", help="a Release build folder (runs the benchmarks)")
    src.add_argument("--from", dest="files", nargs="+", metavar="JSON",
                     help="Google Benchmark JSON files to read instead of running")
    p.add_argument("--runs", type=int, default=3, help="runs of the seed and GEMM benchmarks")
    p.add_argument("--min-time", type=float, default=1.0, help="--benchmark_min_time per case")
    p.add_argument("--keep", help="folder for the JSON files (default: a temporary one)")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")

    if args.files:
        found, dates = load(args.files)
    elif args.keep:
        os.makedirs(args.keep, exist_ok=True)
        found, dates = load(run_benchmarks(args.build, args.runs, args.keep, args.min_time))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            found, dates = load(run_benchmarks(args.build, args.runs, tmp, args.min_time))
    print(f"runs from {min(dates)} to {max(dates)}; (n of m): runs meeting the target\n")
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
