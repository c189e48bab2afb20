#pragma once
// Instruction-set selection for the CPU kernels and the few vector operations they share.
//
// Every kernel is a template on an `Arch` tag. `native_arch` is the best instruction set the
// compiler targets (-march=...): AVX-512F, else AVX2+FMA, else SSE2 (every x86-64 target, the
// compiler's default included); NEON on AArch64; else `scalar_arch`. Defining
// FUSEDSL_CPU_FORCE_SCALAR makes `native_arch` the scalar path; tests also instantiate
// `scalar_arch` directly so both paths are exercised in one build.
//
// A vector of the scalar arch is a plain `float`, so generic lambdas and the functions below
// work unchanged on one lane (tails) and on full vectors.
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "fusedsl/core/config.hpp"

// GCC 12's AVX-512 headers self-initialise `__Y` in _mm512_undefined_*, which -Wuninitialized
// reports wherever an intrinsic is inlined (GCC PR 105593); silence it for these headers only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#if defined(__AVX__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <xsimd/xsimd.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace fusedsl::cpu::kernels {

// One-lane fallback: no vector unit assumed.
struct scalar_arch {
  static constexpr const char* name() { return "scalar"; }
};

#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
using native_arch = xsimd::avx512f;
#elif defined(__AVX2__) && defined(__FMA__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
using native_arch = xsimd::fma3<xsimd::avx2>;
#elif defined(__SSE2__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
using native_arch = xsimd::sse2;
#elif defined(__aarch64__) && defined(__ARM_NEON) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
using native_arch = xsimd::neon64;
#else
using native_arch = scalar_arch;
#endif

}  // namespace fusedsl::cpu::kernels

namespace fusedsl::cpu {

// The instruction set this translation unit's CPU kernels run on: "avx512f", "fma3+avx2", "sse2",
// "arm64+neon" or "scalar" (what Eigen::SimdInstructionSetsInUse() is to Eigen). It is chosen at
// compile time from the target flags (-march=native, -mavx512f, -mavx2 -mfma); the compiler's
// default x86-64 target gets SSE2, the slowest of the vector paths.
constexpr const char* instruction_set() {
  return kernels::native_arch::name();
}

}  // namespace fusedsl::cpu

namespace fusedsl::cpu::kernels {

// simd<Arch>: the float vector of an arch, its width, and unaligned load/store.
template <class Arch>
struct simd {
  using vec = xsimd::batch<float, Arch>;
  static constexpr int width = static_cast<int>(vec::size);
  static vec load(const float* p) { return vec::load_unaligned(p); }
  static void store(float* p, vec v) { v.store_unaligned(p); }
  static vec broadcast(float x) { return vec(x); }
  static float reduce_add(vec v) { return xsimd::hadd(v); }
  static float reduce_max(vec v) {
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
    if constexpr (std::is_same_v<Arch, xsimd::avx512f>) return _mm512_reduce_max_ps(v);
#endif
    alignas(64) float t[width];
    v.store_aligned(t);
    float m = t[0];
    for (int i = 1; i < width; ++i) m = t[i] > m ? t[i] : m;
    return m;
  }
};

template <>
struct simd<scalar_arch> {
  using vec = float;
  static constexpr int width = 1;
  static float load(const float* p) { return *p; }
  static void store(float* p, float v) { *p = v; }
  static float broadcast(float x) { return x; }
  static float reduce_add(float v) { return v; }
  static float reduce_max(float v) { return v; }
};

template <class Arch>
using vec_t = typename simd<Arch>::vec;

// Operations on one lane (float) and on full vectors (xsimd batches), same names.
// fmadd rounds once where the target has a fused multiply-add (x86 with FMA3, AArch64, or any
// target whose <cmath> says so with FP_FAST_FMAF, which clang does not define). Without one (SSE2,
// the x86-64 default) std::fma is a call into the C library, several times the time of a multiply
// and an add, and the vector lanes (xsimd's sse2 fma) multiply then add: so there the one-lane
// path multiplies then adds too, and both agree.
inline float fmadd(float a, float b, float c) {
#if defined(__FMA__) || defined(__aarch64__) || defined(FP_FAST_FMAF) || defined(__FP_FAST_FMAF)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}
template <class A>
xsimd::batch<float, A> fmadd(const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b,
                             const xsimd::batch<float, A>& c) {
  return xsimd::fma(a, b, c);
}
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
// xsimd 8.1 (Debian 12's) has no AVX-512 fma kernel: its generic `x * y + z` becomes one VFMADD
// only when the compiler contracts it (GCC at -O2 and above with its default -ffp-contract=fast;
// not at -O0/-O1, under -ffp-contract=off, or where GCC decides otherwise). Uncontracted, every
// kernel rounded twice per multiply-add, results depended on the build flags, and the GEMM
// micro-kernel ran at half speed (0.48 of the FMA peak against 0.88, 128x512x128). xsimd fixed it
// in 10.0 (xtensor-stack/xsimd#885); this overload makes it one rounding on any version.
inline xsimd::batch<float, xsimd::avx512f> fmadd(const xsimd::batch<float, xsimd::avx512f>& a,
                                                 const xsimd::batch<float, xsimd::avx512f>& b,
                                                 const xsimd::batch<float, xsimd::avx512f>& c) {
  return _mm512_fmadd_ps(a, b, c);
}
#endif

// where(c, a, b): a where c holds, else b.
inline float where(bool c, float a, float b) {
  return c ? a : b;
}
template <class A>
xsimd::batch<float, A> where(const xsimd::batch_bool<float, A>& c, const xsimd::batch<float, A>& a,
                             const xsimd::batch<float, A>& b) {
  return xsimd::select(c, a, b);
}

// maximum/minimum: NaN in `b` is returned (matches x86 max/min with b as the second source).
inline float maximum(float a, float b) {
  return a > b ? a : b;
}
template <class A>
xsimd::batch<float, A> maximum(const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b) {
  return xsimd::select(a > b, a, b);
}
inline float minimum(float a, float b) {
  return a < b ? a : b;
}
template <class A>
xsimd::batch<float, A> minimum(const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b) {
  return xsimd::select(a < b, a, b);
}

// The x86 instructions are this exact rule (MAXPS: SRC1 > SRC2 ? SRC1 : SRC2); one op where
// the compare-and-blend above takes two.
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
inline xsimd::batch<float, xsimd::avx512f> maximum(const xsimd::batch<float, xsimd::avx512f>& a,
                                                   const xsimd::batch<float, xsimd::avx512f>& b) {
  return _mm512_max_ps(a, b);
}
inline xsimd::batch<float, xsimd::avx512f> minimum(const xsimd::batch<float, xsimd::avx512f>& a,
                                                   const xsimd::batch<float, xsimd::avx512f>& b) {
  return _mm512_min_ps(a, b);
}
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
inline xsimd::batch<float, xsimd::fma3<xsimd::avx2>> maximum(
    const xsimd::batch<float, xsimd::fma3<xsimd::avx2>>& a,
    const xsimd::batch<float, xsimd::fma3<xsimd::avx2>>& b) {
  return _mm256_max_ps(a, b);
}
inline xsimd::batch<float, xsimd::fma3<xsimd::avx2>> minimum(
    const xsimd::batch<float, xsimd::fma3<xsimd::avx2>>& a,
    const xsimd::batch<float, xsimd::fma3<xsimd::avx2>>& b) {
  return _mm256_min_ps(a, b);
}
#endif

inline float square_root(float a) {
  return std::sqrt(a);
}
template <class A>
xsimd::batch<float, A> square_root(const xsimd::batch<float, A>& a) {
  return xsimd::sqrt(a);
}

// a / b, correctly rounded on every path.
inline float quotient(float a, float b) {
  return a / b;
}
template <class A>
xsimd::batch<float, A> quotient(const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b) {
  return a / b;
}

#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
// xsimd 8 divides and takes square roots of NEON float batches by reciprocal estimates and Newton
// steps (its 32-bit ARM forms): inf / x, sqrt(inf) and divisions by subnormals come out NaN or of
// the wrong sign. AArch64 has exact instructions for both.
inline xsimd::batch<float, xsimd::neon64> square_root(const xsimd::batch<float, xsimd::neon64>& a) {
  return vsqrtq_f32(a);
}
inline xsimd::batch<float, xsimd::neon64> quotient(const xsimd::batch<float, xsimd::neon64>& a,
                                                   const xsimd::batch<float, xsimd::neon64>& b) {
  return vdivq_f32(a, b);
}
#endif

// Whether a lane is NaN. xsimd 8's `!=` on AVX and AVX-512 batches is an ordered compare
// (_CMP_NEQ_OQ): false when an operand is NaN, unlike C++'s and IEEE's `!=`, so NaN tests go
// through xsimd::isnan.
inline bool lane_nan(float x) {
  return x != x;
}
template <class A>
xsimd::batch_bool<float, A> lane_nan(const xsimd::batch<float, A>& x) {
  return xsimd::isnan(x);
}

// To the nearest integer, ties to even, in the default rounding mode (roundps with the current
// mode, NEON's frintn, or xsimd's add-and-subtract 2^23 on SSE2), the same as std::nearbyint's.
inline float round_even(float a) {
  return std::nearbyint(a);
}
template <class A>
xsimd::batch<float, A> round_even(const xsimd::batch<float, A>& a) {
  return xsimd::nearbyint(a);
}

inline float absolute(float a) {
  return std::fabs(a);
}
template <class A>
xsimd::batch<float, A> absolute(const xsimd::batch<float, A>& a) {
  return xsimd::abs(a);
}

// Round `n` up to a multiple of `m` (m > 0).
constexpr std::ptrdiff_t round_up(std::ptrdiff_t n, std::ptrdiff_t m) {
  return (n + m - 1) / m * m;
}

}  // namespace fusedsl::cpu::kernels
