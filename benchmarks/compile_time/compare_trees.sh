#!/usr/bin/env bash
# Compile time and peak memory of the same translation units in two source trees, alternating
# between them in one run (g++ 12, the ci preset's flags, no ccache), as JSON lines:
#   benchmarks/compile_time/compare_trees.sh BASE_TREE NEW_TREE OUT.jsonl [SOURCE...]
# BASE_TREE, NEW_TREE: checkouts of the repository (e.g. `git worktree add /tmp/base main`).
# SOURCE defaults to examples/quickstart.cpp and benchmarks/model/model_bench.cpp. CPU seconds are
# user + system (less sensitive to other load than wall time); peak RSS is the compiler's.
set -euo pipefail
base="$1"; new="$2"; out="$3"; shift 3
sources=("$@")
[ ${#sources[@]} -gt 0 ] || sources=(examples/quickstart.cpp benchmarks/model/model_bench.cpp)
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
: > "$out"
for src in "${sources[@]}"; do
  for tree in "$base" "$new"; do
    extra=()
    case "$src" in benchmarks/model/*) extra=(-I "$tree/benchmarks/cpu" -O3) ;; esac
    load="$(cut -d' ' -f1 /proc/loadavg)"
    /usr/bin/time -f "%U %S %e %M" -o "$tmp/time" g++ -D_GNU_SOURCE -DBOOST_ALL_NO_LIB -DNDEBUG \
      -I "$tree/include" -isystem /usr/include/eigen3 -march=native -O2 "${extra[@]}" -Wall \
      -Wextra -Wpedantic -Werror -std=gnu++20 -c "$tree/$src" -o "$tmp/tu.o"
    read -r user sys wall rss < "$tmp/time"
    printf '{"tree": "%s", "commit": "%s", "source": "%s", "cpu_s": %s, "wall_s": %s, ' \
      "$([ "$tree" = "$base" ] && echo base || echo new)" \
      "$(git -C "$tree" rev-parse --short=12 HEAD)" "$src" "$(echo "$user + $sys" | bc)" "$wall" >> "$out"
    printf '"peak_rss_mib": %d, "load_1min_before": %s, "compiler": "%s", "date": "%s"}\n' \
      "$((rss / 1024))" "$load" "$(g++ --version | head -1)" "$(date -u +%FT%TZ)" >> "$out"
  done
done
cat "$out"
