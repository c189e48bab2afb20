// GPT-2's paged batch step (runtime/gpt2_paged.hpp) with bf16 pages (gpt2_config::with_cache<bf16>)
// against Hugging Face transformers' (f32) outputs for the small reference model
// (tests/models/data/gpt2_small_test) and against gpt2_generator with a bf16 cache: the attention
// reads the gathered bf16 rows in place, the prompt's pages hold the generator's bf16 cache bit
// for bit, each step's key and value are rounded once as they are written, and the logits stay
// within bf16's rounding of transformers'.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "fusedsl/runtime/gpt2_generator.hpp"
#include "fusedsl/runtime/gpt2_paged.hpp"
#include "paged_cases.hpp"
#include "reference.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;

namespace {

using namespace gpt2_reference;

// As the f32 test's: batch 4, 128 positions a sequence, pages of 8 positions, 40 pages.
using decoder = fm::gpt2_paged_decoder<bf16_cfg, 4, 128, 8, 40, 16, 32, 128>;
using decoder_f32 = fm::gpt2_paged_decoder<small_cfg, 4, 128, 8, 40, 16, 32, 128>;
using batch = fm::gpt2_continuous_batch<bf16_cfg, 4, 128, 8, 40, 16, 32, 128>;

}  // namespace

TEST_CASE("bf16 pages: the attention reads the gathered bf16 rows in place, at half the arena") {
  using P = decoder::layer_program;
  static_assert(std::is_same_v<decoder::cache_type, fd::bf16>);
  const auto& lp = fd::cpu::executor<P>::kernels_plan();
  CHECK(lp.n_refused == 0);
  int attention = 0;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi) {
    const fd::plan::kernel_desc& d = lp.desc[std::size_t(gi)];
    if (d.kind != fd::plan::kernel_kind::attention) continue;
    ++attention;
    CHECK(d.att.kv_len >= 0);
    CHECK(d.att.kv_len_per_batch);
    // K and V are the gathered bf16 copies (with the step's rows written in), not f32 copies.
    CHECK(P::graph[d.att.k.base].op == fd::graph::op_kind::dynamic_update_slice);
    CHECK(P::graph[d.att.k.base].type == fd::dtype::bf16);
    CHECK(P::graph[d.att.v.base].type == fd::dtype::bf16);
  }
  CHECK(attention == 1);
  int updates = 0;
  for (std::size_t i = 0; i < P::node_count; ++i)
    if (P::graph[int(i)].op == fd::graph::op_kind::dynamic_update_slice) {
      ++updates;
      CHECK(P::graph[int(i)].type == fd::dtype::bf16);
      CHECK(P::memory.alias_of[i] >= 0);  // in place, over the gathered copy
    }
  CHECK(updates == 2 * decoder::batch);
  // The two gathered copies [B * Ctx, D] are most of a layer's arena; in bf16 they are half.
  using F = decoder_f32::layer_program;
  constexpr std::int64_t gathers_f32 = 2 * decoder::batch * decoder::context * small_cfg::d * 4;
  CHECK(P::arena_bytes() <= F::arena_bytes() - gathers_f32 / 2);
  MESSAGE("paged layer arena: " << P::arena_bytes() << " bytes (f32 pages: " << F::arena_bytes()
                                << ")");
}

TEST_CASE("bf16 pages hold the bf16 generator's cache of the prompt, then each step's rounded") {
  const auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  auto dec = std::make_unique<decoder>(file);
  auto gen = std::make_unique<fm::gpt2_generator<bf16_cfg, 16, 32, 128>>(file);
  const auto prompt = read_ids("prompt_ids.npy");
  const std::int64_t n = std::int64_t(prompt.size());
  dec->prefill(prompt, scattered_pages);
  gen->prefill(prompt);
  constexpr std::int64_t D = small_cfg::d, H = small_cfg::heads, Dh = small_cfg::head_dim;
  constexpr std::int64_t P = small_cfg::positions, S = decoder::page_size;
  auto pool_row = [](std::int64_t j) { return scattered_pages[std::size_t(j / S)] * S + j % S; };
  for (int layer = 0; layer < small_cfg::layers; ++layer)
    for (bool values : {false, true}) {
      const fd::bf16* pool = dec->pool(layer, values);
      const fd::bf16* cache = gen->cache(layer, values);
      int mismatched = 0;
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t x = 0; x < Dh; ++x)
            mismatched +=
                pool[pool_row(j) * D + h * Dh + x].bits != cache[(h * P + j) * Dh + x].bits;
      CHECK_MESSAGE(mismatched == 0, "layer " << layer << (values ? " values" : " keys"));
    }
  // A step writes its row at position n; the rows before it stay as they were.
  const decoder::row r{7, n, scattered_pages};
  dec->step(std::span(&r, 1));
  const auto la = gen->step(7);
  CHECK(max_diff(dec->logits(0), la.data()) <= bf16_tolerance * largest(la));
  int written = 0;
  for (std::int64_t x = 0; x < D; ++x)
    written += dec->pool(0, false)[pool_row(n) * D + x].bits != 0;
  CHECK(written > D / 2);
  CHECK(dec->interpreted_groups() == 0);
}

TEST_CASE("bf16 pages: 64 teacher-forced steps near transformers' logits, the same tokens") {
  const auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  auto dec = std::make_unique<decoder>(file);
  const double worst = check_teacher_forced(
      *dec, [](std::span<const float> row) { return bf16_tolerance * largest(row); });
  MESSAGE(
      "largest difference over 64 steps, relative to 2^-6 of the row's largest logit: " << worst);
}

TEST_CASE("bf16 pages: four sequences joining and leaving a batch decode transformers' tokens") {
  const auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  batch cb(file);
  check_continuous_batch(cb);
}
