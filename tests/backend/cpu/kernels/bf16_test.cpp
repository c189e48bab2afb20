#include "fusedsl/backend/cpu/kernels/bf16.hpp"

#include <bit>
#include <random>
#include <type_traits>
#include <vector>

#include "fusedsl/core/dtype.hpp"
#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;

TEST_CASE("to_bf16 rounds to nearest, ties to even") {
  CHECK(k::to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie, even stays
  CHECK(k::to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie, odd rounds up
  CHECK(k::to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);  // above the tie
  CHECK(k::to_bf16(1.0f) == 0x3f80);
  CHECK(k::from_bf16(0x3f80) == 1.0f);
}

TEST_CASE("to_bf16 keeps infinities and makes NaN quiet") {
  CHECK(k::to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(k::to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(k::to_bf16(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);
  CHECK(std::isnan(k::from_bf16(k::to_bf16(std::nanf("")))));
  CHECK(k::to_bf16(std::bit_cast<float>(0x7f7fffffu)) == 0x7f80);  // FLT_MAX rounds to inf
}

TEST_CASE("array conversion gives the same bits as the scalar rule and core::bf16 on all inputs") {
  std::mt19937 gen(7);
  std::vector<float> x(4096 + 5);
  for (auto& v : x) v = std::bit_cast<float>(std::uint32_t(gen()));  // any bit pattern
  // Subnormals (flushed by VCVTNEPS2BF16, redone here), ties, NaNs with payloads.
  x[0] = std::bit_cast<float>(0x00012345u);
  x[1] = std::bit_cast<float>(0x807fffffu);
  x[2] = std::bit_cast<float>(0x7f812345u);
  x[3] = std::bit_cast<float>(0x3f818000u);
  std::vector<k::bf16_bits> y(x.size());
  k::to_bf16(x.data(), y.data(), x.size());
  int bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    bad += y[i] != k::to_bf16(x[i]);
    bad += y[i] != fusedsl::bf16(x[i]).bits;
  }
  CHECK(bad == 0);
  std::vector<float> back(x.size());
  k::from_bf16(y.data(), back.data(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(std::bit_cast<std::uint32_t>(back[i]) == (std::uint32_t(y[i]) << 16));
}

TEST_CASE("FUSEDSL_CPU_FORCE_SCALAR selects the scalar path as native_arch") {
#if defined(FUSEDSL_CPU_FORCE_SCALAR)
  CHECK(std::is_same_v<k::native_arch, k::scalar_arch>);
#elif defined(__AVX512F__)
  CHECK(std::is_same_v<k::native_arch, xsimd::avx512f>);
#elif defined(__AVX2__) && defined(__FMA__)
  CHECK(std::is_same_v<k::native_arch, xsimd::fma3<xsimd::avx2> >);
#endif
}
