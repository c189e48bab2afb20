"""Generators for docs/compile-time.md: measure.sh, tu_cost.py and CTest's JUnit output."""

import re
import xml.etree.ElementTree as ET

from . import TableError, generator, path_of, read_json, table


def compiler_name(version):
    """A compiler's --version line, shortened: nvcc's own last line names the CUDA release."""
    m = re.search(r"cuda_(\d+\.\d+)", version)
    if m and "release" not in version:
        return f"nvcc (CUDA {m.group(1)})"
    return version


def num(x, digits=1):
    return "" if x is None else f"{float(x):.{digits}f}"


@generator("compile_depth")
def compile_depth(files, options):
    """Compile time and peak memory of the seed example and GPT-2-small shapes at 1-24 layers,
    written with `stack` and unrolled. Reads the --json file of
    benchmarks/compile_time/measure.sh (rows: model, layers, form, compiler, result, wall_s,
    cpu_s, peak_rss_mib, graph_nodes, kernels, arena_kib)."""
    data = read_json(files[0])
    rows = []
    for r in data.get("rows", []):
        time = (num(r["cpu_s"]) if r["result"] == "ok"
                else f"{r['result']} (after {num(r['cpu_s'])})")
        rows.append([r["model"], r["layers"], r["form"], r["compiler"], time,
                     num(r["wall_s"]) if r["wall_s"] is not None else "", r["peak_rss_mib"],
                     r["graph_nodes"], r["kernels"], r["arena_kib"]])
    if not rows:
        raise TableError(f"{files[0]}: no rows")
    lines = table(["model", "layers", "written as", "compiler", "CPU s", "wall s", "peak RSS MiB",
                   "graph nodes", "kernels", "arena KiB"], rows,
                  ["l", "r", "l", "l", "r", "r", "r", "r", "r", "r"])
    nvcc = (f"`{data['nvcc_flags']}`" if "nvcc_flags" in data else "`-x cu` and the same flags")
    return lines + ["", f"`{data.get('compiler', '')}` with `{data.get('flags', '')}`; nvcc with "
                    f"{nvcc}. A row that fails shows the CPU time until the compiler stopped."]


@generator("compile_tu")
def compile_tu(files, options):
    """Compile time and peak memory of translation units with the build's own commands. Reads
    the --json file of benchmarks/compile_time/tu_cost.py (rows: source, wall_s, cpu_s,
    peak_rss_mib)."""
    data = read_json(files[0])
    rows = [[f"`{r['source']}`", num(r["cpu_s"]), num(r["wall_s"]), r["peak_rss_mib"],
             "nvcc" if re.search(r"cuda|nvcc", r.get("compiler", ""), re.I) else "g++"]
            for r in sorted(data.get("rows", []), key=lambda r: -r["cpu_s"])]
    if not rows:
        raise TableError(f"{files[0]}: no rows")
    return table(["translation unit", "CPU s", "wall s", "peak RSS MiB", "compiler"], rows,
                 ["l", "r", "r", "r", "l"]) + [
        "", "Each with its target's command from compile_commands.json (the `ci` preset: Release, "
        "warnings as errors), without ccache; a source that several targets compile is timed "
        "with the first. Compilers: " + "; ".join(f"`{compiler_name(c)}`"
                                                  for c in data.get("compilers", [])) +
        ". CPU s is user + system time of the compiler and its children."]


@generator("test_suite")
def test_suite(files, options):
    """How long the test suite takes: CTest's JUnit file (--output-junit) and the summary JSON
    that benchmarks/record.py writes beside it (wall_seconds, jobs, exit_status). Option
    slowest=N: how many of the slowest tests to list (default 5)."""
    summary = next((read_json(f) for f in files if f.endswith(".json")), None)
    xml_file = next((f for f in files if f.endswith(".xml")), None)
    if summary is None or xml_file is None:
        raise TableError("needs the summary .json and the JUnit .xml")
    try:
        root = ET.parse(path_of(xml_file)).getroot()
    except (OSError, ET.ParseError) as e:
        raise TableError(f"{xml_file}: {e}")
    cases = []
    for tc in root.iter("testcase"):
        status = tc.get("status", "")
        if tc.find("failure") is not None:
            status = "failed"
        elif tc.find("skipped") is not None or status in ("notrun", "disabled"):
            status = "skipped"
        cases.append((tc.get("name"), float(tc.get("time", 0)), status or "run"))
    total = len(cases)
    failed = sum(1 for c in cases if c[2] == "failed")
    skipped = sum(1 for c in cases if c[2] == "skipped")
    rows = [["tests", f"{total}: {total - failed - skipped} passed, {failed} failed, "
                      f"{skipped} skipped"],
            [f"wall time, `ctest -j {summary['jobs']}`", f"{summary['wall_seconds']:.0f} s"],
            ["sum of the tests' own times", f"{sum(c[1] for c in cases):.0f} s"]]
    n = int(options.get("slowest", 5))
    slow = sorted(cases, key=lambda c: -c[1])[:n]
    rows.append([f"the {n} slowest", "; ".join(f"`{c[0]}` {c[1]:.0f} s" for c in slow)])
    return table(["", ""], rows, ["l", "l"])
