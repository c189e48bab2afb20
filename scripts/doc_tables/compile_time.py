"""Generators for docs/compile-time.md: measure.sh, tu_cost.py, compare_trees.sh and CTest's JUnit
output."""

import re
import xml.etree.ElementTree as ET

from . import TableError, generator, median, path_of, read_json, read_jsonl, table


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


def rows_of(files):
    """The JSON file of a compile-time script and its rows; a file without rows is an error."""
    data = read_json(files[0])
    rows = data.get("rows", [])
    if not rows:
        raise TableError(f"{files[0]}: no rows")
    return data, rows


@generator("compile_phases")
def compile_phases(files, options):
    """Where a unit's compile time goes: GCC's phases and its largest timed items. Reads the
    --json file of benchmarks/compile_time/breakdown.py (rows: source, cpu_s, peak_rss_mib,
    phases, items)."""
    data, rows_in = rows_of(files)
    items = ["template instantiation", "constant expression evaluation",
             "callgraph functions expansion", "callgraph ipa passes"]
    rows = []
    for r in rows_in:
        if r.get("time_report_error"):
            rows.append([f"`{r['source']}`", num(r["cpu_s"]), r["peak_rss_mib"]] +
                        ["(no report: GCC stopped under -ftime-report)"] + [""] * 6)
            continue
        phase = {p["phase"]: p["cpu_s"] for p in r["phases"]}
        item = {i["item"]: i["cpu_s"] for i in r["items"]}
        total = sum(phase.values()) or 1.0

        def share(x):
            return f"{x:.1f} ({100 * x / total:.0f}%)"
        rows.append([f"`{r['source']}`", num(r["cpu_s"]), r["peak_rss_mib"],
                     share(phase.get("parsing", 0.0)), share(phase.get("lang. deferred", 0.0)),
                     share(phase.get("opt and generate", 0.0))] +
                    [num(item[i]) if i in item else "<" + num(min(item.values()) if item else 0)
                     for i in items])
    return table(["translation unit", "CPU s", "peak RSS MiB", "parsing", "deferred (templates)",
                  "optimisation and code generation", "template instantiation",
                  "constant evaluation", "callgraph expansion", "IPA passes"], rows,
                 ["l"] + ["r"] * 9) + [
        "", "Each unit compiled once with its target's command from compile_commands.json (the "
        "`ci` preset) plus `-ftime-report`, without ccache. Phases and items are GCC's, in CPU "
        "seconds (user + system; the share is of the phases' sum); the items overlap the "
        "phases (instantiation happens while parsing and in the deferred phase; callgraph "
        "expansion and the IPA passes are code generation). `<x`: not among the report's 12 "
        "largest items. Compiler: " + "; ".join(f"`{c}`" for c in data.get("compilers", [])) +
        "."]


@generator("compile_code")
def compile_code(files, options):
    """The code a unit leaves in its object, by namespace: the --json file of
    benchmarks/compile_time/breakdown.py (rows: source, text_bytes, code: namespace, bytes,
    functions, distinct_functions). Option top=N: namespaces shown per unit (default 5)."""
    data, rows_in = rows_of(files)
    n = int(options.get("top", 5))
    rows = []
    for r in rows_in:
        code = r["code"]
        total = sum(c["bytes"] for c in code) or 1
        parts = [f"{c['namespace']} {c['bytes'] / 1024:.0f} KiB ({100 * c['bytes'] / total:.0f}%,"
                 f" {c['functions']} fns of {c['distinct_functions']})" for c in code[:n]]
        rows.append([f"`{r['source']}`", f"{r['text_bytes'] / 1024:.0f}",
                     str(sum(c["functions"] for c in code)), "; ".join(parts)])
    return table(["translation unit", ".text KiB", "functions", f"the {n} largest namespaces"],
                 rows, ["l", "r", "r", "l"]) + [
        "", "From `nm -C -S` of each object: the code bytes of its function symbols, grouped by "
        "the function's namespace (fusedsl's two deep, `fusedsl::cpu::kernels` apart; a class "
        "name stands for its namespace where the function is a member of a class declared "
        "directly in it); \"fns of N\": functions in the object, and how many distinct "
        "functions (templates counted once) they are instances of."]


@generator("compile_ratios")
def compile_ratios(files, options):
    """Units' compile time as ratios to the reference unit compiled in the same run, against their
    limits: the --json file of benchmarks/compile_time/ratio_check.py (rows: label, source, flags,
    cpu_s, reference_cpu_s, ratio, max_ratio, peak_rss_mib, max_rss_mib)."""
    data, rows_in = rows_of(files)
    rows = []
    for r in rows_in:
        ok = r["ratio"] <= r["max_ratio"] and r["peak_rss_mib"] <= r["max_rss_mib"]
        rows.append([r["label"], f"`{r['source']}` {' '.join(r['flags'])}".rstrip(),
                     num(r["cpu_s"]), " / ".join(num(x) for x in r["reference_cpu_s"]),
                     f"{r['ratio']:.2f}", f"{r['max_ratio']:.2f}", str(r["peak_rss_mib"]),
                     str(r["max_rss_mib"]), "within" if ok else "over"])
    return table(["unit", "source and flags", "CPU s", "reference CPU s (before / after)",
                  "ratio", "limit", "peak RSS MiB", "limit MiB", ""], rows,
                 ["l", "l", "r", "r", "r", "r", "r", "r", "l"]) + [
        "", f"`{data.get('compiler', '')}` with `-std=gnu++20 -O2 -march=native -DNDEBUG`, no "
        "ccache; the ratio is the unit's CPU seconds over the mean of the reference compiles "
        "before and after it."]


@generator("compile_trace")
def compile_trace(files, options):
    """clang's -ftime-trace of units, summarised: the --json file of
    benchmarks/compile_time/trace_summary.py (rows: source, cpu_s, peak_rss_mib, totals,
    optimizer_by_function). Option top=N: functions shown per unit (default 5)."""
    data, rows_in = rows_of(files)
    n = int(options.get("top", 5))
    rows = []
    for r in rows_in:
        t = r["totals"]
        funcs = "; ".join(f"`{f['function'].split('::')[-1]}` {f['optimizer_s']:.2f} s "
                          f"({f['instances']})" for f in r["optimizer_by_function"][:n])
        rows.append([f"`{r['source']}`", num(r["cpu_s"]), str(r["peak_rss_mib"]),
                     num(t.get("Frontend")), num(t.get("Source")),
                     num((t.get("InstantiateFunction") or 0) + (t.get("InstantiateClass") or 0)),
                     num(t.get("Backend")), num(t.get("Optimizer")), funcs])
    return table(["translation unit", "CPU s", "peak RSS MiB", "front end", "parsing sources",
                  "instantiating", "back end", "optimiser",
                  f"the optimiser's {n} largest functions (instances)"], rows,
                 ["l", "r", "r", "r", "r", "r", "r", "r", "l"]) + [
        "", f"`{data.get('compiler', '')}` with `-O2 -march=native -ftime-trace`, seconds of clang's "
        "own timers (its Total events; the back end holds the optimiser and code generation); a "
        "function's time sums its instances' OptFunction events, template arguments dropped."]


@generator("check_fresh")
def check_fresh(files, options):
    """The README's commands on a fresh Debian 12 root: the --json file of scripts/check-fresh
    (commit, cpu, nproc, steps: step, exit, wall_s)."""
    data = read_json(files[0])
    steps = data.get("steps", [])
    if not steps:
        raise TableError(f"{files[0]}: no steps")
    rows = [[f"`{st['step']}`", "passed" if st["exit"] == 0 else f"failed (exit {st['exit']})",
             f"{st['wall_s']:.0f}"] for st in steps]
    return table(["step", "result", "wall s"], rows, ["l", "l", "r"]) + [
        "", f"Commit `{data.get('commit', '?')}`, {data.get('nproc', '?')} cores; the root made "
        "by `debootstrap --variant=minbase bookworm`, each command run in it by chroot with "
        "CI=true, its packages installed by the command itself, no ccache cache."]


@generator("cold_ci")
def cold_ci(files, options):
    """`.ci/run` on a machine without a ccache cache: its JSON (commit, nproc, steps: step, exit,
    wall_s, test_s: CTest's total test time from the step's log)."""
    data = read_json(files[0])
    steps = data.get("steps", [])
    if not steps:
        raise TableError(f"{files[0]}: no steps")
    rows = []
    for st in steps:
        wall, tests = st["wall_s"], st.get("test_s")
        rows.append([f"`{st['step']}`",
                     "passed" if st["exit"] == 0 else f"failed (exit {st['exit']})",
                     f"{wall / 60:.1f}",
                     f"{(wall - tests) / 60:.1f}" if tests is not None else "—",
                     f"{tests / 60:.1f}" if tests is not None else "—"])
    total = sum(st["wall_s"] for st in steps)
    rows.append(["all", "", f"{total / 60:.1f}", "", ""])
    return table(["step", "result", "wall min", "packages, configure, build, venvs min",
                  "tests min"], rows, ["l", "l", "r", "r", "r"]) + [
        "", f"Commit `{data.get('commit', '?')}`, {data.get('nproc', '?')} cores, CI=true; "
        + data.get("note", "")]


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


@generator("compile_vs_base")
def compile_vs_base(files, options):
    """The same translation units compiled from two trees, alternating in one run: the tree before
    a change ("base") and the current one ("new"). Reads the JSON lines of
    benchmarks/compile_time/compare_trees.sh (tree, commit, source, cpu_s, peak_rss_mib,
    compiler). Per source: the median CPU seconds of each tree, the largest peak RSS, and the
    median of the new/base CPU-time ratios of consecutive pairs. Options: max_ratio=R and
    max_rss_mib=M add a column judging the new tree against those limits."""
    rows_in = read_jsonl(files[0])
    # The new tree may be compiled in several modes (compare_trees.sh's NEW_MODES, e.g. the
    # compiled mode's define): each mode's rows pair with the base rows of the same source.
    base_of, by_source = {}, {}
    for r in rows_in:
        if r["tree"] == "base":
            base_of.setdefault(r["source"], []).append(r)
    for r in rows_in:
        if r["tree"] == "new":
            key = (r["source"], r.get("new_flags", ""))
            by_source.setdefault(key, {"base": base_of.get(r["source"], []), "new": []})
            by_source[key]["new"].append(r)
    max_ratio = float(options["max_ratio"]) if "max_ratio" in options else None
    max_rss = int(options["max_rss_mib"]) if "max_rss_mib" in options else None

    rows = []
    for (src, flags), t in by_source.items():
        base, new = t["base"], t["new"]
        if not base or not new:
            raise TableError(f"{files[0]}: {src} has no {'base' if not base else 'new'} row")
        ratios = [n["cpu_s"] / b["cpu_s"] for b, n in zip(base, new)]
        ratio = median(ratios)
        rss = max(n["peak_rss_mib"] for n in new)
        row = [f"`{src}`" + (f" (new: `{flags}`)" if flags else ""),
               "nvcc" if "cuda" in new[0].get("compiler", "").lower() else "g++",
               str(len(ratios)), num(median([b["cpu_s"] for b in base]), 2),
               str(max(b["peak_rss_mib"] for b in base)), num(median([n["cpu_s"] for n in new]), 2),
               str(rss), f"{ratio:.2f}" + (f" ({min(ratios):.2f}-{max(ratios):.2f})"
                                           if len(ratios) > 1 else "")]
        if max_ratio is not None or max_rss is not None:
            missed = []
            if max_ratio is not None and ratio > max_ratio:
                missed.append(f"time {ratio:.2f}x > {max_ratio:g}x")
            if max_rss is not None and rss > max_rss:
                missed.append(f"{rss} MiB > {max_rss} MiB, by {rss - max_rss} MiB")
            row.append("met" if not missed else "missed: " + "; ".join(missed))
        rows.append(row)
    if not rows:
        raise TableError(f"{files[0]}: no rows")
    cols = ["translation unit", "compiler", "pairs", "base: CPU s", "base: peak RSS MiB",
            "new: CPU s", "new: peak RSS MiB", "time ratio (range)"]
    align = ["l", "l", "r", "r", "r", "r", "r", "r"]
    if len(rows[0]) > len(cols):
        cols.append(f"target (<= {max_ratio:g}x, <= {max_rss} MiB)")
        align.append("l")
    commits = {r["tree"]: r["commit"] for r in rows_in}
    return table(cols, rows, align) + [
        "", f"base: `{commits.get('base', '?')}`, new: `{commits.get('new', '?')}`; medians over "
        "the pairs, peak RSS the largest; CPU s is user + system time of the compiler and its "
        "children; no ccache."]


@generator("profile_ab")
def profile_ab(files, options):
    """Two builds of model_profile in alternating rounds: the time a call of each model (thread CPU
    time, best of model_profile's rounds) before a change ("base") and after it ("new"). Reads the
    JSON lines of benchmarks/model/profile_ab.sh (round, tree, model, us_per_call). Per model: the
    median of each build over the rounds and the new/base ratio of the medians."""
    rows_in = read_jsonl(files[0])
    by_model = {}
    for r in rows_in:
        by_model.setdefault(r["model"], {"base": [], "new": []})[r["tree"]].append(r["us_per_call"])

    def ms(us):
        return f"{us / 1000:.3f}" if us < 10000 else f"{us / 1000:.1f}"

    rows = []
    for model, t in by_model.items():
        if not t["base"] or not t["new"]:
            raise TableError(f"{files[0]}: {model} has no {'base' if not t['base'] else 'new'} row")
        b, n = median(t["base"]), median(t["new"])
        rows.append([model, str(len(t["base"])), ms(b),
                     f"{ms(min(t['base']))}-{ms(max(t['base']))}", ms(n),
                     f"{ms(min(t['new']))}-{ms(max(t['new']))}", f"{n / b:.3f}"])
    if not rows:
        raise TableError(f"{files[0]}: no rows")
    return table(["model", "rounds", "base: ms a call", "base: range", "new: ms a call",
                  "new: range", "new / base"], rows)
