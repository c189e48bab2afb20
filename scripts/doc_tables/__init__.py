"""Table generators for scripts/doc-tables, and what they share.

A generator is a function decorated with @generator("name"): it takes the input files named in
the marker (paths relative to the repository root) and the marker's key=value options, and returns
the table's markdown lines. Its docstring says which files it reads and in which format
(`scripts/doc-tables --list` prints them). The framework (scripts/doc-tables) adds one line under
every table: where the raw files are, the command that wrote them, the machine and date, and the
load average during the run, all taken from the manifest.json beside the files.
"""

import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATORS = {}


class TableError(Exception):
    """A generator cannot build its table from the files it was given."""


def generator(name):
    def register(fn):
        GENERATORS[name] = fn
        return fn
    return register


def path_of(rel):
    return os.path.join(REPO, rel)


def read_json(rel):
    try:
        with open(path_of(rel)) as f:
            return json.load(f)
    except OSError as e:
        raise TableError(f"{rel}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise TableError(f"{rel}: not JSON ({e})")


def read_jsonl(rel):
    try:
        with open(path_of(rel)) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise TableError(f"{rel}: {e.strerror}")
    out = []
    for no, line in enumerate(lines, 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise TableError(f"{rel}:{no}: not JSON ({e})")
    return out


def read_text(rel):
    try:
        with open(path_of(rel)) as f:
            return f.read()
    except OSError as e:
        raise TableError(f"{rel}: {e.strerror}")


def gbench(rel):
    """A Google Benchmark JSON file as (context, {name: [iteration runs]},
    {name: {aggregate name: run}})."""
    data = read_json(rel)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise TableError(f"{rel}: not Google Benchmark JSON output (no 'benchmarks' list)")
    runs, aggregates = {}, {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b.get("name", ""))
        if b.get("run_type") == "aggregate":
            aggregates.setdefault(name, {})[b.get("aggregate_name", "")] = b
        else:
            runs.setdefault(name, []).append(b)
    return data.get("context", {}), runs, aggregates


def one(runs, name, rel):
    if name not in runs:
        raise TableError(f"{rel}: no benchmark named {name}")
    return runs[name]


def median(values):
    v = sorted(values)
    if not v:
        raise TableError("median of nothing")
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def seconds(run, key="real_time"):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[run.get("time_unit", "ns")]
    return run[key] * scale


def fmt_time(sec):
    """A duration in the unit that keeps 3-4 significant digits."""
    if sec >= 1:
        return f"{sec:.2f} s"
    if sec >= 1e-3:
        return f"{sec * 1e3:.2f} ms" if sec < 1e-2 else f"{sec * 1e3:.1f} ms"
    return f"{sec * 1e6:.1f} µs" if sec >= 1e-5 else f"{sec * 1e6:.2f} µs"


def fmt(x, digits=3):
    return "" if x is None else f"{x:.{digits}f}"


def span(values, digits=3, suffix=""):
    """"a" or "a–b" over the values."""
    values = [v for v in values if v is not None]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if f"{lo:.{digits}f}" == f"{hi:.{digits}f}":
        return f"{lo:.{digits}f}{suffix}"
    return f"{lo:.{digits}f}–{hi:.{digits}f}{suffix}"


def table(header, rows, align=None):
    """Markdown table lines; align: per column, 'l' or 'r' (default: first left, rest right)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return lines


def option(options, key, default=None):
    return options.get(key, default)


# Import the generator modules so that they register themselves.
from . import cpu, compile_time, gpu, race  # noqa: E402,F401
