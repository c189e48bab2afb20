#pragma once
// The programs the CUDA executor is checked with, shared by the device test (executor_test.cu)
// and its CPU replay (schedule_emulation_test.cpp), so both check the same plans. The f32 twins
// are the same programs in f32, for the reference run on the bf16-rounded values.
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

}  // namespace fusedsl::test::cuda_programs
