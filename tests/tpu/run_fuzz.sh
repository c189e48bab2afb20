#!/bin/sh
# Builds fuzz_parse_schedule.cpp with clang's libFuzzer + ASan/UBSan and runs it for a bounded
# time on a corpus seeded with the committed HLO modules. The compile goes through
# $FUSEDSL_FUZZ_LAUNCHER when set (the project's ccache launcher), the link apart.
# usage: run_fuzz.sh CLANGXX SOURCE_DIR BUILD_DIR SECONDS INCLUDE_DIR...
set -eu
cxx=$1; src=$2; out=$3; seconds=$4; shift 4
incs=""
for d in "$@"; do incs="$incs -isystem $d"; done
mkdir -p "$out/fuzz_corpus"
# shellcheck disable=SC2086
${FUSEDSL_FUZZ_LAUNCHER:-} "$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all "-fdebug-prefix-map=$src=." -I "$src/include" $incs \
  -c "$src/tests/tpu/fuzz_parse_schedule.cpp" -o "$out/fuzz_parse_schedule.o"
"$cxx" -fsanitize=fuzzer,address,undefined "$out/fuzz_parse_schedule.o" -o "$out/fuzz_parse_schedule"
"$out/fuzz_parse_schedule" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=8192 "$out/fuzz_corpus" "$src/tests/tpu/data" "$src/tests/hlo/data"
