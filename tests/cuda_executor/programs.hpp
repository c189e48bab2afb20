#pragma once
// The programs the CUDA executor is checked with, shared by the device test (executor_test.cu)
// and the host emulation of its schedule (schedule_emulation_test.cpp), so both check the same
// plans. The f32 twins are the same programs in f32, for the reference run on the bf16-rounded
// values.
#include <cstdint>

#include "fusedsl/models/transformer.hpp"

namespace fusedsl::test::cuda_programs {

using seed_bf16 = models::transformer<128, 128, 4, 512, 2, nn::post_ln, false, bf16>;
using seed_f32 = models::transformer<128, 128, 4, 512, 2, nn::post_ln, false, float>;
// 3 layers: an odd count, so the layer ping-pong goes through the carry buffer.
using causal_bf16 = models::transformer<128, 128, 4, 512, 3, nn::pre_ln, true, bf16>;
using causal_f32 = models::transformer<128, 128, 4, 512, 3, nn::pre_ln, true, float>;

// 4 query heads sharing 2 key/value heads, causal, pre-LN, 2 layers.
inline constexpr auto gqa_block = nn::transformer_block<nn::pre_ln, 4, 512, 2, true>;
using gqa_bf16 = decltype(compile(nn::stack<"layers", 2>(gqa_block, input<"x", bf16, 128, 128>())));
using gqa_f32 = decltype(compile(nn::stack<"layers", 2>(gqa_block, input<"x", float, 128, 128>())));

// f32: GEMM + bias + relu, a layernorm with an elementwise epilogue, and a loop reading x
// transposed and broadcasting constants.
namespace f32_mlp_parts {
inline constexpr auto x = input<"x", float, 64, 96>();
inline constexpr auto w = param<"w", float, 96, 80>();
inline constexpr auto b = param<"b", float, 80>();
inline constexpr auto gamma = param<"gamma", float, 80>();
inline constexpr auto beta = param<"beta", float, 80>();
inline constexpr auto h = relu(matmul(x, w) + b);
inline constexpr auto y = tanh(layernorm(h, gamma, beta)) * lit<0.5>;
inline constexpr auto z = exp(transpose(x) * lit<0.1>) - lit<1.0>;
}  // namespace f32_mlp_parts
inline constexpr auto f32_mlp = compile(f32_mlp_parts::y, f32_mlp_parts::z);

// Batched attention (2 x 2 heads, 64 positions, head_dim 32) with an additive key mask [B, 1, 1,
// L]: a score program between Q Kᵀ and the softmax.
template <class T>
constexpr auto masked_attention() {
  constexpr auto q = input<"q", T, 2, 2, 64, 32>();
  constexpr auto k = input<"k", T, 2, 2, 64, 32>();
  constexpr auto v = input<"v", T, 2, 2, 64, 32>();
  constexpr auto mask = input<"mask", T, 2, 1, 1, 64>();
  return compile(matmul(softmax(matmul<false, true>(q, k) * lit<0.17677669529663687> + mask), v));
}
using masked_bf16 = decltype(masked_attention<bf16>());
using masked_f32 = decltype(masked_attention<float>());

// 48 queries (the last 48 of 80 positions) over 80 keys, causal: key j is visible to query i
// when j <= i + 32 (the mask is a score program; head_dim 20 is no tensor-core tile).
inline constexpr auto causal_rows = slice<0, 32, 80>(iota<std::int32_t, 0, 80, 80>());
inline constexpr auto causal_cols = slice<0, 32, 80>(iota<std::int32_t, 1, 80, 80>());
inline constexpr auto offset_causal =
    compile(matmul(softmax(where(causal_rows >= causal_cols,
                                 matmul<false, true>(input<"q", float, 2, 48, 20>(),
                                                     input<"k", float, 2, 80, 20>()) *
                                     lit<0.22360679774997896>,
                                 neg_inf)),
                   input<"v", float, 2, 80, 20>()));

// Reductions over the innermost, a middle (kept) and the outermost axis, with prologues and an
// epilogue; and long ones (a warp per output over 100 values, a block over 5000).
inline constexpr auto reduce_x = input<"x", float, 6, 40, 33>();
inline constexpr auto reduce_long = input<"long", float, 3, 5000>();
inline constexpr auto reduce_mid = input<"mid", float, 50, 100>();
inline constexpr auto reductions =
    compile(sum<2>(exp(reduce_x) * lit<0.5>), max<1, true>(reduce_x) - lit<1.0>,
            mean<0>(reduce_x* reduce_x), sum<1>(reduce_long), max<1>(abs(reduce_mid)));

// A vocabulary softmax (GPT-2's 50257 columns) with a prologue.
template <class T>
constexpr auto vocab_softmax() {
  return compile(softmax(input<"x", T, 4, 50257>() * lit<0.5>));
}
using vocab_bf16 = decltype(vocab_softmax<bf16>());
using vocab_f32 = decltype(vocab_softmax<float>());

// GEMMs off every tile: 48 x 72 x 40 in bf16 with bias and gelu, 37 x 53 x 29 in f32 reading B
// transposed, and a batch of 3 bf16 products of 40 x 56 x 24.
template <class T>
constexpr auto odd_gemms() {
  constexpr auto x = input<"x", T, 48, 40>();
  constexpr auto w = param<"w", T, 40, 72>();
  constexpr auto b = param<"b", T, 72>();
  constexpr auto y = input<"y", float, 37, 29>();
  constexpr auto u = param<"u", float, 53, 29>();
  constexpr auto a3 = input<"a", T, 3, 40, 24>();
  constexpr auto b3 = input<"b3", T, 3, 24, 56>();
  return compile(gelu(matmul(x, w) + b), matmul(y, transpose(u)) * lit<2.0>, matmul(a3, b3));
}
using odd_bf16 = decltype(odd_gemms<bf16>());
using odd_f32 = decltype(odd_gemms<float>());

}  // namespace fusedsl::test::cuda_programs
