#!/usr/bin/env bash
# Two builds of model_profile (e.g. the tree before a change and after it) on the same models, in
# alternating rounds on one machine, as JSON lines: the time a call of each (thread CPU time, best
# of model_profile's 7 rounds), so that a change's cost or gain is read as a ratio within one run.
#   benchmarks/model/profile_ab.sh BASE_BUILD NEW_BUILD OUT.jsonl [ROUNDS] [MODEL...]
# BASE_BUILD, NEW_BUILD: CMake build folders with benchmarks/model/model_profile built
# (`cmake --build BUILD --target model_profile`). ROUNDS: default 3. MODEL: model_profile's models
# (default: seed medium gpt2_seq128), each run with as many calls per round as its comment says.
set -euo pipefail
base="$1"; new="$2"; out="$3"
rounds="${4:-3}"
shift 3; [ $# -gt 0 ] && shift
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(seed medium gpt2_seq128)
for b in "$base" "$new"; do
  [ -x "$b/benchmarks/model/model_profile" ] ||
    { echo "profile_ab: no $b/benchmarks/model/model_profile (build the target first)" >&2; exit 2; }
done
calls_for() {
  case "$1" in seed) echo 100 ;; gpt2_seq1024) echo 1 ;; *) echo 3 ;; esac
}
: > "$out"
for r in $(seq "$rounds"); do
  for tree in base new; do
    b="$base"; [ "$tree" = new ] && b="$new"
    for m in "${models[@]}"; do
      load="$(cut -d' ' -f1 /proc/loadavg)"
      line="$("$b/benchmarks/model/model_profile" "$(calls_for "$m")" "$m" | grep ' us per call')"
      us="$(sed -E 's/^[^:]*: ([0-9.]+) us per call.*/\1/' <<< "$line")"
      printf '{"round": %d, "tree": "%s", "build": "%s", "model": "%s", "us_per_call": %s, ' \
        "$r" "$tree" "$b" "$m" "$us" >> "$out"
      printf '"load_1min_before": %s, "date": "%s"}\n' "$load" "$(date -u +%FT%TZ)" >> "$out"
    done
  done
done
