"""Generators for docs/performance-gpu.md: the JSON lines and log of benchmarks/gpu/check.sh."""

import re

from . import TableError, generator, read_jsonl, read_text, table

BF16_PEAK_TFLOPS = 989.4  # H200 dense bf16, datasheet


def records(files):
    out = []
    for f in files:
        if f.endswith(".jsonl"):
            out += read_jsonl(f)
    return out


@generator("gpu_checks")
def gpu_checks(files, options):
    """The CUDA tests and compute-sanitizer on the GPU. Reads check.sh's check.log (doctest
    summaries, each binary's exit status, the sanitizer summaries)."""
    log = read_text(files[0])
    rows = []
    for m in re.finditer(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed"
                         r"[^\n]*\n(?:[^\n]*\n){2}(\S+): exit (\d+)", log):
        rows.append([f"`{m.group(4)}`", f"{m.group(2)} of {m.group(1)} cases passed",
                     "pass" if m.group(5) == "0" and m.group(3) == "0" else "FAIL"])
    for m in re.finditer(r"^(memcheck|racecheck) (\S+): exit (\d+)", log, re.MULTILINE):
        rows.append([f"compute-sanitizer {m.group(1)}, `{m.group(2)}`", "",
                     "clean" if m.group(3) == "0" else f"exit {m.group(3)}"])
    errors = sum(int(x) for x in re.findall(r"ERROR SUMMARY: (\d+) errors", log))
    hazards = sum(int(x) for x in re.findall(r"RACECHECK SUMMARY: (\d+) hazards", log))
    if not rows:
        raise TableError(f"{files[0]}: no test or sanitizer result found")
    return table(["binary", "cases", "result"], rows, ["l", "l", "l"]) + [
        "", f"Sanitizer summaries: {errors} errors, {hazards} race hazards."]


@generator("gpu_rows")
def gpu_rows(files, options):
    """Timed measurements of check.sh's JSON lines (kernels.jsonl, transformer.jsonl,
    executor.jsonl: name, ms, tflops, gbps, note). Option match=REGEX selects the rows by name
    (spaces written as \\s); the table shows time, TFLOP/s with the fraction of the bf16 peak,
    or GB/s."""
    rx = re.compile(options.get("match", "."))
    rows = []
    for r in records(files):
        if "ms" not in r or not rx.search(r["name"]):
            continue
        tf = r.get("tflops") or 0
        gb = r.get("gbps") or 0
        rate = (f"{tf:.1f} TFLOP/s ({100 * tf / BF16_PEAK_TFLOPS:.1f}% of bf16 peak)" if tf >= 1
                else f"{gb:.0f} GB/s" if gb else f"{tf:.2f} TFLOP/s")
        time = f"{r['ms'] * 1e3:.1f} µs" if r["ms"] < 1 else f"{r['ms']:.3f} ms"
        rows.append([r["name"], time, rate])
    if not rows:
        raise TableError(f"no timed row matches {rx.pattern}")
    return table(["measurement", "time", "rate"], rows, ["l", "r", "r"])


@generator("gpu_check_rows")
def gpu_check_rows(files, options):
    """Correctness records of check.sh's JSON lines (check, rel_err, tol, pass). Option
    match=REGEX selects them by name."""
    rx = re.compile(options.get("match", "."))
    rows = [[r["check"], f"{r['rel_err']:.1e}", f"{r['tol']:.0e}", "pass" if r["pass"] else "FAIL"]
            for r in records(files) if "check" in r and rx.search(r["check"])]
    if not rows:
        raise TableError(f"no check matches {rx.pattern}")
    return table(["check", "relative error", "tolerance", "result"], rows,
                 ["l", "r", "r", "l"])


@generator("gpu_attention")
def gpu_attention(files, options):
    """Flash attention on the GPU: the Hopper kernel (wgmma + TMA) against the mma.sync kernel
    (block_m 64 and 128) on the same shapes. Reads check.sh's kernels.jsonl."""
    by = {}
    for r in records(files):
        m = re.match(r"attention bf16 seq (\d+) batch (\d+) heads (\d+) dim (\d+) (full|causal) "
                     r"\[(.*)\]", r.get("name", ""))
        if m and "tflops" in r:
            by.setdefault(m.groups()[:5], {})[m.group(6)] = r
    rows = []
    for (seq, batch, heads, dim, mask), v in by.items():
        hopper = next((r for k, r in v.items() if k.startswith("wgmma")), None)
        mma = [r for k, r in v.items() if k.startswith("block_m")]
        best = max(mma, key=lambda r: r["tflops"]) if mma else None
        rows.append([seq, batch, dim, mask,
                     f"{hopper['tflops']:.1f} ({hopper['ms']:.3f} ms)" if hopper else "",
                     f"{best['tflops']:.1f}" if best else "",
                     f"{hopper['tflops'] / best['tflops']:.2f}×" if hopper and best else ""])
    if not rows:
        raise TableError("no attention rows")
    return table(["seq", "batch", "head dim", "mask", "wgmma + TMA, TFLOP/s",
                  "best mma.sync, TFLOP/s", "speedup"], rows,
                 ["r", "r", "r", "l", "r", "r", "r"]) + ["", "16 heads, bf16."]


@generator("gpu_model")
def gpu_model(files, options):
    """A model on the GPU: every timed variant against one of them (the time ratio). Reads
    check.sh's JSON lines; option prefix=TEXT selects the rows whose name starts with it (spaces
    written as _), base=REGEX the row to divide by (default: the first fused one-graph row)."""
    prefix = options.get("prefix", "").replace("_", " ")
    base_rx = re.compile(options.get("base", r"fused, one CUDA graph$"))
    sel = [r for r in records(files) if "ms" in r and r["name"].startswith(prefix)]
    base = next((r for r in sel if base_rx.search(r["name"])), None)
    rows = []
    if not sel or base is None:
        raise TableError(f"no row starts with {prefix!r} and matches {base_rx.pattern}")
    for r in sel:
        rows.append([r["name"][len(prefix):].strip(" ,") or r["name"], r.get("note", ""),
                     f"{r['ms'] * 1e3:.1f} µs", f"{r['tflops']:.1f}",
                     f"{r['ms'] / base['ms']:.2f}"])
    return table(["variant", "launches", "time per call", "TFLOP/s",
                  "time / " + base["name"][len(prefix):].strip(" ,")], rows,
                 ["l", "l", "r", "r", "r"])


@generator("gpu_test_messages")
def gpu_test_messages(files, options):
    """Figures the CUDA tests print (doctest MESSAGE lines) on the GPU, with their test case.
    Reads check.sh's tests.log; option match=REGEX selects the messages (default: relative L2
    errors)."""
    rx = re.compile(options.get("match", r"relative L2 error"))
    rows, case = [], ""
    for line in read_text(files[0]).splitlines():
        if line.startswith("TEST CASE:"):
            case = line[len("TEST CASE:"):].strip()
        m = re.search(r"MESSAGE: (.*)$", line)
        if m and rx.search(m.group(1)):
            rows.append([case, m.group(1)])
    if not rows:
        raise TableError(f"{files[0]}: no message matches {rx.pattern}")
    return table(["test case", "printed on the GPU"], rows, ["l", "l"])
