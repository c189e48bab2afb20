#!/usr/bin/env python3
"""Checks benchmarks/cpu_targets.py on committed benchmark output (trimmed Google Benchmark files):
each reading's range and count, a case missing from the files, and unreadable input."""

import contextlib
import io
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "benchmarks"))
import cpu_targets  # noqa: E402

data = os.path.join(here, "data")


def run(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cpu_targets.main(list(args))
    return rc, out.getvalue()


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def f(name):
    return os.path.join(data, name)


rc, text = run("--from", f("seed1.json"), f("seed2.json"), f("gemm1.json"), f("gemm2.json"),
               f("attention1.json"))
check(rc == 0, "exit status 0")
rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
# seed1 / seed2: mean 0.6707 / 0.6896, fastest 0.759 / 0.7751, paired 0.781 / 0.7839.
check(rows["seed, one thread, >= 0.75 of peak"] ==
      "| seed, one thread, >= 0.75 of peak | 0.671-0.690 (0 of 2) | 0.759-0.775 (2 of 2) | "
      "0.781-0.784 (2 of 2) |", "seed row: " + rows.get("seed, one thread, >= 0.75 of peak", ""))
# gemm1 / gemm2, 128x512x128: paired 0.8263 / 0.8597 -> 1 of 2 at 0.85.
# (Written before BM_gemm_fusedsl packed B in its timed call: read as BM_gemm_fusedsl_prepacked.)
check("| 0.826-0.860 (1 of 2) |" in rows["GEMM 128x512x128, B prepacked, >= 0.85"],
      "GEMM 128x512x128 paired")
check(rows["attention seq 2048 d 64, >= 2x unfused"].endswith("| 3.010 (1 of 1) |"),
      "attention speedup from the one file that has it")
check("2026-11-30T18:49:23+00:00 to 2026-11-30T18:50:15+00:00" in text, "the runs' dates")

# Without the GEMM files their rows say so instead of a range.
rc, text = run("--from", f("seed1.json"))
check("| GEMM 512x512x512, B prepacked, >= 0.85 | not measured | not measured | not measured |"
      in text,
      "a case missing from the files reads 'not measured'")

# A file that is not benchmark output is refused with its name.
bad = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"cpu_targets_bad_{os.getpid()}.json")
with open(bad, "w") as fh:
    fh.write('{"no": "benchmarks"}')
refusal = None
try:
    run("--from", bad)
except SystemExit as e:
    refusal = str(e.code)
finally:
    os.remove(bad)
check(refusal is not None, "a file without 'benchmarks' must be refused")
check(bad in refusal and "Google Benchmark" in refusal, f"the refusal names the file: {refusal}")
# Output that says BM_gemm_fusedsl packs B per call: only the _prepacked row is read for the target.
new = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"cpu_targets_new_{os.getpid()}.json")
with open(new, "w") as fh:
    json.dump({"context": {"date": "2026-12-01T00:00:00+00:00", "gemm_fusedsl_pack_b": "per call"},
               "benchmarks": [
                   {"name": "BM_gemm_fusedsl/m:128/n:512/k:128", "peak_fraction": 0.5,
                    "peak_fraction_best": 0.5, "peak_fraction_paired": 0.5},
                   {"name": "BM_gemm_fusedsl_prepacked/m:128/n:512/k:128", "peak_fraction": 0.9,
                    "peak_fraction_best": 0.91, "peak_fraction_paired": 0.92}]}, fh)
try:
    rc, text = run("--from", new)
finally:
    os.remove(new)
check("| GEMM 128x512x128, B prepacked, >= 0.85 | 0.900 (1 of 1) | 0.910 (1 of 1) | 0.920 (1 of 1) |"
      in text, "new output: the prepacked row, not the per-call one")
print("cpu_targets_test: all checks passed")
