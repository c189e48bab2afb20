#pragma once
// Transformer stacks with bf16 weights and f32 activations: the shapes, parameter names and FLOPs
// of models::transformer (post-LN, GELU-tanh FFN), with every matmul's weight a bf16 param read
// through cast<float>; biases, layernorm parameters and activations stay f32. The CPU executor
// widens such weights once at bind, or, with cpu::amx_bf16{}, packs them for AMX-BF16 tiles.
//   seed_bf16_weights:   d_model 128, 4 heads, FFN 512, seq 128, 2 layers
//   medium_bf16_weights: d_model 512, 8 heads, FFN 2048, seq 512, 2 layers
#include "fusedsl/models/transformer.hpp"

namespace fusedsl::models {

template <std::int64_t Seq, std::int64_t DModel, int Heads, std::int64_t Hidden, int Layers>
struct bf16_weights_transformer {
  static constexpr std::int64_t seq = Seq, d_model = DModel, hidden = Hidden,
                                head_dim = DModel / Heads;
  static constexpr int heads = Heads, layers = Layers;

  // y = x @ cast<float>(w) + b, with w a bf16 param [In, Out] and b an f32 param [Out].
  template <fixed_string W, fixed_string B, std::int64_t In, std::int64_t Out, class X>
  static constexpr auto linear(X x) {
    return matmul(x, cast<float>(param<W, bf16, In, Out>())) + param<B, float, Out>();
  }
  template <class X>
  static constexpr auto split_heads(X x) {  // [Seq, DModel] -> [Heads, Seq, head_dim]
    return permute<1, 0, 2>(reshape<Seq, Heads, head_dim>(x));
  }
  static constexpr auto block = nn::block([](auto x) {
    const auto q = split_heads(linear<"attn.q.w", "attn.q.b", DModel, DModel>(x));
    const auto k = split_heads(linear<"attn.k.w", "attn.k.b", DModel, DModel>(x));
    const auto v = split_heads(linear<"attn.v.w", "attn.v.b", DModel, DModel>(x));
    // Scaled dot-product attention (Vaswani et al., 2017), as nn::attention computes it.
    const auto p = softmax(matmul<false, true>(q, k) * lit<1.0 / nn::sqrt_of(double(head_dim))>);
    const auto o = reshape<Seq, DModel>(permute<1, 0, 2>(matmul(p, v)));
    const auto h =
        layernorm(x + linear<"attn.o.w", "attn.o.b", DModel, DModel>(o),
                  param<"ln1.gamma", float, DModel>(), param<"ln1.beta", float, DModel>());
    const auto f = linear<"ffn.fc2.w", "ffn.fc2.b", Hidden, DModel>(
        gelu_tanh(linear<"ffn.fc1.w", "ffn.fc1.b", DModel, Hidden>(h)));
    return layernorm(h + f, param<"ln2.gamma", float, DModel>(),
                     param<"ln2.beta", float, DModel>());
  });
  static constexpr auto x = input<"x", float, Seq, DModel>();
  static constexpr auto y = nn::stack<"layers", Layers>(block, x);
  using program_type = decltype(compile(y));
  static constexpr program_type program{};
  static constexpr double flops() {
    return transformer<Seq, DModel, Heads, Hidden, Layers>::flops();
  }
};

using seed_bf16_weights = bf16_weights_transformer<128, 128, 4, 512, 2>;
using medium_bf16_weights = bf16_weights_transformer<512, 512, 8, 2048, 2>;

}  // namespace fusedsl::models
