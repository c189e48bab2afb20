#pragma once
// quantize and dequantize: affine int8 quantization as expressions (ONNX's QuantizeLinear and
// DequantizeLinear, TFLite's and PyTorch's affine scheme), written with the op table's ops, so
// that every backend (the reference, the CPU and CUDA kernels, the interpreter, the HLO export and
// the TPU-style backend) computes them, and a GEMM or row kernel fuses them into its prologue or
// epilogue like any elementwise op.
//
//   q = saturate(round_half_even(x / scale) + zero_point)     (to int8 or uint8)
//   x' = (q - zero_point) * scale
//
// scale and zero_point broadcast against x as NumPy does: a scalar (per tensor), a vector over the
// last axis (per channel), a [rows, 1] column (per row, as dynamic quantization makes).
#include <cstdint>

#include "fusedsl/expr/ops.hpp"

namespace fusedsl {

namespace diag {
template <bool Ok>
struct quantized_type {
  static_assert(Ok, "quantize: the result type must be std::int8_t or std::uint8_t");
};
template <bool Ok, dtype X, dtype S>
struct quantize_scale {
  static_assert(Ok, "quantize: x and the scale must be floating-point tensors of one dtype");
};
template <bool Ok, dtype Q, dtype Z>
struct zero_point_type {
  static_assert(Ok, "quantize: the zero point must have the quantized values' type");
};
template <bool Ok, dtype Q>
struct dequantize_input {
  static_assert(Ok, "dequantize: the values must be std::int8_t or std::uint8_t");
};
}  // namespace diag

namespace detail {
constexpr bool is_int8_dtype(dtype t) {
  return t == dtype::i8 || t == dtype::u8;
}
}  // namespace detail

// x quantized to T (std::int8_t or std::uint8_t) with zero point 0 (symmetric). Ties round to
// even; results beyond T's range saturate; NaN gives 0 (the cast's rule, docs/ops.md).
template <element T, expression X, expression S>
constexpr auto quantize(X x, S scale) {
  (void)diag::quantized_type<detail::is_int8_dtype(dtype_of<T>)>{};
  (void)diag::quantize_scale<is_floating(X::type) && S::type == X::type, X::type, S::type>{};
  return cast<T>(round(x / scale));
}

// x quantized to T with a zero point of type T (asymmetric): saturate(round(x / scale) + zero).
template <element T, expression X, expression S, expression Z>
constexpr auto quantize(X x, S scale, Z) {
  (void)diag::quantized_type<detail::is_int8_dtype(dtype_of<T>)>{};
  (void)diag::quantize_scale<is_floating(X::type) && S::type == X::type, X::type, S::type>{};
  (void)diag::zero_point_type<Z::type == dtype_of<T>, dtype_of<T>, Z::type>{};
  return cast<T>(round(x / scale) + expr::cast_t<X::type, Z>{});
}

// q (int8 or uint8) as scale's dtype: q * scale.
template <expression Q, expression S>
constexpr auto dequantize(Q, S scale) {
  (void)diag::dequantize_input<detail::is_int8_dtype(Q::type), Q::type>{};
  (void)diag::quantize_scale<is_floating(S::type), S::type, S::type>{};
  return expr::cast_t<S::type, Q>{} * scale;
}

// q (int8 or uint8) with a zero point of q's type, as scale's dtype: (q - zero_point) * scale.
template <expression Q, expression S, expression Z>
constexpr auto dequantize(Q, S scale, Z) {
  (void)diag::dequantize_input<detail::is_int8_dtype(Q::type), Q::type>{};
  (void)diag::quantize_scale<is_floating(S::type), S::type, S::type>{};
  (void)diag::zero_point_type<Z::type == Q::type, Q::type, Z::type>{};
  return (expr::cast_t<S::type, Q>{} - expr::cast_t<S::type, Z>{}) * scale;
}

}  // namespace fusedsl
