#!/usr/bin/env bash
# Compile time and peak memory of the same translation units in two source trees, alternating
# between them in one run (g++ 12 with the ci preset's flags, nvcc with the GPU benchmarks' flags;
# no ccache), as JSON lines:
#   benchmarks/compile_time/compare_trees.sh BASE_TREE NEW_TREE OUT.jsonl [SOURCE...]
# BASE_TREE, NEW_TREE: checkouts of the repository (e.g. `git worktree add /tmp/base main`).
# SOURCE: a path inside each tree, or an absolute path, compiled as it is against each tree's
# include/ (a unit that one of the trees lacks, such as benchmarks/compile_time/
# seed_medium_executor.cpp); a .cu source is compiled by nvcc. SOURCE defaults to
# examples/quickstart.cpp and benchmarks/model/model_bench.cpp. CPU seconds are user + system of
# the compiler and its children (less sensitive to other load than wall time); peak RSS is that of
# the largest of them.
# NEW_MODES (environment): the new tree's modes, as compiler flags separated by ';', each compiled
# right after the base tree (default: one mode, no flags); e.g.
#   NEW_MODES=";-DFUSEDSL_SEPARATE_COMPILATION" for header-only and the compiled mode
#   (core/compiled_mode.hpp; the unit's object is then compiled without the library's code).
# Each row of the new tree records its mode's flags as "new_flags".
set -euo pipefail
base="$1"; new="$2"; out="$3"; shift 3
sources=("$@")
[ ${#sources[@]} -gt 0 ] || sources=(examples/quickstart.cpp benchmarks/model/model_bench.cpp)
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
: > "$out"
IFS=';' read -r -a new_modes <<< "${NEW_MODES:-}"
[ ${#new_modes[@]} -gt 0 ] || new_modes=("")
[[ "${NEW_MODES:-}" == *";" ]] && new_modes+=("")
for src in "${sources[@]}"; do
  runs=("base|")
  for m in "${new_modes[@]}"; do runs+=("new|$m"); done
  for run in "${runs[@]}"; do
    tree="$base"; [ "${run%%|*}" = new ] && tree="$new"
    mode_flags="${run#*|}"
    # shellcheck disable=SC2206
    mode=($mode_flags)
    path="$tree/$src"
    case "$src" in /*) path="$src" ;; esac
    extra=()
    case "$src" in benchmarks/model/*) extra=(-I "$tree/benchmarks/cpu" -O3) ;; esac
    load="$(cut -d' ' -f1 /proc/loadavg)"
    if [[ "$src" == *.cu ]]; then
      compiler="$(nvcc --version | tail -1)"
      /usr/bin/time -f "%U %S %e %M" -o "$tmp/time" nvcc -DBOOST_ALL_NO_LIB -DNDEBUG \
        -DFUSEDSL_CUDA_WGMMA=1 -I "$tree/include" -I "$tree/benchmarks/gpu" -I "$tree/tests/cuda" \
        -isystem /usr/include/eigen3 -O3 \
        "--generate-code=arch=compute_80,code=[compute_80,sm_80]" \
        "--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]" -std=c++20 \
        --expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra -Werror=all-warnings "${mode[@]}" \
        -c "$path" -o "$tmp/tu.o"
    else
      compiler="$(g++ --version | head -1)"
      /usr/bin/time -f "%U %S %e %M" -o "$tmp/time" g++ -D_GNU_SOURCE -DBOOST_ALL_NO_LIB \
        -DNDEBUG -I "$tree/include" -isystem /usr/include/eigen3 -march=native -O2 \
        "${extra[@]}" "${mode[@]}" -Wall -Wextra -Wpedantic -Werror -std=gnu++20 -c "$path" \
        -o "$tmp/tu.o"
    fi
    read -r user sys wall rss < "$tmp/time"
    printf '{"tree": "%s", "new_flags": "%s", "commit": "%s", "source": "%s", "cpu_s": %s, ' \
      "${run%%|*}" "$mode_flags" \
      "$(git -C "$tree" rev-parse --short=12 HEAD)" "${src#"$new"/}" "$(echo "$user + $sys" | bc)" \
      >> "$out"
    printf '"wall_s": %s, ' "$wall" >> "$out"
    printf '"peak_rss_mib": %d, "load_1min_before": %s, "compiler": "%s", "date": "%s"}\n' \
      "$((rss / 1024))" "$load" "$compiler" "$(date -u +%FT%TZ)" >> "$out"
  done
done
cat "$out"
