#!/usr/bin/env python3
"""Summarises clang's -ftime-trace of translation units: where the front end and the back end
spend their time, and which function templates the optimiser spends it on.

  benchmarks/compile_time/trace_summary.py --json OUT.json [--cxx clang++-19] [--flags "..."]
      [--include DIR] SOURCE...

Compiles each SOURCE (relative to the repository) with CXX (default clang++-19) -std=gnu++20 -O2
-march=native -DNDEBUG -I DIR (default: include) -isystem /usr/include/eigen3 plus --flags,
-ftime-trace
(granularity 500 us), without ccache, under GNU time, and writes per source: CPU seconds and peak
RSS; clang's totals (front end: parsing sources and classes, template instantiation, constant
evaluation; back end: optimiser and code generation); and the optimiser's time (OptFunction
events) by function, demangled and with template arguments dropped, the largest first, with the
number of instantiations of each.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from breakdown import without_template_arguments, qualified_name  # noqa: E402

TOTALS = ["ExecuteCompiler", "Frontend", "Source", "ParseClass", "InstantiateClass",
          "InstantiateFunction", "PerformPendingInstantiations", "EvaluateAsInitializer",
          "CodeGen Function", "Backend", "Optimizer", "CodeGenPasses"]


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                         text=True).stdout.splitlines()
    return out if len(out) == len(names) else names


def summarise(trace_path, top):
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    totals = {e["name"][len("Total "):]: round(e["dur"] / 1e6, 2) for e in events
              if e["name"].startswith("Total ") and e["name"][len("Total "):] in TOTALS}
    opt = collections.Counter()
    for e in events:
        if e["name"] == "OptFunction":
            opt[e["args"]["detail"]] += e["dur"] / 1e6
    mangled = list(opt)
    family_time, family_count = collections.Counter(), collections.Counter()
    for m, d in zip(mangled, demangle(mangled)):
        family = without_template_arguments(qualified_name(d))
        family_time[family] += opt[m]
        family_count[family] += 1
    return totals, [{"function": f, "optimizer_s": round(t, 2), "instances": family_count[f]}
                    for f, t in family_time.most_common(top)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    p.add_argument("--cxx", default="clang++-19")
    p.add_argument("--flags", default="")
    p.add_argument("--include", default=os.path.join(REPO, "include"),
                   help="the fusedsl headers to compile against (default: this tree's)")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("sources", nargs="+")
    args = p.parse_args(argv)
    version = subprocess.run([args.cxx, "--version"], capture_output=True,
                             text=True).stdout.splitlines()[0]
    rows = []
    for src in args.sources:
        with tempfile.TemporaryDirectory() as tmp:
            obj, report = os.path.join(tmp, "u.o"), os.path.join(tmp, "time.txt")
            cmd = ["/usr/bin/time", "-v", "-o", report, args.cxx, "-std=gnu++20", "-O2",
                   "-march=native", "-DNDEBUG", "-I", args.include, "-isystem",
                   "/usr/include/eigen3", *args.flags.split(), "-ftime-trace",
                   "-ftime-trace-granularity=500", "-c", os.path.join(REPO, src), "-o", obj]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"trace_summary: {src} does not compile with {version}:\n"
                         f"{proc.stderr[-3000:]}")
            with open(report) as f:
                t = f.read()
            totals, functions = summarise(os.path.join(tmp, "u.json"), args.top)
        cpu = (float(re.search(r"User time \(seconds\): ([\d.]+)", t).group(1)) +
               float(re.search(r"System time \(seconds\): ([\d.]+)", t).group(1)))
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) // 1024
        print(f"trace_summary: {src}: {cpu:.1f} s CPU, {rss} MiB, front end "
              f"{totals.get('Frontend')} s, back end {totals.get('Backend')} s", flush=True)
        rows.append({"source": src, "flags": args.flags, "include": os.path.relpath(args.include, REPO),
                     "cpu_s": round(cpu, 2),
                     "peak_rss_mib": rss, "totals": totals, "optimizer_by_function": functions})
    with open(args.json, "w") as f:
        json.dump({"compiler": version, "rows": rows}, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
