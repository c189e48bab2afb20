#pragma once
// Small programs that together read every fusedsl op, plus the transformers, for the exporter's
// tests and for the real-XLA interop data (write_interop_cases.cpp).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fusedsl/export/export.hpp"
#include "fusedsl/expr/quantize.hpp"
#include "fusedsl/expr/scatter.hpp"
#include "fusedsl/expr/sort.hpp"
#include "fusedsl/models/moe.hpp"
#include "fusedsl/models/transformer.hpp"

namespace export_cases {

namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 4, 8>();
constexpr auto y = fd::input<"y", float, 4, 8>();
constexpr auto pos = fd::input<"pos", float, 4, 8>();  // bound to values in [0.5, 2]
constexpr auto row = fd::param<"row", float, 8>();

// Unary ops (log, sqrt and rsqrt read a positive input).
constexpr auto unary_a = fd::compile(-x, fd::abs(x), fd::exp(x), fd::log(pos), fd::sqrt(pos),
                                     fd::rsqrt(pos), fd::tanh(x), fd::erf(x));
constexpr auto unary_b =
    fd::compile(fd::sigmoid(x), fd::relu(x), fd::gelu(x), fd::gelu_tanh(x), fd::silu(x));
// Binary ops with NumPy broadcasting ([4,8] with [8] and with a scalar).
constexpr auto binary = fd::compile(x + row, x - y, x* fd::lit<3.0>, x / pos, fd::max(x, y),
                                    fd::min(x, row), fd::pow(pos, y));
// Comparisons (boolean results cast to f32), where, and casts through bf16, f16 and i32.
constexpr auto compare = fd::compile(fd::cast<float>(fd::eq(x, x)), fd::cast<float>(fd::ne(x, y)),
                                     fd::cast<float>(x < y), fd::cast<float>(x <= row),
                                     fd::cast<float>(x > fd::lit<0.0>), fd::cast<float>(x >= y),
                                     fd::where(x < y, x, y * fd::lit<2.0>));
constexpr auto casts =
    fd::compile(fd::cast<float>(fd::cast<fd::bf16>(x)), fd::cast<float>(fd::cast<fd::f16>(x)),
                fd::cast<float>(fd::cast<std::int32_t>(x* fd::lit<10.0>)),
                fd::cast<float>(fd::exp(fd::cast<fd::bf16>(x)) * fd::cast<fd::bf16>(y)));
// Reductions over each axis, with and without keepdims.
constexpr auto reduce = fd::compile(fd::sum<1>(x), fd::mean<0>(x), fd::max<1, true>(x),
                                    fd::min<0, true>(x), x - fd::mean<1, true>(x));

constexpr auto a3 = fd::input<"a3", float, 2, 4, 8>();
constexpr auto b3 = fd::input<"b3", float, 2, 8, 4>();
constexpr auto w = fd::param<"w", float, 8, 6>();
constexpr auto wt = fd::param<"wt", float, 6, 8>();
// matmul: plain, transposed operands, batched, batch broadcast of a rank-2 operand.
constexpr auto matmul = fd::compile(
    fd::matmul(x, w), fd::matmul<false, true>(x, wt), fd::matmul<true, false>(y, x),
    fd::matmul(a3, b3), fd::matmul<false, true>(a3, a3), fd::matmul(a3, w), fd::matmul(x, b3));
// Structure: permute, transpose, reshape, slice, concat (of inputs and of computed values),
// broadcast, iota.
constexpr auto structure = fd::compile(
    fd::permute<2, 0, 1>(a3), fd::transpose(x), fd::reshape<2, 16>(x), fd::slice<1, 2, 6>(x),
    fd::concat<0>(x, y), fd::tanh(fd::concat<1>(fd::exp(x), -y, x)), fd::broadcast_to<3, 4, 8>(row),
    fd::cast<float>(fd::iota<std::int32_t, 1, 4, 8>()) +
        fd::cast<float>(fd::iota<std::int32_t, 0, 4, 8>()));
// Row composites, a causal mask with -inf, and a fully masked row (softmax gives zeros there).
constexpr auto keep = fd::iota<std::int32_t, 0, 4, 8>() >= fd::iota<std::int32_t, 1, 4, 8>();
constexpr auto masked = fd::where(keep, x, fd::lit<-std::numeric_limits<double>::infinity()>);
constexpr auto empty_row = fd::where(fd::iota<std::int32_t, 0, 4, 8>() > fd::lit<0.0>, x,
                                     fd::lit<-std::numeric_limits<double>::infinity()>);
constexpr auto rows =
    fd::compile(fd::softmax(x), fd::softmax<0>(x), fd::log_softmax(x), fd::softmax(masked),
                fd::softmax(empty_row), fd::layernorm(x, row, fd::param<"beta", float, 8>()),
                fd::rmsnorm(x, row));
// bf16 and f16 arithmetic (computed in f32, rounded to the type); bf16 and f16 results.
constexpr auto xb = fd::input<"xb", fd::bf16, 4, 8>();
constexpr auto wb = fd::param<"wb", fd::bf16, 8, 8>();
constexpr auto xh = fd::input<"xh", fd::f16, 4, 8>();
constexpr auto low_precision =
    fd::compile(fd::softmax(fd::matmul(xb, wb)), fd::gelu(xh) + fd::sum<1, true>(xh));

// int8 and uint8: a linear layer with an i8 weight (per-output-channel f32 scales) on i8
// activations, dequantized by converts; activations quantized by a saturating cast; u8 values
// with a zero point; an i8 sum that saturates.
constexpr auto q8 = fd::input<"q8", std::int8_t, 4, 8>();
constexpr auto w8 = fd::param<"w8", std::int8_t, 8, 6>();
constexpr auto w8_scale = fd::param<"w8_scale", float, 6>();
constexpr auto u8 = fd::input<"u8", std::uint8_t, 4, 8>();
constexpr auto int8 = fd::compile(
    fd::matmul(fd::cast<float>(q8) * fd::lit<0.05>, fd::cast<float>(w8)) * w8_scale,
    fd::cast<float>(fd::cast<std::int8_t>(x * fd::lit<40.0>)),
    (fd::cast<float>(u8) - fd::lit<128.0>) * fd::lit<0.02>, fd::cast<float>(q8 + q8));

// Linear layers with int8 weights (nn::linear's weight dtype std::int8_t): s8 values converted to
// f32 for the dot, the per-channel scales ("<weight>_scale") multiplied after it, then the bias.
constexpr auto int8_linear = fd::compile(fd::nn::linear<"l2", 5, false, std::int8_t>(
    fd::gelu(fd::nn::linear<"l1", 6, true, std::int8_t>(x))));

// quantize / dequantize (expr/quantize.hpp): u8 per row with zero points (values beyond the range
// saturate), the round trip, int8 per channel without a zero point, and an int8 weight
// dequantized per channel into a matmul. (A quantized matmul result is left out: summed in another
// order, a value next to a tie may round the other way.)
constexpr auto qscale = fd::param<"qscale", float, 4, 1>();
constexpr auto qzero = fd::param<"qzero", std::uint8_t, 4, 1>();
constexpr auto quantized = fd::quantize<std::uint8_t>(x * fd::lit<100.0>, qscale, qzero);
constexpr auto quantization =
    fd::compile(fd::cast<float>(quantized), fd::dequantize(quantized, qscale, qzero),
                fd::cast<float>(fd::quantize<std::int8_t>(y* fd::lit<50.0>, row)),
                fd::matmul(fd::dequantize(quantized, qscale, qzero), fd::dequantize(w8, w8_scale)));

// Embedding lookups (ids of rank 2 and 1, bound to values outside the table on both sides, which
// gather clamps) with positions and layernorm; a bf16 table.
constexpr auto tokens = fd::input<"ids", std::int32_t, 2, 4>();
constexpr auto flat_ids = fd::input<"flat_ids", std::int32_t, 5>();
constexpr auto vocab = fd::param<"vocab", float, 6, 8>();
constexpr auto vocab_bf16 = fd::param<"vocab_bf16", fd::bf16, 6, 8>();
constexpr auto positions = fd::param<"positions", float, 4, 8>();
constexpr auto embedding = fd::compile(
    fd::layernorm(fd::gather(vocab, tokens) + positions, row, fd::param<"beta", float, 8>()),
    fd::gather(vocab, flat_ids), fd::cast<float>(fd::gather(vocab_bf16, flat_ids)));
// A decode step: a key row written into a cache at a run-time position, a window of the updated
// cache read back (at step - 2, and at a position past the end: both clamped), a window along
// axis 1 of a rank-3 value.
constexpr auto cache = fd::input<"cache", float, 8, 4>();
constexpr auto key_row = fd::input<"key", float, 1, 4>();
constexpr auto step = fd::input<"step", std::int32_t>();
constexpr auto updated = fd::dynamic_update_slice<0>(cache, fd::tanh(key_row), step);
constexpr auto decode =
    fd::compile(updated, fd::dynamic_slice<0, 3>(updated, step - fd::lit<2.0>),
                fd::sum<0>(fd::dynamic_slice<0, 2>(updated, step + fd::lit<5.0>)),
                fd::exp(fd::dynamic_slice<1, 2>(a3, step)));
// A state (fd::state) given its new value (fd::update): a key row written into a cache at a
// run-time position; the new value is an output that may take the state parameter's buffer.
constexpr auto kv_state = fd::state<"kv", float, 8, 4>();
constexpr auto kv_next = fd::dynamic_update_slice<0>(kv_state, fd::tanh(key_row), step);
constexpr auto state_update = fd::compile(fd::sum<0>(kv_next), fd::update(kv_state, kv_next));
// argmax over logits bound to ties, NaNs, an all -inf row and infinities (argmax_logits below),
// along each axis, with keepdims, of a computed value and of bf16 values.
constexpr auto logits = fd::input<"logits", float, 4, 8>();
constexpr auto argmax = fd::compile(fd::argmax<1>(logits), fd::argmax<0, true>(logits),
                                    fd::cast<float>(fd::argmax<1>(-logits)) + fd::lit<0.5>,
                                    fd::argmax<0>(fd::cast<fd::bf16>(logits)));
// top_k, sort and argsort (expr/sort.hpp) over the same logits: ties by the lower index, NaN the
// largest, -0 equal to 0, an all -inf row.
constexpr auto top3 = fd::top_k<3>(logits);
constexpr auto order = fd::compile(top3.values, top3.indices, fd::sort<0>(logits),
                                   fd::argsort(logits), fd::top_k_mask<2>(-logits));
// A mask made by one fusion and read by two others as a select's predicate, and a boolean input
// read the same way (XLA:CPU's kLoop fusions read such a pred through s8: export/xla_cpu_fusion).
constexpr auto at_rank =
    fd::eq(fd::reshape<4, 1, 8>(fd::round(x * fd::lit<3.0>)), fd::iota<float, 0, 3, 1>());
constexpr auto pred_between_parts =
    fd::compile(fd::max<2>(fd::where(at_rank, fd::reshape<4, 1, 8>(y), fd::neg_inf)),
                fd::max<2>(fd::where(at_rank, fd::iota<float, 1, 1, 8>(), fd::lit<-1.0>)),
                fd::where(fd::input<"keep", bool, 4, 8>(), y, fd::neg_inf));
// scatter_add (expr/scatter.hpp): rows added at ids in [-9, 9] of a 6-row table (random_bindings'
// i32 values): repeated ids add up, the ones outside the table are dropped.
constexpr auto scatter_add = fd::compile(
    fd::scatter_add(fd::input<"table", float, 6, 8>(), fd::input<"ids", std::int32_t, 12>(),
                    fd::tanh(fd::input<"rows", float, 12, 8>())));
// RoPE-like rotation: angles = position * 3 * frequency (up to 21 rad), the two halves of each row
// rotated by cos and sin; sin and cos of bf16 values.
constexpr auto q = fd::input<"q", float, 8, 16>();
constexpr auto freq = fd::param<"freq", float, 8>();
constexpr auto angle = fd::cast<float>(fd::iota<std::int32_t, 0, 8, 8>()) * fd::lit<3.0> * freq;
constexpr auto q1 = fd::slice<1, 0, 8>(q);
constexpr auto q2 = fd::slice<1, 8, 16>(q);
constexpr auto rope =
    fd::compile(fd::concat<1>(q1 * fd::cos(angle) - q2 * fd::sin(angle),
                              q2* fd::cos(angle) + q1 * fd::sin(angle)),
                fd::cast<float>(fd::sin(fd::cast<fd::bf16>(x)) + fd::cos(fd::cast<fd::bf16>(y))));

// floor, ceil, trunc and round (half to even) over values bound to ties, +-0, the last floats with
// a fraction, +-inf and NaN (rounding_values below), and round of a scaled value.
constexpr auto r = fd::input<"r", float, 4, 8>();
constexpr auto rounding = fd::compile(fd::floor(r), fd::ceil(r), fd::trunc(r), fd::round(r),
                                      fd::round(r* fd::lit<0.5>) - fd::floor(-r));

// A stack of a hand-written block, and the transformers.
constexpr auto h = fd::input<"h", float, 8, 16>();
constexpr auto block = fd::nn::block([](auto t) {
  return fd::layernorm(t + fd::gelu(fd::nn::linear<"fc", 16>(t)), fd::param<"g", float, 16>(),
                       fd::param<"b", float, 16>());
});
constexpr auto stack = fd::compile(fd::nn::stack<"blocks", 3>(block, h));
constexpr auto& seed = fd::models::seed::program;
// Batched causal grouped-query attention ([B, L, D], 4 query heads sharing 2 key/value heads).
constexpr auto xs = fd::input<"xs", float, 2, 16, 32>();
constexpr auto batched_gqa = fd::compile(fd::nn::attention<"attn", 4, 2, true>(xs));
// nn::attention_options: cross-attention to an encoder output of another length and width with
// a per-head relative-position bias and no scale (T5), grouped heads; and causal sliding-window
// self-attention with an ALiBi-like per-head, per-key bias.
constexpr auto enc = fd::input<"enc", float, 2, 12, 24>();
constexpr auto rel_bias = fd::input<"rel_bias", float, 4, 16, 12>();
constexpr auto key_bias = fd::input<"key_bias", float, 4, 1, 16>();
constexpr fd::nn::attention_options cross_options{
    .heads = 4, .kv_heads = 2, .scale = 1.0, .context = true, .bias = true};
constexpr fd::nn::attention_options window_options{
    .heads = 4, .causal = true, .window = 5, .bias = true};
constexpr auto attention_options =
    fd::compile(fd::nn::attention<"xa", cross_options>(xs, enc, rel_bias),
                fd::nn::attention<"sa", window_options>(xs, key_bias));
// A mixture of 4 SwiGLU experts with top-2 routing and a capacity of 5 of the 12 tokens
// (models/moe.hpp): gathers of rows by computed indices, a batched matmul over stacked weights.
constexpr auto tokens_moe = fd::input<"tokens", float, 12, 8>();
constexpr auto moe_routed = fd::compile(
    fd::models::moe_routed<4, 16, 5>(tokens_moe, fd::models::moe_top2_gates<4>(tokens_moe)));
using gpt_small = fd::models::transformer<32, 64, 4, 128, 2, fd::nn::pre_ln, true>;
constexpr auto& gpt = gpt_small::program;

// Values for the argmax case's "logits" [4, 8]: ties (first max wins), NaNs (the first NaN wins),
// an all -inf row (index 0), +-inf and -0.0 against 0.0.
inline fd::dynamic_tensor argmax_logits() {
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  const float v[4][8] = {{1, 3, 3, 0, 3, -1, 2, 3},
                         {0, 5, nan, 7, nan, 1, 2, 3},
                         {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},
                         {-inf, -0.0f, inf, 4, inf, 0.0f, -2, nan}};
  fd::dynamic_tensor t(fd::dtype::f32, fd::dims(std::in_place, 4, 8));
  for (int i = 0; i < 32; ++i) t.data<float>()[i] = v[i / 8][i % 8];
  return t;
}

// Values for the rounding case's "r" [4, 8]. No subnormals: XLA:CPU flushes them to zero, so there
// ceil(1e-40) is 0, not 1 (the CPU kernels keep them; cpu_op_table_test).
inline fd::dynamic_tensor rounding_values() {
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  const float v[32] = {
      0.5f,   -0.5f,       1.5f,         -1.5f,      2.5f,        -2.5f,      3.5f,  -0.0f,
      0.0f,   0.49999997f, -0.49999997f, 8388607.5f, -8388607.5f, 8388609.0f, 1e30f, -1e30f,
      inf,    -inf,        nan,          2.4f,       -2.6f,       7.7f,       -7.3f, 100.5f,
      101.5f, 0.7f,        -0.7f,        1e-30f,     -1e-30f,     3.0f,       -3.0f, 0.25f};
  fd::dynamic_tensor t(fd::dtype::f32, fd::dims(std::in_place, 4, 8));
  for (int i = 0; i < 32; ++i) t.data<float>()[i] = v[i];
  return t;
}

}  // namespace export_cases
