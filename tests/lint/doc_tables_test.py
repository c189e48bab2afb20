#!/usr/bin/env python3
"""Checks scripts/doc-tables on a small tree: it writes a table between its markers from a raw
file, --check passes while the two agree and fails (naming file:line) once a number is edited by
hand, and a bad marker (unknown generator, missing input, no end marker, no manifest) fails."""

import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "scripts", "doc-tables")


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def doc_tables(root, *args):
    p = subprocess.run([sys.executable, script, "--root", root, *args], capture_output=True,
                       text=True)
    return p.returncode, p.stdout + p.stderr


def bench(name, items_per_second):
    return {"name": name, "run_name": name, "run_type": "iteration", "iterations": 10,
            "real_time": 1000.0, "cpu_time": 1000.0, "time_unit": "ns",
            "items_per_second": items_per_second}


with tempfile.TemporaryDirectory() as root:
    res = os.path.join(root, "benchmarks", "results", "2026-12-01-test")
    os.makedirs(res)
    os.makedirs(os.path.join(root, "docs"))
    with open(os.path.join(res, "row.json"), "w") as f:
        json.dump({"context": {"date": "2026-12-01T10:00:00+00:00"},
                   "benchmarks": [bench("BM_softmax_fusedsl/rows:128/cols:128", 2.5e9),
                                  bench("BM_softmax_eigen/rows:128/cols:128", 0.25e9)]}, f)
    with open(os.path.join(res, "manifest.json"), "w") as f:
        json.dump({"machine": {"cpu_model": "Test CPU", "cpu_family": 1, "cpu_model_number": 2,
                               "isa": ["avx512f"], "amx": False, "vcpus": 2},
                   "steps": [{"step": "row", "started": "2026-12-01T10:00:00Z",
                              "load_before": [0.5, 0, 0], "load_after": [0.7, 0, 0],
                              "files": ["row.json"],
                              "commands": ["build/ci/benchmarks/cpu/cpu_row_bench"]}]}, f)
    marker = "<!-- table: row_kernels benchmarks/results/2026-12-01-test/row.json -->"
    doc = os.path.join(root, "docs", "perf.md")
    with open(doc, "w") as f:
        f.write(f"# Perf\n\nText stays.\n\n{marker}\n<!-- end table -->\n\nAfter.\n")

    rc, out = doc_tables(root)
    check(rc == 0, f"writing succeeds: {out}")
    text = open(doc).read()
    check("| softmax 128×128 | 2.50 G/s | 0.25 G/s | 10.0× |" in text,
          f"the table is written:\n{text}")
    check("Raw: `benchmarks/results/2026-12-01-test/row.json` (`build/ci/benchmarks/cpu/"
          "cpu_row_bench`). Test CPU (family 1 model 2), 2 vCPUs, AVX-512, no AMX; 2026-12-01; "
          "load average 0.5–0.7." in text, f"the provenance line is written:\n{text}")
    check(text.startswith("# Perf\n\nText stays.\n\n") and text.endswith("\n\nAfter.\n"),
          "text outside the markers is kept")

    rc, out = doc_tables(root, "--check")
    check(rc == 0, f"--check passes on a fresh table: {out}")
    rc2, _ = doc_tables(root)
    check(rc2 == 0 and open(doc).read() == text, "rewriting is idempotent")

    with open(doc, "w") as f:
        f.write(text.replace("10.0×", "11.0×"))
    rc, out = doc_tables(root, "--check")
    check(rc == 1 and "docs/perf.md:5: table 'row_kernels' differs" in out and "+| softmax" in out,
          f"--check fails on a hand-edited number, with file:line and a diff: {out}")

    def fails_with(body, words):
        with open(doc, "w") as f:
            f.write(body)
        code, msg = doc_tables(root, "--check")
        check(code == 1 and all(w in msg for w in words), f"expected failure {words}: {code} {msg}")

    fails_with("<!-- table: no_such_generator benchmarks/results/2026-12-01-test/row.json -->\n"
               "<!-- end table -->\n", ["docs/perf.md:1", "unknown generator 'no_such_generator'"])
    fails_with("<!-- table: row_kernels benchmarks/results/gone.json -->\n<!-- end table -->\n",
               ["input file benchmarks/results/gone.json does not exist"])
    fails_with(marker + "\n| a |\n", ["docs/perf.md:1", "without '<!-- end table -->'"])
    fails_with("text\n<!-- end table -->\n", ["docs/perf.md:2", "without a table marker"])
    with open(doc, "w") as f:  # a marker shown in a fenced code block is an example, not a table
        f.write("```markdown\n<!-- table: no_such_generator x.json -->\n<!-- end table -->\n```\n")
    check(doc_tables(root, "--check")[0] == 0, "markers in fenced code blocks are left alone")
    os.remove(os.path.join(res, "manifest.json"))
    fails_with(marker + "\n<!-- end table -->\n", ["no manifest.json"])

# compile_vs_base: medians over the pairs, the largest peak RSS, and the verdict against limits.
sys.path.insert(0, os.path.join(here, "..", "..", "scripts"))
import doc_tables as dt  # noqa: E402
import doc_tables.compile_time  # noqa: E402,F401 - registers the compile-time generators

with tempfile.TemporaryDirectory() as root:
    dt.REPO = root
    rows = []
    for base_s, new_s, rss in ((10.0, 12.0, 900), (10.0, 13.0, 1030), (11.0, 12.1, 950)):
        for tree, cpu, mib in (("base", base_s, 800), ("new", new_s, rss)):
            rows.append({"tree": tree, "commit": tree[0] * 12, "source": "a.cpp", "cpu_s": cpu,
                         "peak_rss_mib": mib, "compiler": "g++ 12"})
    with open(os.path.join(root, "cmp.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    lines = dt.GENERATORS["compile_vs_base"](["cmp.jsonl"], {"max_ratio": "1.35",
                                                              "max_rss_mib": "1024"})
    check("| `a.cpp` | g++ | 3 | 10.00 | 800 | 12.10 | 1030 | 1.20 (1.10-1.30) | missed: 1030 MiB > "
          "1024 MiB, by 6 MiB |" in lines, f"compile_vs_base's row: {lines}")
    lines = dt.GENERATORS["compile_vs_base"](["cmp.jsonl"], {"max_ratio": "1.15"})
    check(any("missed: time 1.20x > 1.15x" in line for line in lines),
          f"compile_vs_base judges the time ratio: {lines}")

listing = subprocess.run([sys.executable, script, "--list"], capture_output=True, text=True)
check(listing.returncode == 0 and "row_kernels:" in listing.stdout and "gemm:" in listing.stdout,
      "--list names the generators")
print("doc_tables_test: all checks passed")
