#pragma once
// Shared by the CPU kernel tests: random data, the comparison (tests/common/compare.hpp) as ft::.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "../../../common/compare.hpp"
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

}  // namespace fusedsl_test

namespace ft = fusedsl::test;

// Both instruction-set paths, for TEST_CASE_TEMPLATE.
#define FUSEDSL_CPU_ARCHS fusedsl::cpu::kernels::native_arch, fusedsl::cpu::kernels::scalar_arch
