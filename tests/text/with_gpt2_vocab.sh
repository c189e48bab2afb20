#!/bin/sh
# Runs a command with FUSEDSL_GPT2_VOCAB_DIR set to the folder of GPT-2's vocab.json and
# merges.txt in the venv scripts/setup-gpt2-venv makes (${FUSEDSL_GPT2_VENV:-<repo>/build/venv-gpt2}).
# "python" as the command is that venv's Python. Without the venv: exit 77 (CTest: skipped), or
# 1 under CI=true, where nothing may skip.
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${FUSEDSL_GPT2_VENV:-$repo/build/venv-gpt2}"
missing() {
  if [ "${CI:-}" = "true" ]; then
    echo "FAIL: $1 (scripts/setup-gpt2-venv makes it)"
    exit 1
  fi
  echo "SKIP: $1; run scripts/setup-gpt2-venv"
  exit 77
}
[ -x "$venv/bin/python" ] || missing "no GPT-2 venv at $venv"
dir="$("$venv/bin/python" -c 'import importlib.util, os
spec = importlib.util.find_spec("whisper")
print(os.path.join(spec.submodule_search_locations[0], "assets", "gpt2"))' 2>/dev/null)" ||
  missing "the venv $venv has no openai-whisper package"
for f in vocab.json merges.txt; do
  [ -f "$dir/$f" ] || missing "no $dir/$f"
done
export FUSEDSL_GPT2_VOCAB_DIR="$dir"
if [ "$1" = "python" ]; then
  shift
  exec "$venv/bin/python" "$@"
fi
exec "$@"
