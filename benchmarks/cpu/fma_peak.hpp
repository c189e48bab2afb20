#pragma once
// The machine's FMA peak, measured: independent FMA chains on vector registers (16 chains, more
// than latency x ports, so the FMA units never wait). Every CPU benchmark reports its fraction of
// this figure, measured in the same process run.
#include "fusedsl/backend/cpu/kernels/simd.hpp"  // <immintrin.h>, GCC 12 warning fix

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace fusedsl_bench {

inline double clock_seconds(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// CPU time of the calling thread: on a shared machine it leaves out the time other tenants hold
// the core (their cache pollution still shows).
inline double thread_seconds() {
  return clock_seconds(CLOCK_THREAD_CPUTIME_ID);
}

// Monotonic wall time. Every "fastest" reading here (a minimum over calls or runs: the fastest
// call, the start-up peak) is taken on it rather than on thread CPU time. In a virtual machine the
// thread CPU clock can stand still across a whole call (a 95 us GEMM call can read 0 s, an infinite
// fraction of peak), and a minimum picks exactly such a reading out; a call that was preempted only
// reads slower on the wall clock, so the minimum leaves it out. Sums and means stay on thread CPU
// time.
inline double wall_seconds() {
  return clock_seconds(CLOCK_MONOTONIC);
}

// Runs `iters` x 16 chains x one FMA on a full vector; returns a value so nothing is dropped.
// Kept out of line so the chains are timed as written (clang has no noipa; noinline does there).
#if defined(__clang__)
[[gnu::noinline]]
#else
[[gnu::noipa]]
#endif
inline float fma_chains(long iters) {
#if defined(__AVX512F__)
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_ps(float(j) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
#else
  __m256 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(float(j) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
  float t[8];
  _mm256_storeu_ps(t, s);
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
#endif
}

// Floating-point operations one fma_chains iteration performs.
constexpr double fma_chain_flops_per_iter() {
#if defined(__AVX512F__)
  return 16.0 * 16 * 2;
#else
  return 12.0 * 8 * 2;
#endif
}

// Best FLOP/s over runs of 2^20 iterations (537 MFLOP each on zmm registers) in wall time (the
// best: other tenants only ever slow us down): for at least `min_seconds` and `samples` runs, then
// until `samples` runs in a row have not beaten the best by 0.5%, within `max_seconds`. A burst of
// other work on a shared machine can hold the FMA rate down for longer than a fixed 25 runs.
inline double measure_fma_peak(int samples = 25, double min_seconds = 0.3,
                               double max_seconds = 1.5) {
  constexpr long iters = 1 << 20;
  volatile float sink = 0;
  double best = 0;
  const double start = wall_seconds();
  // The first run sets the best, so `samples` runs without a new best are `samples` + 1 runs.
  for (int since_best = 0;;) {
    const double t0 = wall_seconds();
    sink = sink + fma_chains(iters);
    const double t1 = wall_seconds();
    const double rate = fma_chain_flops_per_iter() * double(iters) / (t1 - t0);
    since_best = rate > best * 1.005 ? 0 : since_best + 1;
    best = std::max(best, rate);
    const double elapsed = t1 - start;
    if (elapsed > max_seconds || (elapsed >= min_seconds && since_best >= samples)) break;
  }
  return best;
}

// After the benchmarks: measures the peak again and warns on stderr when it beats the start-up
// peak by more than 5%, since every fraction of peak in the run was then taken against too low a
// figure (something held the FMA rate down while the start-up peak was measured).
inline void warn_if_peak_was_low(double startup_peak) {
  const double again = measure_fma_peak();
  if (again > startup_peak * 1.05)
    std::fprintf(stderr,
                 "warning: the FMA peak measured after the benchmarks (%.1f GFLOP/s) is %.0f%% "
                 "above the start-up peak (%.1f GFLOP/s): this run's fractions of peak are too "
                 "high\n",
                 again * 1e-9, (again / startup_peak - 1) * 100, startup_peak * 1e-9);
}

// The fraction of peak of `call` (which performs `call_flops`), with the peak measured at the same
// moments: `rounds` times, one call then an FMA-chain run of about the same length, both in thread
// CPU time. On a shared machine (another tenant on the sibling hyperthread, cache pollution) the
// call and its paired peak see the same conditions, so the ratio is steadier than one taken
// against a peak measured once.
template <class F>
double paired_peak_fraction(F&& call, double call_flops, double peak_estimate, int rounds = 50) {
  call();  // warm caches
  double t = thread_seconds();
  call();
  const double one_call = thread_seconds() - t;
  const long iters = std::max(1L, long(one_call * peak_estimate / fma_chain_flops_per_iter()));
  volatile float sink = 0;
  double t_call = 0, t_peak = 0;
  for (int r = 0; r < rounds; ++r) {
    t = thread_seconds();
    call();
    const double t1 = thread_seconds();
    sink = sink + fma_chains(iters);
    const double t2 = thread_seconds();
    t_call += t1 - t, t_peak += t2 - t1;
  }
  return (call_flops / t_call) / (fma_chain_flops_per_iter() * double(iters) / t_peak);
}

}  // namespace fusedsl_bench
