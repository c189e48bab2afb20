#!/usr/bin/env python3
"""Markdown tables of every row of the JSONL files that check.sh writes (kernels, transformer,
executor .jsonl), for a first look at a run; docs/performance-gpu.md's tables come from
scripts/doc-tables.

Usage: tables.py RESULTS_DIR   (e.g. benchmarks/results/2026-11-29-h200-sxm-cuda13)
"""
import json
import pathlib
import sys


def rows(path):
    p = pathlib.Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def main():
    d = pathlib.Path(sys.argv[1])
    recs = rows(d / "kernels.jsonl") + rows(d / "transformer.jsonl") + rows(d / "executor.jsonl")
    checks = [r for r in recs if "check" in r]
    times = [r for r in recs if "ms" in r]
    print("| check | relative error | tolerance | result |\n| --- | --- | --- | --- |")
    for r in checks:
        print(f"| {r['check']} | {r['rel_err']:.2e} | {r['tol']:.0e} | {'pass' if r['pass'] else 'FAIL'} |")
    print()
    print("| measurement | ms | TFLOP/s | % of 989 bf16 peak | GB/s | note |\n| --- | --- | --- | --- | --- | --- |")
    for r in times:
        tf = f"{r['tflops']:.1f}" if r["tflops"] else ""
        pct = f"{100 * r['tflops'] / 989.4:.1f}" if r["tflops"] else ""
        gb = f"{r['gbps']:.0f}" if r["gbps"] else ""
        print(f"| {r['name']} | {r['ms']:.4f} | {tf} | {pct} | {gb} | {r['note']} |")


if __name__ == "__main__":
    main()
