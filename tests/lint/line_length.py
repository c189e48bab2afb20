#!/usr/bin/env python3
"""Every line of the C++ and CUDA sources must fit clang-format's column limit.

  line_length.py REPO

Reads ColumnLimit from REPO/.clang-format and checks every *.hpp, *.ipp, *.cpp, *.h, *.cc, *.cu and
*.cuh file that git tracks (or, outside a git checkout, that exists) under include/, src/, tests/,
examples/, benchmarks/ and tools/, except those listed in line_length_allowlist.txt beside this
script. Columns are counted in characters (UTF-8), a tab as one. Prints each line over the
limit as path:line: N columns, and exits 1 if there is one.
"""
import os
import re
import subprocess
import sys

ROOTS = ("include", "src", "tests", "examples", "benchmarks", "tools")
SUFFIXES = (".hpp", ".ipp", ".cpp", ".h", ".cc", ".cu", ".cuh")


def column_limit(repo):
    with open(os.path.join(repo, ".clang-format")) as f:
        m = re.search(r"^ColumnLimit:\s*(\d+)", f.read(), re.M)
    if not m:
        raise SystemExit("line_length: no ColumnLimit in .clang-format")
    return int(m.group(1))


def sources(repo):
    try:
        out = subprocess.run(["git", "-C", repo, "ls-files", "--cached", "--others",
                              "--exclude-standard", "--", *ROOTS],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True)
        files = out.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(os.path.join(d, f), repo) for root in ROOTS
                 for d, _, fs in os.walk(os.path.join(repo, root)) for f in fs]
    return sorted(f for f in files if f.endswith(SUFFIXES) and os.path.isfile(os.path.join(repo, f)))


def allowlist():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "line_length_allowlist.txt")
    with open(path) as f:
        return {l.split("#", 1)[0].strip() for l in f} - {""}


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    limit = column_limit(repo)
    skip = allowlist()
    files = sources(repo)
    long_lines = 0
    for rel in files:
        if rel in skip:
            continue
        with open(os.path.join(repo, rel), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                width = len(line.rstrip("\n").rstrip("\r"))
                if width > limit:
                    long_lines += 1
                    print(f"{rel}:{n}: {width} columns (limit {limit})")
    checked = len([f for f in files if f not in skip])
    if long_lines:
        print(f"line_length: {long_lines} line(s) over {limit} columns in {checked} files; wrap them "
              f"(clang-format -i --lines=N:N FILE formats only those lines)")
        return 1
    print(f"line_length: all lines of {checked} files within {limit} columns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
