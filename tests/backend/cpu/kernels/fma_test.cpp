// fmadd rounds once on every path, whatever the compiler's floating-point contraction: this file
// is built with -ffp-contract=off (CMakeLists.txt here), where a multiply and an add written
// apart stay apart. xsimd 8.1's AVX-512 fma is such a pair; simd.hpp replaces it.
#include <cmath>
#include <cstring>
#include <vector>

#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;
using nat = k::simd<k::native_arch>;
using V = k::vec_t<k::native_arch>;

TEST_CASE("fmadd is fused: one rounding, as std::fma") {
  // a * b = 1 + 2^-11 + 2^-24 exactly; rounded first it loses the 2^-24 (a tie, to even).
  const float a = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
  REQUIRE(std::fma(a, a, c) == 0x1p-24f);
  CHECK(k::fmadd(a, a, c) == 0x1p-24f);
  float out[64];
  nat::store(out, k::fmadd(V(a), V(a), V(c)));
  for (int l = 0; l < nat::width; ++l) CHECK(out[l] == 0x1p-24f);
}

TEST_CASE("the GEMM micro-kernel is a chain of fused multiply-adds, bitwise") {
  // Full panels and the tail, k not a multiple of the unroll: C(i, j) = fma(A(i, p), B(p, j), .)
  // over p in order from 0, the epilogue's fma(acc, 1, 0) leaving it unchanged.
  const std::ptrdiff_t m = 2 * k::gemm_tile<k::native_arch>::mr + 3, n = 70, kk = 37;
  const auto a = fusedsl_test::random_floats(std::size_t(m * kk), 31);
  const auto b = fusedsl_test::random_floats(std::size_t(kk * n), 32);
  std::vector<float> packed(k::packed_b_floats(kk, n)), ws(k::gemm_workspace_floats(kk));
  const auto pb = k::pack_b(kk, n, b.data(), n, false, packed.data());
  std::vector<float> c(std::size_t(m * n));
  k::gemm(m, n, kk, a.data(), kk, false, pb, c.data(), n, k::gemm_epilogue{}, ws.data());
  int differ = 0;
  for (std::ptrdiff_t i = 0; i < m; ++i)
    for (std::ptrdiff_t j = 0; j < n; ++j) {
      float want = 0.0f;
      for (std::ptrdiff_t p = 0; p < kk; ++p)
        want = std::fma(a[std::size_t(i * kk + p)], b[std::size_t(p * n + j)], want);
      const float got = c[std::size_t(i * n + j)];
      if (std::memcmp(&got, &want, sizeof(float)) != 0 && ++differ <= 5)
        CHECK_MESSAGE(false, "C(", i, ", ", j, ") = ", got, ", fma chain ", want);
    }
  CHECK(differ == 0);
}
