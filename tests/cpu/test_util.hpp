#pragma once
// Shared helpers for the CPU kernel tests: random data and relative comparison.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "fusedsl/backend/cpu/kernels/simd.hpp"

namespace fusedsl_test {

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// |got - want| <= rel * max(|want|, floor), NaN only where NaN is wanted, infinities equal.
inline bool close(double got, double want, double rel, double floor = 1.0) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= rel * std::max(std::fabs(want), floor);
}

// The first index where got and want differ beyond the tolerance, or -1.
template <class G, class W>
std::ptrdiff_t first_mismatch(const G& got, const W& want, double rel, double floor = 1.0) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!close(double(got[i]), double(want[i]), rel, floor)) return std::ptrdiff_t(i);
  return -1;
}

}  // namespace fusedsl_test

// Both instruction-set paths, for TEST_CASE_TEMPLATE.
#define FUSEDSL_CPU_ARCHS fusedsl::cpu::kernels::native_arch, fusedsl::cpu::kernels::scalar_arch
