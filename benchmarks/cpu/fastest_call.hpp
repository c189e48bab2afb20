#pragma once
// The fastest call of a Google Benchmark loop, in wall time: the one least disturbed by other
// tenants of a shared machine (fma_peak.hpp's wall_seconds says why not thread CPU time).
#include <benchmark/benchmark.h>

#include <algorithm>

#include "fma_peak.hpp"

namespace fusedsl_bench {

// Runs the benchmark loop over `call`; returns its fastest call in seconds.
template <class F>
double fastest_call(benchmark::State& state, F&& call) {
  double best = 1e30;
  for (auto _ : state) {
    const double t0 = wall_seconds();
    call();
    benchmark::ClobberMemory();
    best = std::min(best, wall_seconds() - t0);
  }
  return best;
}

}  // namespace fusedsl_bench
