#!/bin/sh
# Runs tests/interop/run_hlo.py (or, with `--script FILE` first, another Python script that needs
# jax) with the interop venv's Python (scripts/setup-venv makes it at
# ${FUSEDSL_VENV:-<repo>/.venv}). Exits 77 (CTest: skipped) when no Python with jax is found, and 1
# under CI=true, where every test that can run must run.
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${FUSEDSL_VENV:-$repo/.venv}"
if [ -x "$venv/bin/python" ]; then
  py="$venv/bin/python"
elif command -v python3 >/dev/null 2>&1 && python3 -c "import jax" >/dev/null 2>&1; then
  py=python3
else
  echo "SKIP: no Python with jax (looked for $venv/bin/python and python3); run scripts/setup-venv"
  [ "${CI:-}" = true ] && exit 1
  exit 77
fi
script="$here/run_hlo.py"
if [ "${1:-}" = "--script" ]; then
  script="$2"
  shift 2
fi
exec "$py" "$script" "$@"
