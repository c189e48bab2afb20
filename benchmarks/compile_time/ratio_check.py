#!/usr/bin/env python3
"""Compile-time regression check that holds on any machine: each unit's compiler CPU time as a
ratio to a fixed reference unit compiled in the same run (the CTest compile_time.ratios).

  benchmarks/compile_time/ratio_check.py [--limits FILE] [--json OUT] [--cxx g++]

Compiles benchmarks/compile_time/reference_unit.cpp (ordinary Eigen and standard-library code,
nothing of fusedsl's), then each unit of the limits file, each followed by the reference again,
with g++ -std=gnu++20 -O2 -march=native -DNDEBUG, without ccache, one compile at a time. A unit's
ratio is its CPU seconds (user + system) over the mean of the reference compiles before and after
it, so a machine that compiles everything faster or slower, or a load that slows both, leaves it
where it was. Exits 1 naming each unit whose ratio or peak RSS exceeds its limit.

Limits file (default ratio_limits.txt beside this script): one unit a line,
  <label> <max ratio> <max peak RSS MiB> <source> [flags...]
with the source relative to the repository; '#' starts a comment.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REFERENCE = os.path.join(HERE, "reference_unit.cpp")


def compile_once(cxx, source, flags):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "time.txt")
        cmd = ["/usr/bin/time", "-v", "-o", report, cxx, "-std=gnu++20", "-O2", "-march=native",
               "-DNDEBUG", "-I", os.path.join(REPO, "include"), "-isystem",
               "/usr/include/eigen3", *flags, "-c", source, "-o", os.path.join(tmp, "u.o")]
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env={**os.environ, "CCACHE_DISABLE": "1"})
        if proc.returncode != 0:
            sys.exit(f"ratio_check: compiling {source} failed:\n{proc.stderr[-2000:]}")
        with open(report) as f:
            t = f.read()
    cpu = (float(re.search(r"User time \(seconds\): ([\d.]+)", t).group(1)) +
           float(re.search(r"System time \(seconds\): ([\d.]+)", t).group(1)))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) // 1024
    return cpu, rss


def read_limits(path):
    units = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) < 4:
                sys.exit(f"ratio_check: {path}:{n}: want <label> <max ratio> <max RSS MiB> "
                         "<source> [flags...]")
            units.append({"label": words[0], "max_ratio": float(words[1]),
                          "max_rss_mib": int(words[2]), "source": words[3], "flags": words[4:]})
    return units


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limits", default=os.path.join(HERE, "ratio_limits.txt"))
    p.add_argument("--json")
    p.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    args = p.parse_args(argv)
    if not os.access("/usr/bin/time", os.X_OK):
        sys.exit("ratio_check: needs GNU time as /usr/bin/time (Debian package 'time')")
    units = read_limits(args.limits)
    ref_before, _ = compile_once(args.cxx, REFERENCE, [])
    rows, failures = [], []
    for u in units:
        cpu, rss = compile_once(args.cxx, os.path.join(REPO, u["source"]), u["flags"])
        ref_after, _ = compile_once(args.cxx, REFERENCE, [])
        ratio = cpu / ((ref_before + ref_after) / 2)
        ok = ratio <= u["max_ratio"] and rss <= u["max_rss_mib"]
        print(f"ratio_check: {u['label']}: {cpu:.1f} s CPU = {ratio:.2f}x the reference "
              f"(limit {u['max_ratio']:.2f}x), {rss} MiB (limit {u['max_rss_mib']}): "
              f"{'ok' if ok else 'OVER'}", flush=True)
        if not ok:
            failures.append(u["label"])
        rows.append({**u, "cpu_s": round(cpu, 2), "peak_rss_mib": rss,
                     "reference_cpu_s": [round(ref_before, 2), round(ref_after, 2)],
                     "ratio": round(ratio, 3)})
        ref_before = ref_after
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"compiler": subprocess.run([args.cxx, "--version"], capture_output=True,
                                                  text=True).stdout.splitlines()[0],
                       "rows": rows}, f, indent=1)
            f.write("\n")
    if failures:
        print(f"ratio_check: over the limit: {', '.join(failures)} (limits: {args.limits})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
