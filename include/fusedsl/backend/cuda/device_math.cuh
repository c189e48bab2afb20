#pragma once
// The CUDA backend's math policy for the op table (graph/ops.hpp), and the dtype conversions of
// its generated kernels. Everything here is FUSEDSL_HD: nvcc compiles it for the device (CUDA's
// expf, erff, tanhf, ...) and any host compiler for the host (the C library's), so the host
// emulation of the device schedule (tests/cuda_executor) runs this very code.
//
// Values are carried in f32. A load converts from the buffer's dtype; an op's result is rounded to
// its dtype (bf16 and f16 to nearest even, i32 toward zero, bool to 0 or 1); a store converts to
// the destination's dtype (i32 saturating, NaN to 0), as the CPU kernels do (cpu/kernels/codegen).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "fusedsl/core/config.hpp"
#include "fusedsl/core/dtype.hpp"
#include "fusedsl/graph/ops.hpp"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace fusedsl::cuda {

// ---- bit casts and 16-bit formats ----

FUSEDSL_HD inline float float_of_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
FUSEDSL_HD inline std::uint32_t bits_of_float(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

// bf16: the upper half of an f32, rounded to nearest even; NaN stays a (quiet) NaN.
FUSEDSL_HD inline float bf16_to_f32(std::uint16_t b) {
  return float_of_bits(std::uint32_t(b) << 16);
}
FUSEDSL_HD inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = bits_of_float(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

// f16 (IEEE binary16), rounded to nearest even: the hardware conversion on the device, the same
// rounding in core/dtype.hpp on the host.
FUSEDSL_HD inline float f16_to_f32(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return fusedsl::f16::to_float(h);
#endif
}
FUSEDSL_HD inline std::uint16_t f32_to_f16(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return fusedsl::f16::from_float(f);
#endif
}

// f32 to i32: toward zero, saturating, NaN to 0.
FUSEDSL_HD inline std::int32_t f32_to_i32(float x) {
  if (!(x == x)) return 0;
  if (x >= 2147483520.0f) return std::numeric_limits<std::int32_t>::max();
  if (x <= -2147483648.0f) return std::numeric_limits<std::int32_t>::min();
  return std::int32_t(x);
}

// f32 to i8 or u8 (T's range lo..hi): toward zero, saturating, NaN to 0.
FUSEDSL_HD inline float f32_to_small_int(float x, float lo, float hi) {
  if (!(x == x)) return 0.0f;
  return ::truncf(x < lo ? lo : x > hi ? hi : x);
}

// ---- elements of a buffer ----

// Element i of a buffer of dtype T, as f32.
template <dtype T>
FUSEDSL_HD inline float load_f32(const void* p, long i) {
  if constexpr (T == dtype::f32)
    return static_cast<const float*>(p)[i];
  else if constexpr (T == dtype::bf16)
    return bf16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
  else if constexpr (T == dtype::f16)
    return f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
  else if constexpr (T == dtype::i32)
    return float(static_cast<const std::int32_t*>(p)[i]);
  else if constexpr (T == dtype::i8)
    return float(static_cast<const std::int8_t*>(p)[i]);
  else if constexpr (T == dtype::u8)
    return float(static_cast<const std::uint8_t*>(p)[i]);
  else {
    static_assert(T == dtype::boolean, "cuda load_f32: a dtype without a load");
    return static_cast<const unsigned char*>(p)[i] != 0 ? 1.0f : 0.0f;
  }
}

// Element i of a buffer of dtype T set from an f32 value.
template <dtype T>
FUSEDSL_HD inline void store_f32(void* p, long i, float x) {
  if constexpr (T == dtype::f32)
    static_cast<float*>(p)[i] = x;
  else if constexpr (T == dtype::bf16)
    static_cast<std::uint16_t*>(p)[i] = f32_to_bf16(x);
  else if constexpr (T == dtype::f16)
    static_cast<std::uint16_t*>(p)[i] = f32_to_f16(x);
  else if constexpr (T == dtype::i32)
    static_cast<std::int32_t*>(p)[i] = f32_to_i32(x);
  else if constexpr (T == dtype::i8)
    static_cast<std::int8_t*>(p)[i] = std::int8_t(f32_to_small_int(x, -128.0f, 127.0f));
  else if constexpr (T == dtype::u8)
    static_cast<std::uint8_t*>(p)[i] = std::uint8_t(f32_to_small_int(x, 0.0f, 255.0f));
  else {
    static_assert(T == dtype::boolean, "cuda store_f32: a dtype without a store");
    static_cast<unsigned char*>(p)[i] = x != 0.0f ? 1 : 0;
  }
}

// The carried value of dtype T: rounded (bf16, f16), truncated (i32), truncated and saturated
// with NaN as 0 (i8, u8), 0 or 1 (bool).
template <dtype T>
FUSEDSL_HD inline float to_dtype(float x) {
  if constexpr (T == dtype::bf16)
    return bf16_to_f32(f32_to_bf16(x));
  else if constexpr (T == dtype::f16)
    return f16_to_f32(f32_to_f16(x));
  else if constexpr (T == dtype::i32)
    return ::truncf(x);
  else if constexpr (T == dtype::i8)
    return f32_to_small_int(x, -128.0f, 127.0f);
  else if constexpr (T == dtype::u8)
    return f32_to_small_int(x, 0.0f, 255.0f);
  else if constexpr (T == dtype::boolean)
    return x != 0.0f ? 1.0f : 0.0f;
  else {
    static_assert(T == dtype::f32, "cuda to_dtype: a dtype without a rounding rule");
    return x;
  }
}

// ---- the op table's primitives ----

// NaN-propagating maximum and minimum, as XLA's (and graph/scalar.hpp's).
FUSEDSL_HD inline float nan_max(float x, float y) {
  return (x != x || y != y) ? x + y : (x > y ? x : y);
}
FUSEDSL_HD inline float nan_min(float x, float y) {
  return (x != x || y != y) ? x + y : (x < y ? x : y);
}

struct device_math {
  FUSEDSL_HD static float neg(float x) { return -x; }
  FUSEDSL_HD static float abs(float x) { return ::fabsf(x); }
  FUSEDSL_HD static float exp(float x) { return ::expf(x); }
  FUSEDSL_HD static float log(float x) { return ::logf(x); }
  FUSEDSL_HD static float sqrt(float x) { return ::sqrtf(x); }
  FUSEDSL_HD static float tanh(float x) { return ::tanhf(x); }
  FUSEDSL_HD static float sin(float x) { return ::sinf(x); }
  FUSEDSL_HD static float cos(float x) { return ::cosf(x); }
  FUSEDSL_HD static float erf(float x) { return ::erff(x); }
  FUSEDSL_HD static float erfc(float x) { return ::erfcf(x); }
  FUSEDSL_HD static float pow(float x, float y) { return ::powf(x, y); }
  FUSEDSL_HD static float max(float x, float y) { return nan_max(x, y); }
  FUSEDSL_HD static float min(float x, float y) { return nan_min(x, y); }
  FUSEDSL_HD static float eq(float x, float y) { return x == y ? 1.0f : 0.0f; }
  FUSEDSL_HD static float ne(float x, float y) { return x != y ? 1.0f : 0.0f; }
  FUSEDSL_HD static float lt(float x, float y) { return x < y ? 1.0f : 0.0f; }
  FUSEDSL_HD static float le(float x, float y) { return x <= y ? 1.0f : 0.0f; }
  FUSEDSL_HD static float select(float p, float a, float b) { return p != 0.0f ? a : b; }
  FUSEDSL_HD static float trunc(float x) { return ::truncf(x); }
  FUSEDSL_HD static float floor(float x) { return ::floorf(x); }
  FUSEDSL_HD static float ceil(float x) { return ::ceilf(x); }
  FUSEDSL_HD static float round_even(float x) { return ::rintf(x); }  // ties to even
};

// Every computed op of the table instantiated on the device policy, on whatever compiler includes
// this header (the host compiler too): an op whose body needs a primitive device_math lacks stops
// the build here, the error naming the op (op_traits<op_kind::...>) and device_math, rather than
// when nvcc compiles a program that uses it.
static_assert(graph::bodies_on<device_math, float>() == graph::computed_ops(),
              "cuda::device_math: a computed op of the table has no device body");

// Op K of the table on f32 values, with the device policy.
template <graph::op_kind K, class... V>
FUSEDSL_HD inline float apply_op(V... x) {
  return graph::op_traits<K>::template apply<device_math>(float(x)...);
}

}  // namespace fusedsl::cuda
