#pragma once
// The programs the CUDA executor is checked with, shared by the device test (executor_test.cu)
// and the host emulation of its schedule (schedule_emulation_test.cpp), so both check the same
// plans. The f32 twins are the same programs in f32, for the reference run on the bf16-rounded
// values.
#include <cstdint>
#include <limits>
#include <random>
#include <string_view>

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

// Embedding lookups: rows of a [50, 24] table picked by [4, 7] i32 ids (ids outside the table
// read its nearest row), scaled (a loop); rows picked by other ids through a softmax (the gather
// in the row group's prologue); and row sums of a [16, 24] table's rows picked by those ids (the
// gather in a reduce group's prologue).
namespace embedding_parts {
inline constexpr auto table = param<"table", float, 50, 24>();
inline constexpr auto positions = param<"positions", float, 16, 24>();
inline constexpr auto ids = input<"ids", std::int32_t, 4, 7>();
inline constexpr auto ids2 = input<"ids2", std::int32_t, 4, 7>();
}  // namespace embedding_parts
inline constexpr auto embedding =
    compile(gather(embedding_parts::table, embedding_parts::ids) * lit<2.0>,
            softmax(gather(embedding_parts::table, embedding_parts::ids2) * lit<0.5>),
            sum<2>(gather(embedding_parts::positions, embedding_parts::ids2)));

// Windows at a run-time start (clamped into the operand): a dynamic slice of rows and one of
// columns, and a dynamic update slice of an input's columns (not in place: the input keeps its
// own buffer, so the launch writes the whole result).
namespace window_parts {
inline constexpr auto x = input<"x", float, 16, 9>();
inline constexpr auto u = input<"u", float, 16, 2>();
inline constexpr auto start = input<"start", std::int32_t>();
}  // namespace window_parts
inline constexpr auto windows =
    compile(dynamic_slice<0, 5>(window_parts::x, window_parts::start) + lit<1.0>,
            dynamic_slice<1, 3>(window_parts::x, window_parts::start),
            dynamic_update_slice<1>(window_parts::x, window_parts::u, window_parts::start));

// A key/value cache in miniature: states [2 heads, 8 positions, 6] (f32 keys, bf16 values), row
// `pos` of each written in place every call, then read back at `pos`; the keys' column sums over
// all positions.
namespace cache_parts {
inline constexpr auto keys = state<"k_cache", float, 2, 8, 6>();
inline constexpr auto values = state<"v_cache", bf16, 2, 8, 6>();
inline constexpr auto k = input<"k", float, 2, 1, 6>();
inline constexpr auto v = input<"v", float, 2, 1, 6>();
inline constexpr auto pos = input<"pos", std::int32_t>();
inline constexpr auto keys2 = dynamic_update_slice<1>(keys, k, pos);
inline constexpr auto values2 = dynamic_update_slice<1>(values, cast<bf16>(v), pos);
}  // namespace cache_parts
inline constexpr auto cache_step =
    compile(dynamic_slice<1, 1>(cache_parts::keys2, cache_parts::pos) * lit<1.0>,
            cast<float>(dynamic_slice<1, 1>(cache_parts::values2, cache_parts::pos)),
            sum<1>(cache_parts::keys2), update(cache_parts::keys, cache_parts::keys2),
            update(cache_parts::values, cache_parts::values2));

// argmax over 300 columns (a warp per row), over 5000 (a block per row) and over a middle axis of
// 50 (a thread per output), with a prologue.
namespace argmax_parts {
inline constexpr auto x = input<"x", float, 6, 300>();
inline constexpr auto wide = input<"wide", float, 3, 5000>();
inline constexpr auto mid = input<"mid", float, 4, 50, 3>();
}  // namespace argmax_parts
inline constexpr auto argmaxes = compile(argmax<1>(argmax_parts::x), argmax<1>(argmax_parts::wide),
                                         argmax<1>(argmax_parts::mid* lit<-1.0>));

// Data the normal random bindings do not cover, for the programs above: ids from -8 to 61 over
// the embedding's tables of 50 and 16 rows (out of range on both sides), and argmax rows with ties,
// NaNs and -inf (the expected index of each special row is in the comment beside it).
inline void fill_ids(std::int32_t* ids, std::int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<std::int32_t> id(-8, 61);
  for (std::int64_t i = 0; i < n; ++i) ids[i] = id(rng);
}
inline void fill_argmax(std::string_view name, float* v, const dims& shape, std::mt19937& rng) {
  std::uniform_int_distribution<int> small(0, 3);  // few distinct values: many ties
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  const std::int64_t cols = shape[1];
  for (std::int64_t i = 0; i < shape.size(); ++i) v[i] = float(small(rng));
  if (name == "x") {
    for (std::int64_t j = 0; j < cols; ++j) v[j] = -inf;  // row 0: none above -inf: 0
    v[cols + 250] = nan, v[cols + 37] = nan;              // row 1: the first NaN: 37
    for (std::int64_t j = 0; j < cols; ++j) v[2 * cols + j] = -inf;
    v[2 * cols + 299] = -5.0f;                       // row 2: the last column: 299
    v[3 * cols + 0] = 7.0f, v[3 * cols + 5] = 7.0f;  // row 3: a tie at 0 and 5: 0
  } else if (name == "wide") {
    v[4999] = nan, v[4000] = nan;                                // row 0: 4000
    for (std::int64_t j = 0; j < cols; ++j) v[cols + j] = 2.0f;  // row 1: all equal: 0
    v[2 * cols + 4097] = 9.0f, v[2 * cols + 33] = 9.0f;          // row 2: 33 (another lane's)
  } else {  // mid [4, 50, 3], argmax of -mid along the 50
    v[(1 * 50 + 20) * 3 + 2] = nan, v[(1 * 50 + 41) * 3 + 2] = nan;  // output [1, 2]: 20
    v[(2 * 50 + 49) * 3 + 0] = -1.0f;                                // output [2, 0]: 49
  }
}

// A fill for a test's calls: the i32 scalar input `name` set to `value`, every other input filled
// by `fill` (fill(name, info, tensor), as both tests' fills are called).
template <class Fill>
auto with_i32(Fill& fill, std::string_view name, std::int32_t value) {
  return [&fill, name, value](const auto& input, const auto& info, auto& t) {
    if (input == name)
      t.template data<std::int32_t>()[0] = value;
    else
      fill(input, info, t);
  };
}

}  // namespace fusedsl::test::cuda_programs
