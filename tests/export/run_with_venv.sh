#!/bin/sh
# Runs a Python script with the interop venv's Python (scripts/setup-venv makes it at
# ${FUSEDSL_VENV:-<repo>/.venv}). Exits 77 (CTest: skipped) when there is none, and 1 under
# CI=true, where every test that can run must run.
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
py="${FUSEDSL_VENV:-$repo/.venv}/bin/python"
if [ ! -x "$py" ]; then
  echo "SKIP: no interop venv ($py); run scripts/setup-venv"
  [ "${CI:-}" = true ] && exit 1
  exit 77
fi
exec "$py" "$@"
