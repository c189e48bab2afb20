#!/usr/bin/env python3
"""Checks scripts/lint-words on a small tree: each pattern reports file:line:col, the software
senses of "helper", "host" and "issue" pass, raw data folders are not read, and a clean tree
passes. The words under test are assembled at run time, so this file holds none of them."""

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import importlib.machinery
import importlib.util

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "scripts", "lint-words")
loader = importlib.machinery.SourceFileLoader("lint_words", script)
spec = importlib.util.spec_from_loader("lint_words", loader)
lint = importlib.util.module_from_spec(spec)
loader.exec_module(lint)

S = "sess" + "ion"
I = "iss" + "ue"
H = "hel" + "per"


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def run(root):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = lint.main(["--root", root])
    return rc, out.getvalue().splitlines()


bad = {  # line text -> the pattern it must trigger
    f"Measured in {S} 13 on the new machine.": "session",
    f"Targets of {I} 4 are met.": "issue-number",
    f"As the {I} asks, the seed runs at 0.75.": "the-issue",
    f"The StableHLO printer, by the HLO {H}, writes MLIR.": "helper-person",
    f"The {H}'s harness runs the folder.": "helper-person",
    "Shared by up to six agents.": "agent",
    "After the review mends, the code moved.": "people",
    "On the Zen 4 host every target is met.": "borrowed-machine",
    "It runs in 3 s on this machine.": "borrowed-machine",
    "A run at 22:08 UTC gave 0.87.": "time-of-day",
    "The tree at 423c362 passed.": "commit-ref",
    "Since run 9 the default takes wide blocks.": "numbered-run",
    "A scratch harness timed group sizes.": "scratch-work",
}
good = [
    f"Shared {H}s for the CPU kernel tests: random data.",
    f"A {H} function packs B; the {H} type holds the tile.",
    f"A small {H} that packs B runs before the loop.",
    "The host compiler builds the host code; data moves from the host to the device.",
    "SPMD over 8 host devices; the same host buffer is reused.",
    f"Each product is {I}d right after its loads; {I} the DMA before the compute.",
    f"The {I} rate of the vector unit is two per cycle.",
    "0x1234abcd is a constant; at 0xdeadbeef the address is aligned.",
    "Run 3 times; run 2 threads.",
]

# The docs name machines and their figures; the library's code does not.
docs_good = "The 512-bit FMA runs on two 256-bit pipes (AMD EPYC, Zen 4, AVX-512): 0.36 us."
code_bad = ["// On a Zen 5 core the decode step went 93 -> 115 tokens/s.",
            "// A gather per column took 1.43 us."]

with tempfile.TemporaryDirectory() as root:
    os.makedirs(os.path.join(root, "docs"))
    os.makedirs(os.path.join(root, "include", "x"))
    os.makedirs(os.path.join(root, "benchmarks", "results", "d"))
    os.makedirs(os.path.join(root, "scripts"))
    with open(os.path.join(root, "docs", "bad.md"), "w") as f:
        f.write("# Title\n\n" + "\n".join(bad) + "\n")
    with open(os.path.join(root, "include", "x", "good.hpp"), "w") as f:
        f.write("".join(f"// {line}\n" for line in good))
    with open(os.path.join(root, "docs", "good.md"), "w") as f:
        f.write(docs_good + "\n")
    with open(os.path.join(root, "include", "x", "bad.hpp"), "w") as f:
        f.write("\n".join(code_bad) + "\n")
    with open(os.path.join(root, "benchmarks", "results", "d", "raw.json"), "w") as f:
        f.write(f'{{"note": "{S} 1"}}\n')  # raw data: not scanned
    with open(os.path.join(root, "scripts", "tool"), "w") as f:
        f.write(f"#!/bin/sh\n# written in {S} 2\n")  # an extensionless script: scanned
    with open(os.path.join(root, "scripts", "data"), "w") as f:
        f.write(f"{S} 3, not a script\n")  # neither a known suffix nor #!: not scanned

    rc, lines = run(root)
    check(rc == 1, f"a tree with hits exits 1 (got {rc})")
    for no, (text, name) in enumerate(bad.items(), 3):
        want = f"docs/bad.md:{no}:"
        check(any(l.startswith(want) and f"[{name}]" in l for l in lines),
              f"line {no} ({text!r}) must be reported as [{name}]; got:\n" + "\n".join(lines))
    check(not any("good.hpp" in l for l in lines),
          "software senses of the words pass; got:\n" + "\n".join(l for l in lines if "good" in l))
    check(not any("raw.json" in l for l in lines), "raw results are not scanned")
    check(not any("docs/good.md" in l for l in lines), "the docs may name machines and figures")
    for no in range(1, len(code_bad) + 1):
        check(any(l.startswith(f"include/x/bad.hpp:{no}:") and "[machine-in-code]" in l
                  for l in lines), f"include/x/bad.hpp:{no} must be reported as [machine-in-code]")
    check(any(l.startswith("scripts/tool:2:") for l in lines), "extensionless scripts are scanned")
    check(not any(l.startswith("scripts/data") for l in lines), "non-text files are not scanned")

    os.remove(os.path.join(root, "docs", "bad.md"))
    os.remove(os.path.join(root, "include", "x", "bad.hpp"))
    os.remove(os.path.join(root, "scripts", "tool"))
    rc, lines = run(root)
    check(rc == 0 and lines == ["lint-words: clean"], f"a clean tree passes: {rc} {lines}")

# The command line prints the pattern list with names.
listing = subprocess.run([sys.executable, script, "--list"], capture_output=True, text=True)
check(listing.returncode == 0 and "session:" in listing.stdout and "helper-person:" in
      listing.stdout, "--list prints every pattern by name")
print("lint_words_test: all checks passed")
