#pragma once
// Compile-time checks at the front door. Each check is a class template whose arguments carry the
// operands' shapes, so the one error the user sees reads
//   static assertion failed: matmul: inner dimensions differ
//   ... in instantiation of 'matmul_inner_dimensions<false, shape<128,64>, shape<32,128>>'
// and the function still returns a well-formed type, so nothing cascades from it.
#include "fusedsl/graph/node.hpp"

namespace fusedsl::diag {

using graph::op_kind;

template <bool Ok, op_kind Op, class Lhs, class Rhs>
struct cannot_broadcast {
  static_assert(
      Ok,
      "elementwise op: operands cannot be broadcast together (trailing axes must be equal or 1)");
};
template <bool Ok, op_kind Op, dtype Lhs, dtype Rhs>
struct dtype_mismatch {
  static_assert(Ok, "elementwise op: operands have different dtypes; cast one of them");
};
template <bool Ok, op_kind Op, dtype T>
struct needs_floating {
  static_assert(Ok, "unary op: the operand must be a floating-point tensor (f32, bf16, f16)");
};
template <bool Ok, class Pred>
struct select_predicate {
  static_assert(Ok, "where: the predicate must be a boolean tensor (the result of a comparison)");
};
template <bool Ok, class Lhs, class Rhs>
struct matmul_rank {
  static_assert(Ok,
                "matmul: operands must have rank 2 or more (reshape a vector to [1,K] or [K,1])");
};
template <bool Ok, class Lhs, class Rhs>
struct matmul_inner_dimensions {
  static_assert(Ok, "matmul: inner dimensions differ");
};
template <bool Ok, class Lhs, class Rhs>
struct matmul_batch_dimensions {
  static_assert(Ok, "matmul: batch dimensions cannot be broadcast together");
};
template <bool Ok, dtype Lhs, dtype Rhs>
struct matmul_dtype {
  static_assert(Ok, "matmul: operands have different dtypes; cast one of them");
};
template <bool Ok, int Axis, class Shape>
struct axis_out_of_range {
  static_assert(Ok, "reduction: axis out of range for the operand's rank");
};
template <bool Ok, int Axis, class Shape>
struct softmax_axis {
  static_assert(Ok, "softmax: axis out of range for the operand's rank");
};
template <bool Ok, class From, class To>
struct reshape_size {
  static_assert(Ok, "reshape: the number of elements changes");
};
template <bool Ok, class Shape>
struct bad_permutation {
  static_assert(Ok, "permute: not a permutation of the operand's axes");
};
template <bool Ok, int Axis, std::int64_t Begin, std::int64_t End, class Shape>
struct slice_range {
  static_assert(Ok, "slice: range is empty or out of bounds, or axis out of range");
};
template <bool Ok, int Axis>
struct concat_shapes {
  static_assert(Ok,
                "concat: operands must have the same dtype, rank and dimensions outside the axis");
};
template <bool Ok, class From, class To>
struct broadcast_to_shape {
  static_assert(Ok, "broadcast_to: the operand cannot be broadcast to the target shape");
};
template <bool Ok, class Shape, class Gamma>
struct norm_params {
  static_assert(Ok, "layernorm: gamma and beta must be vectors of the last axis' size");
};
template <bool Ok, std::int64_t DModel, int Heads>
struct heads_divide_model {
  static_assert(Ok, "attention: the number of heads must divide d_model");
};
template <bool Ok, int Heads, int KvHeads>
struct kv_heads_divide_heads {
  static_assert(Ok, "attention: num_kv_heads must divide the number of heads");
};
template <bool Ok, class Shape>
struct sequence_input {
  static_assert(Ok, "nn: the input must be [seq, d_model] or [batch, seq, d_model]");
};
template <bool Ok, class XShape, class MaskShape>
struct attention_mask {
  static_assert(
      Ok,
      "attention: the mask must be [seq] for x [seq, d] or [batch, seq] for x [batch, seq, d], "
      "boolean or of x's dtype");
};
template <bool Ok, class XShape, class ContextShape>
struct attention_context {
  static_assert(Ok,
                "attention: the key/value sequence (context) must be [seq_kv, d_kv] for x [seq, d] "
                "or [batch, seq_kv, d_kv] for x [batch, seq, d], of x's dtype");
};
template <bool Ok, class BiasShape>
struct attention_bias {
  static_assert(Ok,
                "attention: the bias must broadcast to the scores [batch, heads, seq, seq_kv] (or "
                "[heads, seq, seq_kv] for x [seq, d]) and have x's dtype");
};
template <bool Ok, class Shape>
struct block_shape {
  static_assert(Ok, "stack: a repeated block must return a tensor of its input's shape and dtype");
};

}  // namespace fusedsl::diag
