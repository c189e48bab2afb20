#!/usr/bin/env bash
# Device check for the CUDA backend, on prebuilt binaries (built elsewhere, carried over):
# correctness first (the tests/cuda kernel tests, the device executor's test on whole programs, and
# the executor's host-side plan and schedule-emulation tests), then the benchmarks, then
# compute-sanitizer memcheck and racecheck on a subset. Target: under 8 minutes on one H200.
# Usage: check.sh [binary_dir] [out_dir]   (defaults: this script's folder, $OUT or /tmp/fusedsl-gpu)
# The files the docs cite (check.log, tests.log, kernels/transformer/executor.jsonl) go to
# benchmarks/results/<date>-<machine>/ with a manifest.json (docs/results.md); scripts/doc-tables
# writes docs/performance-gpu.md's tables from them.
set -u
BIN=$(cd "${1:-$(dirname "$0")}" && pwd)
OUT_DIR=${2:-${OUT:-/tmp/fusedsl-gpu}}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/check.log"
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }
start=$(date +%s)

say "== fusedsl GPU check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  2>&1 | tee -a "$LOG"

# cuBLAS is loaded at run time by the benchmarks; find the library if the loader does not.
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas.so.13'; then
  lib=$(find /usr/local /opt /usr/lib -name 'libcublas.so.13*' 2>/dev/null | head -1)
  if [ -n "$lib" ]; then
    export LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "cuBLAS found at $lib"
  else
    say "cuBLAS not found: the baselines that need it will be skipped"
  fi
fi

if command -v cuobjdump >/dev/null 2>&1; then
  say "cubins in cuda_attention: $(cuobjdump --list-elf "$BIN/cuda_attention" 2>&1 | grep -o 'sm_[0-9]*' | sort | uniq -c | tr '\n' ' ')"
  say "tensor-core instructions (HMMA) in fusedsl_gpu_kernels sm_90 SASS: $(cuobjdump --dump-sass --gpu-architecture sm_90 "$BIN/fusedsl_gpu_kernels" 2>/dev/null | grep -c HMMA)"
fi

status=0
say "== correctness: every kernel against CPU loops"
for t in cuda_host_logic cuda_elementwise cuda_row_kernels cuda_gemm cuda_attention cuda_graph_runner \
         cuda_executor_plan_test cuda_executor_schedule_test cuda_executor_test; do
  if [ ! -x "$BIN/$t" ]; then say "$t: missing from $BIN"; status=1; continue; fi
  timeout 120 "$BIN/$t" 2>&1 | tee -a "$OUT_DIR/tests.log" | tail -4 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  say "$t: exit $rc"
  [ "$rc" -eq 0 ] || status=1
done

say "== benchmarks: kernels ($(( $(date +%s) - start )) s so far)"
timeout 120 "$BIN/fusedsl_gpu_kernels" "$OUT_DIR/kernels.jsonl" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}; say "fusedsl_gpu_kernels: exit $rc"; [ "$rc" -eq 0 ] || status=1

say "== benchmarks: the device executor on DSL programs ($(( $(date +%s) - start )) s so far)"
timeout 90 "$BIN/fusedsl_gpu_executor" "$OUT_DIR/executor.jsonl" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}; say "fusedsl_gpu_executor: exit $rc"; [ "$rc" -eq 0 ] || status=1

say "== benchmarks: transformer ($(( $(date +%s) - start )) s so far)"
timeout 90 "$BIN/fusedsl_gpu_transformer" "$OUT_DIR/transformer.jsonl" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}; say "fusedsl_gpu_transformer: exit $rc"; [ "$rc" -eq 0 ] || status=1

if command -v compute-sanitizer >/dev/null 2>&1; then
  say "== compute-sanitizer ($(( $(date +%s) - start )) s so far)"
  timeout 45 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/cuda_attention" > "$OUT_DIR/sanitizer.log" 2>&1
  say "memcheck cuda_attention: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT_DIR/sanitizer.log") clean summaries)"
  timeout 45 compute-sanitizer --tool racecheck --print-limit 5 "$BIN/cuda_attention" >> "$OUT_DIR/sanitizer.log" 2>&1
  say "racecheck cuda_attention: exit $?"
  for t in cuda_row_kernels cuda_gemm cuda_elementwise; do
    timeout 40 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/$t" >> "$OUT_DIR/sanitizer.log" 2>&1
    say "memcheck $t: exit $?"
  done
  timeout 180 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/cuda_executor_test" >> "$OUT_DIR/sanitizer.log" 2>&1
  say "memcheck cuda_executor_test: exit $?"
  # The generated kernels that share data through shared memory: row and reduce groups (block
  # reductions), general attention (K/V tiles), the strided GEMMs (operand tiles).
  timeout 120 compute-sanitizer --tool racecheck --print-limit 5 "$BIN/cuda_executor_test" \
    -tc='*reductions*,*50257*,*additive key mask*,*48 queries*,*off every tile*,*f32 seed*' >> "$OUT_DIR/sanitizer.log" 2>&1
  say "racecheck cuda_executor_test (generated kernels): exit $?"
  timeout 40 compute-sanitizer --tool racecheck --print-limit 5 "$BIN/cuda_gemm" -tc='*64x64*,*layernorm into one*' >> "$OUT_DIR/sanitizer.log" 2>&1
  say "racecheck cuda_gemm: exit $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT_DIR/sanitizer.log" | tee -a "$LOG"
fi

say "== done in $(( $(date +%s) - start )) s, status $status"
exit $status
