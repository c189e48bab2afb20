#!/usr/bin/env python3
"""Compile time and peak memory of translation units, with the build's own compile commands.

  benchmarks/compile_time/tu_cost.py --build build/ci --json OUT.json SOURCE...

Reads BUILD/compile_commands.json (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON), compiles
each SOURCE (a path relative to the repository) once with its command, without the ccache
launcher, into a temporary object, under GNU time (/usr/bin/time -v), one after the other, and
writes per source: wall seconds, CPU seconds (user + system) and the compiler's peak resident
set, with the compiler, the load average before and after each compile, the date and the CPU.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def time_compile(args, cwd, extra=(), inspect=None, check=True):
    """Compiles once with `args` (a compile command) plus `extra` into a temporary object, under
    GNU time: wall and CPU seconds and peak RSS, and what inspect(object, stderr) returns (while
    the object exists). A failed compile exits, or with check=False returns None and stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "tu.o")
        out = list(args)
        if "-o" in out:
            out[out.index("-o") + 1] = obj
        report = os.path.join(tmp, "time.txt")
        proc = subprocess.run(["/usr/bin/time", "-v", "-o", report, *out, *extra], cwd=cwd,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            if not check:
                return None, proc.stderr
            sys.exit(f"compiling failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        with open(report) as f:
            t = f.read()
        inspected = inspect(obj, proc.stderr) if inspect else {}
    wall = re.search(r"Elapsed \(wall clock\) time.*: (.*)", t).group(1).strip()
    secs = 0.0
    for part in wall.split(":"):
        secs = secs * 60 + float(part)
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", t).group(1))
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", t).group(1))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
    result = {"wall_s": round(secs, 2), "cpu_s": round(user + system, 2),
              "peak_rss_mib": round(rss / 1024), **inspected}
    return (result, proc.stderr) if not check else result


def unit_commands(build, sources, who):
    """(source, compiler command without the ccache launcher, directory) of each source (a path
    relative to the repository) from BUILD/compile_commands.json; exits naming every source the
    database lacks before anything is compiled."""
    db_path = os.path.join(build, "compile_commands.json")
    try:
        with open(db_path) as f:
            db = json.load(f)
    except OSError as e:
        sys.exit(f"{who}: {db_path}: {e} (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)")
    by_file = {}
    for entry in db:
        rel = os.path.relpath(os.path.realpath(entry["file"]), os.path.realpath(REPO))
        by_file.setdefault(rel, entry)
    missing = [src for src in sources if src not in by_file]
    if missing:
        sys.exit(f"{who}: not in {db_path}: {' '.join(missing)}")
    out = []
    for src in sources:
        entry = by_file[src]
        words = entry.get("arguments") or shlex.split(entry["command"])
        while words and ("ccache" in os.path.basename(words[0])):
            words = words[1:]  # the launcher: measure the compiler itself, never a cache hit
        out.append((src, words, entry["directory"]))
    return out


def write_results(path, compilers, rows):
    """The JSON file of a run: the date, the CPU, the compilers and one row per unit."""
    with open("/proc/cpuinfo") as f:
        cpu = re.search(r"model name\s*:\s*(.*)", f.read()).group(1)
    with open(path, "w") as f:
        json.dump({"date": datetime.datetime.now(datetime.timezone.utc).strftime(
                       "%Y-%m-%dT%H:%M:%SZ"),
                   "cpu": cpu, "compilers": compilers, "rows": rows}, f, indent=1)
        f.write("\n")


def parse_args(argv, doc):
    """--build DIR --json FILE SOURCE...: the arguments of tu_cost.py and breakdown.py."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--build", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("sources", nargs="+")
    args = p.parse_args(argv)
    if not os.access("/usr/bin/time", os.X_OK):
        sys.exit("needs GNU time as /usr/bin/time (Debian package 'time')")
    return args


def main(argv=None):
    args = parse_args(argv, __doc__)
    rows, versions = [], {}
    for src, words, directory in unit_commands(args.build, args.sources, "tu_cost"):
        if words[0] not in versions:
            out = subprocess.run([words[0], "--version"], capture_output=True, text=True).stdout
            lines = [x for x in out.splitlines() if x.strip()]
            # nvcc prints "Cuda compilation tools, release 13.0, V13.0.88" among other lines.
            release = [x for x in lines if "release" in x]
            versions[words[0]] = (release or lines or [os.path.basename(words[0])])[0]
        before = load_average()
        row = {"source": src, **time_compile(words, directory),
               "compiler": versions[words[0]], "load_before": before, "load_after": load_average()}
        print(f"tu_cost: {src}: {row['wall_s']} s wall, {row['cpu_s']} s CPU, "
              f"{row['peak_rss_mib']} MiB", flush=True)
        rows.append(row)
    write_results(args.json, sorted(set(versions.values())), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
