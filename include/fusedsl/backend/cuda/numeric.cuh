#pragma once
// Storage types the CUDA kernels read and write, and their conversions to the f32 they compute in.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <concepts>
#include <cstdint>

#include "fusedsl/core/dtype.hpp"

namespace fusedsl::cuda {

using bf16 = __nv_bfloat16;
using f16 = __half;

template <class T>
concept storage_type = std::same_as<T, float> || std::same_as<T, bf16> || std::same_as<T, f16>;

template <class T>
concept half_type = std::same_as<T, bf16> || std::same_as<T, f16>;

// The storage type of a floating dtype, and back.
template <dtype T>
struct storage_of {
  using type = float;
};
template <>
struct storage_of<dtype::bf16> {
  using type = bf16;
};
template <>
struct storage_of<dtype::f16> {
  using type = f16;
};
template <dtype T>
using storage_t = typename storage_of<T>::type;
template <storage_type T>
inline constexpr dtype dtype_of_storage = std::same_as<T, float>  ? dtype::f32
                                          : std::same_as<T, bf16> ? dtype::bf16
                                                                  : dtype::f16;

template <storage_type T>
__host__ __device__ inline float to_f32(T x) {
  if constexpr (std::same_as<T, float>)
    return x;
  else if constexpr (std::same_as<T, bf16>)
    return __bfloat162float(x);
  else
    return __half2float(x);
}

template <storage_type T>
__host__ __device__ inline T from_f32(float x) {
  if constexpr (std::same_as<T, float>)
    return x;
  else if constexpr (std::same_as<T, bf16>)
    return __float2bfloat16(x);
  else
    return __float2half(x);
}

// Two f32 values rounded into one 32-bit register of two 16-bit values (low half first), the
// operand format of mma.sync.
template <half_type T>
__device__ inline std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::same_as<T, bf16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  }
}

template <storage_type T>
inline constexpr const char* type_name = std::same_as<T, float>  ? "f32"
                                         : std::same_as<T, bf16> ? "bf16"
                                                                 : "f16";

// Two adjacent outputs in one store: a float2, or two 16-bit values packed into one word.
template <storage_type Out>
__device__ inline void store_pair(Out* dst, float v0, float v1) {
  if constexpr (std::same_as<Out, float>)
    *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
  else
    *reinterpret_cast<std::uint32_t*>(dst) = pack2<Out>(v0, v1);
}

}  // namespace fusedsl::cuda
