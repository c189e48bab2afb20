// GPT-2 (models/gpt2.hpp) with int8 weights (gpt2_config's weight dtype std::int8_t): every linear
// layer and the tied embedding quantized per output channel when the f32 checkpoint is bound, the
// decode step reading int8 panels, against the f32 model on the small reference model
// (tests/models/data/gpt2_small_test; its weights are random, so this checks the machinery and the
// error of the scheme, not a real model's accuracy).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fusedsl/runtime/gpt2_generator.hpp"
#include "reference.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;

namespace {

using namespace gpt2_reference;

using int8_cfg = fm::gpt2_config<2, 64, 4, 512, 128, std::int8_t>;
using gen_f32 = fm::gpt2_generator<small_cfg, 16, 32, 128>;
using gen_int8 = fm::gpt2_generator<int8_cfg, 16, 32, 128>;

// The two largest values of a row: (largest, second).
std::pair<float, float> top2(std::span<const float> row) {
  float a = -INFINITY, b = -INFINITY;
  for (float x : row) {
    if (x > a) {
      b = a;
      a = x;
    } else if (x > b) {
      b = x;
    }
  }
  return {a, b};
}

int argmax(std::span<const float> row) {
  return int(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

TEST_CASE("int8 weights: every program runs as generated kernels, the weights a quarter of f32") {
  CHECK(fd::cpu::executor<fm::gpt2_decode_layer_program<int8_cfg>>::kernels_plan().n_refused == 0);
  CHECK(fd::cpu::executor<fm::gpt2_decode_embed_program<int8_cfg>>::kernels_plan().n_refused == 0);
  CHECK(fd::cpu::executor<fm::gpt2_head_program<int8_cfg, 1>>::kernels_plan().n_refused == 0);
  CHECK(fd::cpu::executor<fm::gpt2_prefill_layer_program<int8_cfg, 32>>::kernels_plan().n_refused ==
        0);
  // Bytes read per token: the matrices at one byte, their scales, biases and norms in f32.
  const double ratio = int8_cfg::weight_bytes() / small_cfg::weight_bytes();
  CHECK(ratio > 0.25);
  CHECK(ratio < 0.30);
}

TEST_CASE(
    "int8 weights: 64 teacher-forced steps give the f32 model's top token where it is clear") {
  const auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  auto a = std::make_unique<gen_f32>(file);
  auto q = std::make_unique<gen_int8>(file);
  CHECK(q->interpreted_groups() == 0);
  const auto prompt = read_ids("prompt_ids.npy");
  const auto ids = read_ids("generated_ids.npy");
  std::span<const float> la = a->prefill(prompt);
  std::span<const float> lq = q->prefill(prompt);
  int clear = 0, agree = 0;
  double worst = 0;
  for (int k = 0; k < 64; ++k) {
    if (k > 0) {
      la = a->step(ids[std::size_t(k - 1)]);
      lq = q->step(ids[std::size_t(k - 1)]);
    }
    const double d = max_diff(la, lq.data()) / largest(la);
    worst = std::max(worst, d);
    CHECK_MESSAGE(d <= 0.05, "step " << k);  // a wrong scale or panel moves them by their size
    const auto [first, second] = top2(la);
    if (first - second > 0.1f) {
      ++clear;
      agree += argmax(la) == argmax(lq);
    }
  }
  MESSAGE("largest difference over 64 steps, relative to the largest logit: "
          << worst << "; top-1 agreement " << agree << " of " << clear << " clear steps");
  CHECK(clear >= 32);
  CHECK(double(agree) >= 0.99 * double(clear));
}
