#!/usr/bin/env python3
"""scripts/check-tests skips on small JUnit files: a skip that tests/skip_allowlist.txt does not
list fails, a listed one passes only where the machine lacks its feature, no skip passes."""
import os
import subprocess
import sys
import tempfile

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def junit(cases):
    body = "".join(
        f'<testcase name="{n}" status="{"notrun" if skipped else "run"}">'
        + ('<skipped message="SKIP_RETURN_CODE=77"/>' if skipped else "")
        + f"<system-out>{'SKIP: why' if skipped else ''}</system-out></testcase>"
        for n, skipped in cases)
    f = tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False)
    f.write(f'<?xml version="1.0"?><testsuite name="t" tests="{len(cases)}">{body}</testsuite>')
    f.close()
    return f.name


def check_skips(cases):
    path = junit(cases)
    try:
        r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "check-tests"), "skips",
                            "--junit", path], stdout=subprocess.PIPE, text=True)
    finally:
        os.remove(path)
    print(r.stdout, end="")
    return r.returncode


def expect(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


expect(check_skips([("unit.core", False)]) == 0, "no skip passes")
expect(check_skips([("unit.core", True)]) == 1, "a skip not on the allow-list fails")
expect(check_skips([("interop_xla_cpu", True), ("unit.core", False)]) == 1,
       "a skipped interop test (no jax) fails")
# cpu_amx_tiles_test is listed under `amx`: its skip passes exactly where the CPU lacks AMX.
with open("/proc/cpuinfo") as f:
    flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
has_amx = {"amx_tile", "amx_bf16"} <= set(flags)
expect(check_skips([("cpu_amx_tiles_test", True)]) == (1 if has_amx else 0),
       f"an allowed skip passes only without the feature (this CPU has AMX: {has_amx})")
print("skip_rules_test: all checks passed")
