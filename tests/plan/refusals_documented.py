#!/usr/bin/env python3
"""Every reason the lowering can refuse a group with (the string literals of refuse(...),
fail(...), refine_request::fail and `return "..."` in include/fusedsl/plan/{lower,code,affine}.hpp
and plan/lower/*.hpp)
appears in docs/fusion.md's "Refusals" section, so the list there stays closed."""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
plan = root / "include/fusedsl/plan"
sources = [plan / f for f in ("lower.hpp", "code.hpp", "affine.hpp")] + sorted(plan.glob("lower/*.hpp"))
reasons = set()
for path in sources:
    text = path.read_text()
    for call in re.finditer(r'\b(?:refuse|fail)\((.*?)\);', text, re.S):
        reasons.update(re.findall(r'"([^"]+)"', call.group(1)))
    reasons.update(re.findall(r'refine_request::fail,\s*-1,\s*0,\s*"([^"]+)"', text))
    reasons.update(re.findall(r'return "([^"]+)";', text))
doc = (root / "docs/fusion.md").read_text()
section = doc[doc.index("## Refusals"):]
section = section[: section.index("\n## ", 1)]
missing = sorted(r for r in reasons if f"| {r} |" not in section)
for r in missing:
    print(f"docs/fusion.md: the refusal \"{r}\" is not in the Refusals section")
if not reasons:
    print("refusals_documented: found no refusal reasons in the sources (a changed pattern?)")
    sys.exit(1)
sys.exit(1 if missing else 0)
