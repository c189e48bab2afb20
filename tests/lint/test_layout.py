#!/usr/bin/env python3
"""Each test lives beside the area it tests: tests/ mirrors include/fusedsl/.

  test_layout.py [REPO] [--list]

Every C++ or CUDA source under REPO/tests/ (*.cpp, *.cu; REPO defaults to the repository this
script lives in) must be in
  - a folder whose path under tests/ is a folder of include/fusedsl/ (tests/backend/cpu/executor/
    tests include/fusedsl/backend/cpu/, so the first folders that exist in include/fusedsl/ count:
    backend/cpu/executor is accepted because backend/cpu is one), or
  - a folder grouped by harness or toolchain, named in HARNESS below (the first folder under
    tests/), or
  - tests/ itself (the shared doctest main).
test_layout_allowlist.txt beside this script lists folders or files not yet moved, one path
under tests/ a line (`#` starts a comment). A listed path is not a failure; a listed path that
no longer holds a misplaced source is one ("stale allowlist entry"), so the list only shrinks.
Exits 0 when there is no failure, 1 otherwise, printing each; --list prints every misplaced
source, allowed or not, and exits 0.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUFFIXES = (".cpp", ".cu")
# Folders grouped by harness or toolchain rather than by the header they test.
HARNESS = {
    "failtest": "compile-fail tests (CMake builds that must fail)",
    "fuzz": "fuzzers of the parsers and loaders",
    "interop": "runs against jax/XLA in the interop venv",
    "install": "the installed package, used from another project",
    "cuda": "nvcc-built kernel tests",
    "cuda_executor": "nvcc-built executor tests and their host emulation",
    "aarch64": "cross-built and run under qemu",
    "bench": "the benchmark scripts (benchmarks/)",
    "examples": "the programs in examples/",
    "tools": "the programs in tools/",
    "lint": "repository checks",
    "suite": "the suite's own rules",
    "common": "compare.hpp and test_util.hpp, which the tests of every folder include",
}


def placed(include, parts):
    """Whether a source in tests/<parts...>/ is beside what it tests."""
    if not parts or parts[0] in HARNESS:
        return True
    depth = 0  # the longest prefix of the folder that is a folder of include/fusedsl/
    while depth < len(parts) and os.path.isdir(os.path.join(include, *parts[: depth + 1])):
        depth += 1
    return depth >= 1 and len(parts) - depth <= 1  # one more level may name what is tested


def misplaced(repo):
    """Sources under tests/ that are in no mirrored and no harness folder, as paths under tests/."""
    tests = os.path.join(repo, "tests")
    include = os.path.join(repo, "include", "fusedsl")
    found = []
    for root, dirs, files in os.walk(tests):
        dirs.sort()
        rel = os.path.relpath(root, tests)
        parts = [] if rel == "." else rel.split(os.sep)
        if placed(include, parts):
            continue
        found.extend(os.path.join(rel, n) for n in sorted(files) if n.endswith(SUFFIXES))
    return sorted(found)


def read_allowlist(path):
    entries = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    entries.append(line.rstrip("/"))
    return entries


def check(repo, allowlist_path):
    """(failures, allowed) as lists of messages."""
    bad = misplaced(repo)
    allow = read_allowlist(allowlist_path)

    def allowed_by(path):
        return [a for a in allow if path == a or path.startswith(a + "/")]

    failures, allowed = [], []
    for p in bad:
        (allowed if allowed_by(p) else failures).append(
            f"tests/{p}: not beside what it tests (move it to the tests/ folder that mirrors its "
            "include/fusedsl/ folder, or to a harness folder: test_layout.py's HARNESS)")
    for a in allow:
        if not any(p == a or p.startswith(a + "/") for p in bad):
            failures.append(f"{os.path.basename(allowlist_path)}: stale allowlist entry '{a}' "
                            "(nothing misplaced there now: remove the line)")
    return failures, allowed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", nargs="?", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--allowlist", default=os.path.join(HERE, "test_layout_allowlist.txt"))
    args = ap.parse_args()
    failures, allowed = check(args.repo, args.allowlist)
    if args.list:
        for m in allowed + failures:
            print(m)
        return 0
    for m in failures:
        print(m)
    n = len(misplaced(args.repo))
    print(f"test_layout: {len(failures)} failure(s); {len(allowed)} misplaced source(s) allowed "
          f"by the list; {n} misplaced in all")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
