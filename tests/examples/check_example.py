#!/usr/bin/env python3
"""Runs an example program and checks what it did.

  check_example.py [--expect REGEX]... [--file PATH]... [--json-lines] -- PROGRAM [ARGS...]

The program must exit 0, its output (stdout and stderr) must match every --expect regular
expression (Python re, searched line by line with re.M), every --file must exist and be non-empty
afterwards (removed before the run, so a stale file cannot pass), and with --json-lines every
non-empty line of stdout must be a JSON object. The output is printed either way.
"""
import argparse
import json
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--file", action="append", default=[])
    ap.add_argument("--json-lines", action="store_true")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no program to run")
    for f in args.file:
        if os.path.exists(f):
            os.remove(f)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(r.stdout)
    sys.stdout.write(r.stderr)
    problems = []
    if r.returncode != 0:
        problems.append(f"exit status {r.returncode}")
    out = r.stdout + r.stderr
    for e in args.expect:
        if not re.search(e, out, re.M):
            problems.append(f"output does not match /{e}/")
    for f in args.file:
        if not os.path.isfile(f) or os.path.getsize(f) == 0:
            problems.append(f"did not write {f}")
    if args.json_lines:
        for n, line in enumerate(r.stdout.splitlines(), 1):
            if line.strip():
                try:
                    if not isinstance(json.loads(line), dict):
                        problems.append(f"stdout line {n} is not a JSON object")
                except json.JSONDecodeError as e:
                    problems.append(f"stdout line {n} is not JSON: {e}")
    for p in problems:
        print(f"check_example: {' '.join(cmd)}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
