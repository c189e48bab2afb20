// GPT-2 (models/gpt2.hpp) with a bf16 KV cache (gpt2_config's cache dtype) on the CPU executor,
// against the f32-cache model and Hugging Face transformers' outputs for the small reference model
// (tests/models/data/gpt2_small_test): the decode attention reads the bf16 cache in place, the
// prompt's keys and values are rounded as the decode step rounds its own, and the logits stay
// within bf16's rounding of transformers' (f32) ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusedsl/runtime/gpt2_generator.hpp"
#include "reference.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;

namespace {

using namespace gpt2_reference;

using gen_f32 = fm::gpt2_generator<small_cfg, 16, 32, 128>;
using gen_bf16 = fm::gpt2_generator<bf16_cfg, 16, 32, 128>;

}  // namespace

TEST_CASE("a bf16 cache: the decode attention reads it as bf16, stopping at pos + 1") {
  using D = fm::gpt2_decode_layer_program<bf16_cfg>;
  static_assert(bf16_cfg::cache_bytes_per_position() * 2 == small_cfg::cache_bytes_per_position());
  const auto& lp = fd::cpu::executor<D>::kernels_plan();
  CHECK(lp.n_refused == 0);
  int attention = 0;
  for (int gi = 0; gi < D::fusion.n_groups; ++gi) {
    const fd::plan::kernel_desc& d = lp.desc[std::size_t(gi)];
    if (d.kind != fd::plan::kernel_kind::attention) continue;
    ++attention;
    CHECK(d.att.kv_len >= 0);
    // K and V are the bf16 states' updated values themselves, not f32 copies of them.
    CHECK(D::graph[d.att.k.base].op == fd::graph::op_kind::dynamic_update_slice);
    CHECK(D::graph[d.att.k.base].type == fd::dtype::bf16);
    CHECK(D::graph[d.att.v.base].type == fd::dtype::bf16);
  }
  CHECK(attention == 1);
}

TEST_CASE("a bf16 cache holds the prompt's keys and values rounded to bf16, then each step's") {
  const auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  auto a = std::make_unique<gen_f32>(file);
  auto b = std::make_unique<gen_bf16>(file);
  const auto prompt = read_ids("prompt_ids.npy");
  a->prefill(prompt);
  b->prefill(prompt);
  constexpr std::int64_t H = small_cfg::heads, P = small_cfg::positions, Dh = small_cfg::head_dim;
  for (int layer = 0; layer < small_cfg::layers; ++layer)
    for (bool values : {false, true}) {
      const float* fa = a->cache(layer, values);
      const fd::bf16* fb = b->cache(layer, values);
      int mismatched = 0;
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t x = 0; x < std::int64_t(prompt.size()) * Dh; ++x)
          mismatched += fd::bf16(fa[h * P * Dh + x]).bits != fb[h * P * Dh + x].bits;
      CHECK_MESSAGE(mismatched == 0, "layer " << layer << (values ? " values" : " keys"));
    }
  const auto la = a->step(7);
  CHECK(max_diff(la, b->step(7).data()) <= bf16_tolerance * largest(la));
  CHECK(b->interpreted_groups() == 0);
}

TEST_CASE("a bf16 cache: 64 steps under teacher forcing near transformers, the same tokens") {
  const auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  auto b = std::make_unique<gen_bf16>(file);
  const auto prompt = read_ids("prompt_ids.npy");
  const auto ids = read_ids("generated_ids.npy");
  const auto step_logits = read_floats("step_logits.npy", 64);
  auto logits = b->prefill(prompt);
  double worst = 0;
  for (int k = 0; k < 64; ++k) {
    if (k > 0) logits = b->step(ids[std::size_t(k - 1)]);
    const double d = max_diff(logits, step_logits.data() + k * V) /
                     largest(std::span<const float>(step_logits.data() + k * V, V));
    CHECK_MESSAGE(d <= bf16_tolerance, "step " << k);
    worst = std::max(worst, d);
    CHECK_MESSAGE(b->greedy() == ids[std::size_t(k)], "step " << k);
  }
  MESSAGE("largest difference over 64 steps, relative to the largest logit: " << worst);
  // Greedy decoding on its own tokens: transformers' 64.
  b->prefill(prompt);
  std::vector<std::int32_t> got{b->greedy()};
  while (got.size() < ids.size()) {
    b->step(got.back());
    got.push_back(b->greedy());
  }
  CHECK(got == ids);
}
