#pragma once
// Small programs that together read every fusedsl op, plus the transformers, for the exporter's
// tests and for the real-XLA interop data (write_interop_cases.cpp).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/hlo/export.hpp"
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
using gpt_small = fd::models::transformer<32, 64, 4, 128, 2, fd::nn::pre_ln, true>;
constexpr auto& gpt = gpt_small::program;

// Random bindings for a program's entry parameters: [-1, 1], or [0.5, 2] for "pos"; a rank-2
// param (a weight [in, out]) is scaled by 1/sqrt(in), the usual initialisation, so that activations
// stay O(1) through the layers as in a trained model.
inline std::vector<fd::dynamic_tensor> random_bindings(
    const std::vector<fd::hlo::export_binding>& bs, unsigned seed_value) {
  std::mt19937 rng(seed_value);
  std::vector<fd::dynamic_tensor> out;
  for (const auto& b : bs) {
    const bool positive = b.name == "pos";
    const float scale = b.kind == fd::graph::op_kind::param && b.shape.rank == 2
                            ? 1.0f / std::sqrt(float(b.shape[0]))
                            : 1.0f;
    std::uniform_real_distribution<float> u(positive ? 0.5f : -scale, positive ? 2.0f : scale);
    fd::dynamic_tensor t(b.type, b.shape);
    for (std::int64_t i = 0; i < b.shape.size(); ++i) {
      const float v = u(rng);
      switch (b.type) {
        case fd::dtype::f32: t.data<float>()[i] = v; break;
        case fd::dtype::bf16: t.data<fd::bf16>()[i] = fd::bf16(v); break;
        case fd::dtype::f16: t.data<fd::f16>()[i] = fd::f16(v); break;
        case fd::dtype::i32: t.data<std::int32_t>()[i] = std::int32_t(v * 10); break;
        case fd::dtype::boolean: t.data<bool>()[i] = v > 0; break;
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

// The reference backend's outputs for those bindings.
inline std::vector<fd::dynamic_tensor> reference_outputs(
    const fd::graph::graph_view& g, const std::vector<fd::hlo::export_binding>& bs,
    std::vector<fd::dynamic_tensor>& inputs) {
  fd::reference::evaluator ev{g};
  for (std::size_t i = 0; i < bs.size(); ++i) ev.bind(bs[i].name, inputs[i].ref());
  return ev.run();
}

}  // namespace export_cases
