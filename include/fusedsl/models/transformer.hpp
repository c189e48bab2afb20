#pragma once
// Ready-made transformer stacks with the shapes used throughout the docs and benchmarks.
//   seed:   2 layers, d_model 128, 4 heads, FFN 512, seq 128 (the seeds' section 11 benchmark)
//   medium: 2 layers, d_model 512, 8 heads, FFN 2048, seq 512
//   gpt2_small<Layers>: d_model 768, 12 heads, FFN 3072, seq 128, pre-LN, causal
#include "fusedsl/compile.hpp"

namespace fusedsl::models {

template <std::int64_t Seq, std::int64_t DModel, int Heads, std::int64_t Hidden, int Layers,
          class Norm = nn::post_ln, bool Causal = false, class T = float>
struct transformer {
  static constexpr std::int64_t seq = Seq, d_model = DModel, hidden = Hidden;
  static constexpr int heads = Heads, layers = Layers;
  static constexpr auto x = input<"x", T, Seq, DModel>();
  static constexpr auto block = nn::transformer_block<Norm, Heads, Hidden, Heads, Causal>;
  static constexpr auto y = nn::stack<"layers", Layers>(block, x);
  using program_type = decltype(compile(y));
  static constexpr program_type program{};
  // FLOPs of one call: matmuls only (2 per multiply-add), the usual convention.
  static constexpr double flops() {
    const double l = double(Seq), d = double(DModel), f = double(Hidden);
    const double per_layer = 2 * l * d * d * 4 + 2 * l * l * d * 2 + 2 * l * d * f * 2;
    return per_layer * Layers;
  }
};

using seed = transformer<128, 128, 4, 512, 2>;
using medium = transformer<512, 512, 8, 2048, 2>;
template <int Layers>
using gpt2_small = transformer<128, 768, 12, 3072, Layers, nn::pre_ln, true>;

}  // namespace fusedsl::models
