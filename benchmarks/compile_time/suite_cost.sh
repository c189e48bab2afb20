#!/usr/bin/env bash
# The compiler CPU seconds of a cold build of the suite (or of some targets), without ccache, for
# comparing trees: a cold `scripts/test` build costs what this measures for the `ci` preset.
#
#   benchmarks/compile_time/suite_cost.sh OUT.jsonl PRESET TREE... [-- TARGET...]
#
# For each TREE (a checkout of the repository), in the order given: configure PRESET into a fresh
# build folder under $TMPDIR, build it (or only TARGET...) with `cmake --build -j $(nproc)` under
# GNU time with CCACHE_DISABLE=1, and append one JSON line: the tree's commit, the preset, the
# targets, user + system CPU seconds of the build and all its children (the compilers, the
# linkers), the wall seconds and the load average before. Alternate trees (A B A B) to compare them
# on a busy machine.
set -euo pipefail
out="$1"; preset="$2"; shift 2
trees=(); targets=()
while (($#)); do
  if [ "$1" = "--" ]; then shift; targets=("$@"); break; fi
  trees+=("$1"); shift
done
[ ${#trees[@]} -gt 0 ] || { echo "suite_cost.sh: name at least one tree" >&2; exit 2; }
target_args=()
for t in "${targets[@]}"; do target_args+=(--target "$t"); done
for tree in "${trees[@]}"; do
  build="$(mktemp -d)"
  (cd "$tree" && cmake --preset "$preset" -B "$build" > "$build.configure.log" 2>&1) ||
    { echo "suite_cost.sh: configuring $tree failed (see $build.configure.log)" >&2; exit 1; }
  load="$(cut -d' ' -f1 /proc/loadavg)"
  CCACHE_DISABLE=1 /usr/bin/time -f "%U %S %e" -o "$build.time" \
    cmake --build "$build" -j "$(nproc)" "${target_args[@]}" > "$build.build.log" 2>&1 ||
    { echo "suite_cost.sh: building $tree failed (see $build.build.log)" >&2; exit 1; }
  read -r user sys wall < "$build.time"
  printf '{"commit": "%s", "preset": "%s", "targets": "%s", "cpu_s": %s, "wall_s": %s, "load_1min_before": %s, "jobs": %d, "date": "%s"}\n' \
    "$(git -C "$tree" rev-parse --short=12 HEAD)" "$preset" "${targets[*]:-all}" \
    "$(echo "$user + $sys" | bc)" "$wall" "$load" "$(nproc)" "$(date -u +%FT%TZ)" | tee -a "$out"
  rm -rf "$build" "$build.time" "$build.configure.log" "$build.build.log"
done
