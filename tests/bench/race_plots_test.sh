#!/usr/bin/env bash
# The race's plots (benchmarks/race/plots.py, matplotlib) drawn from the committed results of
# benchmarks/results/: each PNG must be written and be a real PNG of a sensible size. matplotlib
# comes from the race's venv (.venv-bench) when it has it, else from a venv made here ($1) with the
# pinned versions scripts/bench uses. Without network that install fails: skipped (77), except
# under CI=true, where it is a failure.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${1:?usage: race_plots_test.sh VENV_DIR}"
pins=(matplotlib==3.11.2 numpy==2.4.6)
py=""
has_matplotlib() { [ -x "$1/bin/python" ] && "$1/bin/python" -c "import matplotlib" 2>/dev/null; }
if has_matplotlib "$repo/.venv-bench"; then
  py="$repo/.venv-bench/bin/python"
elif has_matplotlib "$venv"; then
  py="$venv/bin/python"
else
  if ! { python3 -m venv "$venv" &&
         "$venv/bin/python" -m pip install --disable-pip-version-check -q "${pins[@]}"; }; then
    if [ "${CI:-}" = "true" ]; then
      echo "FAIL: could not install ${pins[*]} into $venv" >&2
      exit 1
    fi
    echo "SKIP: could not install ${pins[*]} into $venv (no network?)"
    exit 77
  fi
  py="$venv/bin/python"
fi
results=("$repo"/benchmarks/results/*/results.json)
if [ ! -f "${results[0]}" ]; then
  echo "FAIL: no committed results.json under benchmarks/results/" >&2
  exit 1
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for res in "${results[@]}"; do
  "$py" "$repo/benchmarks/race/race.py" report "$res" --out "$out" >/dev/null
  "$py" - "$out" <<'PY'
import struct, sys, os
out = sys.argv[1]
for name in ("speedup.png", "gflops.png", "memory.png"):
    path = os.path.join(out, name)
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        sys.exit(f"FAIL: {path} is not a PNG")
    width, height = struct.unpack(">II", head[16:24])
    size = os.path.getsize(path)
    if width < 600 or height < 300 or size < 10000:
        sys.exit(f"FAIL: {path} is {width}x{height}, {size} bytes: too small to hold the plot")
    print(f"{name}: {width}x{height}, {size} bytes")
PY
  rm -f "$out"/*
done
echo "race_plots_test: all checks passed (${#results[@]} committed result set(s))"
