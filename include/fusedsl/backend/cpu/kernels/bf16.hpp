#pragma once
// bf16 storage <-> f32 conversion on raw bits (std::uint16_t), so the kernels do not depend on
// the core's tensor types. Rounding is round-to-nearest-even (IEEE 754-2008, 4.3.1), NaN stays a
// quiet NaN with the sign and top payload bits kept, subnormals are rounded like any other value
// (no flush to zero): bit-identical to fusedsl::bf16::from_float in core/dtype.hpp.
//
// With AVX512_BF16 the array conversion uses VCVTNEPS2BF16. That instruction flushes subnormal
// inputs to zero, so lanes holding f32 subnormals (and NaNs) are redone with the integer rule;
// the result is the same bits on every path (tested).
#include <bit>
#include <cstddef>
#include <cstdint>

#include "fusedsl/backend/cpu/kernels/simd.hpp"  // includes <immintrin.h> with the GCC 12 fix

namespace fusedsl::cpu::kernels {

using bf16_bits = std::uint16_t;

constexpr bf16_bits to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_bits((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16_bits(u >> 16);
}

constexpr float from_bf16(bf16_bits h) {
  return std::bit_cast<float>(std::uint32_t(h) << 16);
}

#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
// 16 lanes f32 -> bf16 with the rounding rule above.
inline __m256i to_bf16_x16(__m512 v) {
#if defined(__AVX512BF16__)
  const __m512i u = _mm512_castps_si512(v);
  const __m512i expo = _mm512_and_si512(u, _mm512_set1_epi32(0x7f800000));
  const __m512i mant = _mm512_and_si512(u, _mm512_set1_epi32(0x007fffff));
  // Subnormal and NaN lanes are redone with the integer rule (the instruction flushes the first
  // and does not promise our NaN payload).
  const __mmask16 redo = (_mm512_cmpeq_epi32_mask(expo, _mm512_setzero_si512()) &
                          _mm512_cmpneq_epi32_mask(mant, _mm512_setzero_si512())) |
                         _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  __m256i r = std::bit_cast<__m256i>(_mm512_cvtneps_pbh(v));
  if (redo == 0) return r;  // the common case: VCVTNEPS2BF16 is exact RNE here
#endif
  // Integer rule: u + 0x7fff + lsb, then the top half; NaN lanes get the quiet bit.
  const __m512i x = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i y = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
  y = _mm512_srli_epi32(y, 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  y = _mm512_mask_mov_epi32(y, nan, qnan);
  const __m256i integer_rule = _mm512_cvtepi32_epi16(y);
#if defined(__AVX512BF16__)
  return _mm256_mask_mov_epi16(r, redo, integer_rule);
#else
  return integer_rule;
#endif
}

inline __m512 from_bf16_x16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#endif

// dst[i] = to_bf16(src[i]) for i < n.
inline void to_bf16(const float* src, bf16_bits* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), to_bf16_x16(_mm512_loadu_ps(src + i)));
#endif
  for (; i < n; ++i) dst[i] = to_bf16(src[i]);
}

// dst[i] = from_bf16(src[i]) for i < n (exact).
inline void from_bf16(const bf16_bits* src, float* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i,
                     from_bf16_x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = from_bf16(src[i]);
}

}  // namespace fusedsl::cpu::kernels
