// gemm_amx on the AMX tiles against its portable loops on the same operands: equal within the f32
// summation order. It needs the tiles: where the build or the CPU lacks AMX-BF16 it prints why and
// exits 77, which CTest reports as skipped (allowed by tests/skip_allowlist.txt, feature `amx`,
// only where the CPU really lacks it). amx_test.cpp checks both paths against the reference.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "amx_problem.hpp"

namespace k = fusedsl::cpu::kernels;
using fusedsl_test::amx::problem;
using fusedsl_test::amx::run;

TEST_CASE("gemm_amx on the tiles and on the portable loops agree within f32 summation order") {
  const problem pr(128, 512, 128);
  const auto t = run<float>(pr, {}, k::amx_mode::automatic);
  const auto p = run<float>(pr, {}, k::amx_mode::portable);
  std::vector<double> tiles, portable, mag;
  for (std::ptrdiff_t i = 0; i < pr.m; ++i)
    for (std::ptrdiff_t j = 0; j < pr.n; ++j) {
      tiles.push_back(t[std::size_t(i * pr.ldc + j)]);
      portable.push_back(p[std::size_t(i * pr.ldc + j)]);
      mag.push_back(pr.magnitude(i, j));
    }
  const auto c = ft::compare_scaled(tiles, portable, mag, 2e-7);
  MESSAGE("AMX tiles vs portable loops, 128x512x128: largest difference " << c.max_ratio * 2e-7
                                                                          << " of sum |products|");
  CHECK(c);
}

int main(int argc, char** argv) {
  if (!k::amx_available()) {
    std::puts(
        "SKIP: AMX-BF16 is not available (the build lacks -mamx-bf16, or the CPU or the kernel "
        "lacks AMX): nothing to compare the portable loops with");
    return 77;
  }
  doctest::Context context(argc, argv);
  const int failed = context.run();
  return failed == 77 ? 1 : failed;
}
