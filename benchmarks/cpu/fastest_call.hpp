#pragma once
// How the benchmarks time the calls of a Google Benchmark loop: the fastest call in wall time (the
// one least disturbed by other tenants of a shared machine; fma_peak.hpp's wall_seconds says why
// not thread CPU time) and the calls' total thread CPU time (for a mean).
#include <benchmark/benchmark.h>

#include <algorithm>

#include "fma_peak.hpp"

namespace fusedsl_bench {

struct call_times {
  double thread_seconds = 0;  // summed over the calls
  double fastest = 1e30;      // the fastest call, wall time
};

// Runs the benchmark loop over `call`. The wall clock is read inside the thread clock's reads, so
// the fastest call's interval holds only the call.
template <class F>
call_times time_calls(benchmark::State& state, F&& call) {
  call_times t;
  for (auto _ : state) {
    const double t0 = thread_seconds(), w0 = wall_seconds();
    call();
    benchmark::ClobberMemory();
    const double w1 = wall_seconds();
    t.thread_seconds += thread_seconds() - t0;
    t.fastest = std::min(t.fastest, w1 - w0);
  }
  return t;
}

// Runs the benchmark loop over `call`; returns its fastest call in seconds.
template <class F>
double fastest_call(benchmark::State& state, F&& call) {
  return time_calls(state, call).fastest;
}

}  // namespace fusedsl_bench
