#!/usr/bin/env python3
"""README.md's C++ block under the heading that names examples/quickstart.cpp must be that file,
character for character (a trailing newline aside), so that the two cannot drift apart.

  readme_block_test.py README.md examples/quickstart.cpp
"""
import difflib
import re
import sys


def main():
    readme, source = sys.argv[1], sys.argv[2]
    text = open(readme).read()
    name = "examples/quickstart.cpp"
    heading = re.search(r"^#+ .*" + re.escape(name) + r".*$", text, re.M)
    if not heading:
        print(f"FAIL: no heading naming {name} in {readme}")
        return 1
    block = re.search(r"^```(?:cpp|c\+\+)\n(.*?)^```", text[heading.end():], re.M | re.S)
    if not block:
        print(f"FAIL: no ```cpp block after the heading '{heading.group(0)}' in {readme}")
        return 1
    want = open(source).read().rstrip("\n")
    got = block.group(1).rstrip("\n")
    if got == want:
        print(f"PASS: the block under '{heading.group(0)}' is {source}")
        return 0
    print(f"FAIL: the block under '{heading.group(0)}' in {readme} differs from {source}:")
    sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                               source, readme + " (block)"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
