#!/usr/bin/env python3
"""Where a translation unit's compile time goes, and what code it leaves in its object.

  benchmarks/compile_time/breakdown.py --build build/ci --json OUT.json SOURCE...

Reads BUILD/compile_commands.json (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON) and
compiles each SOURCE (a path relative to the repository; g++ units only) once with its own
command plus `-ftime-report`, without the ccache launcher, under GNU time. Writes per source:
  - cpu_s, peak_rss_mib: the compiler's user + system seconds and its peak resident set;
  - phases: GCC's phases (parsing, deferred template work, optimisation and code generation)
    with their user + system CPU seconds;
  - items: the largest of GCC's timed items (template instantiation, constant expression
    evaluation, callgraph expansion, ...), CPU seconds;
  - code: the object's code bytes (`nm -S` of its text symbols) by namespace, fusedsl's
    namespaces two deep (fusedsl::hlo, fusedsl::cpu) and three under fusedsl::cpu and
    fusedsl::cuda (fusedsl::cpu::kernels), others by their outer namespace (std, Eigen, ...);
    with the number of functions in each and the number of distinct function templates.
"""

import collections
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tu_cost import parse_args, time_compile, unit_commands, write_results  # noqa: E402
PHASE = re.compile(r"^\s*phase ([^:]+?)\s*:\s*([\d.]+)\s*\(\s*\d+%\)\s*([\d.]+)")
ITEM = re.compile(r"^\s*([^:]+?)\s*:\s*([\d.]+)\s*\(\s*\d+%\)\s*([\d.]+)")
TOTAL = re.compile(r"^\s*TOTAL\s*:\s*([\d.]+)\s+([\d.]+)")


def qualified_name(demangled):
    """The qualified name of a demangled function symbol, without its return type and
    parameters (template arguments kept)."""
    depth, start = 0, 0
    for i, c in enumerate(demangled):
        if c in "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0:
            start = i + 1
        elif c == "(" and depth == 0 and i > 0:
            return demangled[start:i]
    return demangled[start:]


def without_template_arguments(name):
    out, depth = [], 0
    for c in name:
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def namespace_of(name):
    parts = without_template_arguments(name).split("::")[:-1]
    if not parts:
        return "(global)"
    if parts[0] != "fusedsl":
        return parts[0]
    if len(parts) >= 3 and parts[1] in ("cpu", "cuda") and parts[2] == "kernels":
        return "::".join(parts[:3])
    return "::".join(parts[:2])


def code_by_namespace(obj):
    out = subprocess.run(["nm", "-C", "-S", "--defined-only", obj], capture_output=True,
                         text=True, check=True).stdout
    size, count, templates = collections.Counter(), collections.Counter(), collections.defaultdict(set)
    for line in out.splitlines():
        p = line.split(None, 3)
        if len(p) < 4 or p[2] not in ("t", "T", "w", "W", "i", "I"):
            continue
        name = qualified_name(p[3])
        ns = namespace_of(name)
        size[ns] += int(p[1], 16)
        count[ns] += 1
        templates[ns].add(without_template_arguments(name))
    return [{"namespace": ns, "bytes": b, "functions": count[ns],
             "distinct_functions": len(templates[ns])} for ns, b in size.most_common()]


def object_code(obj):
    sections = subprocess.run(["size", "-A", obj], capture_output=True, text=True).stdout
    return {"text_bytes": sum(int(x.split()[1]) for x in sections.splitlines()
                              if x.startswith(".text")),
            "code": code_by_namespace(obj)}


def time_report(args, cwd):
    def inspect(obj, stderr):
        phases, items, total = [], [], None
        for line in stderr.splitlines():
            m = PHASE.match(line)
            if m:
                phases.append({"phase": m.group(1),
                               "cpu_s": round(float(m.group(2)) + float(m.group(3)), 2)})
                continue
            m = TOTAL.match(line)
            if m:
                total = round(float(m.group(1)) + float(m.group(2)), 2)
                continue
            m = ITEM.match(line)
            if m:
                items.append({"item": m.group(1).lstrip("|"),
                              "cpu_s": round(float(m.group(2)) + float(m.group(3)), 2)})
        items.sort(key=lambda r: -r["cpu_s"])
        return {"report_total_cpu_s": total, "phases": phases, "items": items[:12],
                **object_code(obj)}

    row, stderr = time_compile(args, cwd, ["-ftime-report"], inspect, check=False)
    if row is not None:
        return {**row, "time_report_error": None}
    if "internal compiler error" not in stderr:
        sys.exit(f"breakdown: compiling failed:\n{stderr[-2000:]}")
    # GCC 12 can stop in its timer code (timevar.cc) under -ftime-report on some units; such a
    # unit is measured without the report.
    ice = stderr[stderr.index("internal compiler error"):].split("\n")[0]
    row = time_compile(args, cwd, (), lambda obj, _: {
        "phases": [], "items": [], "report_total_cpu_s": None, **object_code(obj)})
    return {**row, "time_report_error": ice}


def main(argv=None):
    args = parse_args(argv, __doc__)
    rows, compilers = [], set()
    for src, words, directory in unit_commands(args.build, args.sources, "breakdown"):
        if "nvcc" in os.path.basename(words[0]):
            sys.exit(f"breakdown: {src}: g++ units only")
        compilers.add(subprocess.run([words[0], "--version"], capture_output=True,
                                     text=True).stdout.splitlines()[0])
        row = {"source": src, **time_report(words, directory)}
        top = ", ".join(f"{c['namespace']} {c['bytes'] // 1024} KiB" for c in row["code"][:3])
        print(f"breakdown: {src}: {row['cpu_s']} s CPU, {row['peak_rss_mib']} MiB, "
              f".text {row['text_bytes'] // 1024} KiB ({top})", flush=True)
        rows.append(row)
    write_results(args.json, sorted(compilers), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
