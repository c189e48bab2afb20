#pragma once
// Vectorised transcendental functions on one lane (float) or a full vector (xsimd batch).
//
// Vector lanes use xsimd's polynomial approximations, except exp on AVX-512, which is our own
// (below); one-lane calls use the C library. Maximum error against the exact value (std:: in
// double), in float ulps, measured by tests/backend/cpu/kernels/vmath_test.cpp on 2^20 evenly
// spaced points; the test bounds are the next whole ulp (a correctly rounded result is itself up
// to 0.5 ulp off):
//   exp      1.00 ulp (AVX-512), 1.51 ulp (AVX2, xsimd) on [-87, 88] (bound 2); +inf above 88.72,
//            NaN -> NaN; AVX-512: 0 below -87.34 (where the result would be subnormal: one
//            subnormal result costs a microcode assist per vector, tens of exps); AVX2:
//            subnormal results down to -103.9
//   exp2     1.15 ulp (AVX-512), 1.45 ulp (AVX2, xsimd) on [-126, 127) (bound 2); +inf from 128
//            (xsimd, the AVX2 path: from 127); AVX-512: 0 below -126, as exp
//   erf      2.29 ulp on [-6, 6]     (bound 3); +-1 at +-inf
//   tanh     1.22 ulp on [-10, 10]   (bound 2); +-1 at +-inf
//   sigmoid  2.29 ulp on [-80, 80]   (bound 3); 1 / (1 + exp(-x))
// The activations used by GEMM epilogues and elementwise groups live here too, so every
// kernel applies them identically.
#include <cmath>
#include <limits>

#include "fusedsl/backend/cpu/kernels/simd.hpp"

namespace fusedsl::cpu::kernels {

inline float vexp(float x) {
  return std::exp(x);
}
// xsimd::exp overflows from x = 88.376 (its bound), short of ln(FLT_MAX) = 88.72: above 88.375
// the result is exp(x / 2) squared (x / 2 is exact; 2.2 ulp there, 2 below).
template <class A>
xsimd::batch<float, A> vexp(const xsimd::batch<float, A>& x) {
  using B = xsimd::batch<float, A>;
  const auto big = x > B(88.375f);
  const B h = xsimd::exp(xsimd::select(big, x * B(0.5f), x));
  return xsimd::select(big, h * h, h);
}

#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
namespace detail {
// AVX-512: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2) and exp(r) by a degree-6
// polynomial fitted to minimise the relative error on that interval (1.7e-8 with these float
// coefficients; the degree-7 Taylor polynomial it replaces needs one more FMA for 4e-9);
// exp(x) = p * 2^n, left to the caller.
inline void exp_reduced(__m512 x, __m512& n, __m512& p) {
  // n = round(x / ln2) by adding and subtracting 1.5 * 2^23 (two FMA-port ops where VRNDSCALEPS
  // takes port 0 only); exact for |x / ln2| < 2^22, and every caller's x is clamped or masked.
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  p = _mm512_set1_ps(1.3836845755577087e-3f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.374815806746483e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.166822507977486e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666419804096222e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.9999991059303284e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}

// p * 2^n for the lanes in `normal`, 0 in the others (no subnormal results).
inline __m512 exp_masked(__m512 x, __mmask16 normal) {
  __m512 n, p;
  exp_reduced(x, n, p);
  return _mm512_maskz_scalef_ps(normal, p, n);
}
}  // namespace detail

// AVX-512 exp: the 2^n scaling by VSCALEFPS, which also gives +inf on overflow. Lanes below
// ln(FLT_MIN) are zeroed by the scaling's mask and computed at ln(FLT_MIN), so no lane ever
// produces a subnormal (masked -inf scores are common).
inline xsimd::batch<float, xsimd::avx512f> vexp(const xsimd::batch<float, xsimd::avx512f>& xb) {
  const __m512 lo = _mm512_set1_ps(-87.33654f);  // ln(FLT_MIN)
  __m512 x = xb;
  const __mmask16 normal = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);  // x >= lo, or NaN
  // Clamp so n stays finite; VMAXPS/VMINPS return the second source for NaN, so NaN passes.
  x = _mm512_max_ps(lo, x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  return detail::exp_masked(x, normal);
}

#endif

// log2(e): softmax and GELU work in base 2 (2^(t log2 e) = e^t), whose range reduction is one
// operation where exp's takes four; callers fold the factor into a scale they apply anyway.
inline constexpr double log2e = 1.44269504088896340736;

inline float vexp2(float t) {
  return std::exp2(t);
}
template <class A>
xsimd::batch<float, A> vexp2(const xsimd::batch<float, A>& t) {
  return xsimd::exp2(t);
}

// 2^t for t <= 0, -inf or NaN (softmax's base-2 scores minus their maximum; a t that rounding put
// just above 0 is fine): 0 where the result would be subnormal, as from vexp. Generic paths:
// vexp2 itself.
template <class V>
V vexp2_nonpositive(const V& t) {
  return vexp2(t);
}

// 2^t for t known to lie in [-126, 127) (finite, normal result). Generic paths: vexp2 itself.
template <class V>
V vexp2_in_range(const V& t) {
  return vexp2(t);
}

#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
namespace detail {
// 2^t = 2^r * 2^floor(t) with r = t - floor(t) in [0, 1] (VREDUCEPS: one port-0 operation; r is
// 1 for a t just below 0 or an integer, which the scaling by floor(t) compensates), 2^r by a
// degree-6 polynomial with p(0) = 1 fitted (Remez) to minimise the relative error on [0, 1]
// (2.0e-9 in exact arithmetic); the caller scales by VSCALEFPS, which takes floor(t) itself.
inline __m512 exp2_fraction(__m512 t) {
#if defined(__AVX512DQ__)
  // t stays in a register: GCC would fold a load of t into VREDUCEPS, and on some cores that
  // memory form stalls a loop several times over the register form (docs/design.md, "Kernel
  // choices"). No kernel here passes a loaded t, but a caller of vexp2 on loaded data would.
  asm("" : "+v"(t));
  const __m512 r = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
#else
  const __m512 r =
      _mm512_sub_ps(t, _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
#endif
  __m512 p = _mm512_set1_ps(2.161291657246391e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.2467845905837624e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.675451635115642e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.5485280578767664e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.4022930556274535e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.931470444423605e-1f));
  return _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}
}  // namespace detail

// Any argument, no clamps (the reduction cannot overflow): +inf from 128 up (VSCALEFPS
// overflows), 0 below -126 (-inf included: the scaling's mask), NaN -> NaN. 9 vector operations
// against vexp's 14 (12 without its clamps).
inline xsimd::batch<float, xsimd::avx512f> vexp2(const xsimd::batch<float, xsimd::avx512f>& tb) {
  const __m512 t = tb;
  return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(t, _mm512_set1_ps(-126.0f), _CMP_NLT_UQ),
                                detail::exp2_fraction(t), t);
}

inline xsimd::batch<float, xsimd::avx512f> vexp2_nonpositive(
    const xsimd::batch<float, xsimd::avx512f>& t) {
  return vexp2(t);
}

inline xsimd::batch<float, xsimd::avx512f> vexp2_in_range(
    const xsimd::batch<float, xsimd::avx512f>& t) {
  return _mm512_scalef_ps(detail::exp2_fraction(t), t);
}
#endif

inline float verfc(float x) {
  return std::erfc(x);
}
template <class A>
xsimd::batch<float, A> verfc(const xsimd::batch<float, A>& x) {
  return xsimd::erfc(x);
}

inline float verf(float x) {
  return std::erf(x);
}
template <class A>
xsimd::batch<float, A> verf(const xsimd::batch<float, A>& x) {
  return xsimd::erf(x);
}

inline float vtanh(float x) {
  return std::tanh(x);
}
template <class A>
xsimd::batch<float, A> vtanh(const xsimd::batch<float, A>& x) {
  return xsimd::tanh(x);
}

template <class V>
V vsigmoid(const V& x) {
  return quotient(V(1.0f), V(1.0f) + vexp(-x));
}

// relu keeps NaN (NaN < 0 is false) and maps -inf to 0.
template <class V>
V relu(const V& x) {
  return where(x < V(0.0f), V(0.0f), x);
}

// GELU, exact form: x/2 (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel 2016, eq. 1), computed as
// x/2 erfc(-x / sqrt 2): 1 + erf cancels for negative x (6.5e5 ulp at x = -5), erfc does not.
// Accuracy: tests/backend/cpu/kernels/vmath_test.cpp.
template <class V>
V gelu_erf(const V& x) {
  // -inf gives the limit 0, not -inf * 0
  return where(x == V(-std::numeric_limits<float>::infinity()), V(0.0f),
               V(0.5f) * x * verfc(x * V(-0.70710678118654752f)));
}

// GELU, tanh form: x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) (same paper, sec. 2),
// computed as x / (1 + 2^t), t = -2u log2(e) (the same function: 1 + tanh(u) = 2 / (1 + e^(-2u));
// log2(e) is folded into the cubic's two constants): one exp2 and a division instead of a tanh,
// and no cancellation in 1 + tanh(u) for negative x. Where t > 80 log2(e) (-2u > 80: x below
// about -9.5, -inf included, and x^3 overflowing) the result is 0: its exact value is below 2e-34
// in magnitude there, and x over the clamped 1 + 2^t would not be (at x = -1e30 it gave -1.8e5).
// t is kept within +-80 log2(e) for the exp2, so it gives no subnormal (whose microcode assists
// made the epilogue 2x slower for large positive x). NaN stays NaN. Accuracy:
// tests/backend/cpu/kernels/vmath_test.cpp.
namespace detail {
inline constexpr double gelu_c = 0.79788456080286536;           // sqrt(2 / pi)
inline constexpr float gelu_t1 = float(-2.0 * gelu_c * log2e);  // t = x (t1 + t3 x^2)
inline constexpr float gelu_t3 = float(-2.0 * gelu_c * 0.044715 * log2e);
inline constexpr float gelu_t_max = float(80.0 * log2e);
}  // namespace detail
template <class V>
V gelu_tanh(const V& x) {
  const V t = x * fmadd(x * x, V(detail::gelu_t3), V(detail::gelu_t1));
  const V lim(detail::gelu_t_max);
  const V y = quotient(x, V(1.0f) + vexp2_in_range(maximum(minimum(t, lim), -lim)));
  return where(t > lim, V(0.0f), y);
}
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
// The same function in two fewer vector operations (15; 18 with exp): no upper clamp on t, since
// the lanes where it exceeds the limit are zeroed anyway (their exp2 may overflow to +inf and give
// NaN, which the zeroing replaces), and that zeroing folded into the division (a zero-masked
// VDIVPS). The lower clamp stays: 2^t must not be subnormal. Results are bitwise those of the
// generic form. A division rather than VRCP14PS, a Newton step and a multiply: the divider works
// beside the FMA pipes, which a GEMM epilogue shares with the next tile (docs/design.md,
// "Kernel choices").
inline xsimd::batch<float, xsimd::avx512f> gelu_tanh(
    const xsimd::batch<float, xsimd::avx512f>& xb) {
  const __m512 x = xb;
  const __m512 t =
      _mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(detail::gelu_t3),
                                       _mm512_set1_ps(detail::gelu_t1)));
  const __mmask16 keep =
      _mm512_cmp_ps_mask(t, _mm512_set1_ps(detail::gelu_t_max), _CMP_NGT_UQ);  // t <= lim, or NaN
  // VMAXPS returns its second operand for NaN, so a NaN t passes through.
  const __m512 e = vexp2_in_range(
      xsimd::batch<float, xsimd::avx512f>(_mm512_max_ps(_mm512_set1_ps(-detail::gelu_t_max), t)));
  return _mm512_maskz_div_ps(keep, x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}
#endif

template <class V>
V silu(const V& x) {
  // -inf gives the limit 0, not -inf * 0
  return where(x == V(-std::numeric_limits<float>::infinity()), V(0.0f), x * vsigmoid(x));
}

}  // namespace fusedsl::cpu::kernels
