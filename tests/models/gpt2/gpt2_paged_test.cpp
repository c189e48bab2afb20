// GPT-2 decoding a batch over a paged KV cache (runtime/gpt2_paged.hpp) against Hugging Face
// transformers' outputs for the small reference model (tests/models/data/gpt2_small_test): the
// teacher-forced logits through pages, four sequences of different lengths joining and leaving
// a continuous batch mid-run, page reuse, and the errors.
#include "fusedsl/runtime/gpt2_paged.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "paged_cases.hpp"
#include "reference.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;

namespace {

using namespace gpt2_reference;

// Batch 4, 128 positions a sequence, pages of 8 positions, 40 pages in the pool.
using decoder = fm::gpt2_paged_decoder<small_cfg, 4, 128, 8, 40, 16, 32, 128>;
using batch = fm::gpt2_continuous_batch<small_cfg, 4, 128, 8, 40, 16, 32, 128>;

}  // namespace

TEST_CASE("the paged step runs as generated kernels: attention stops at each row's length") {
  using P = decoder::layer_program;
  const auto& lp = fd::cpu::executor<P>::kernels_plan();
  CHECK(lp.n_refused == 0);
  int attention = 0;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi)
    if (const auto& d = lp.desc[std::size_t(gi)]; d.kind == fd::plan::kernel_kind::attention) {
      ++attention;
      CHECK(d.att.kv_len >= 0);
      CHECK(d.att.kv_len_per_batch);
    }
  CHECK(attention == 1);
  // The step's keys and values go into the gathered copies in place: every dynamic update slice
  // writes over its operand, so the arena holds the two gathers [B * Ctx, D] and nothing of the
  // pool's size.
  int updates = 0;
  for (std::size_t i = 0; i < P::node_count; ++i)
    if (P::graph[int(i)].op == fd::graph::op_kind::dynamic_update_slice) {
      ++updates;
      CHECK(P::memory.alias_of[i] >= 0);
    }
  CHECK(updates == 2 * decoder::batch);
  CHECK(P::arena_bytes() < 4 * decoder::batch * decoder::context * small_cfg::d * 4);
  MESSAGE("paged layer arena: " << P::arena_bytes() << " bytes");
  CHECK(fd::cpu::executor<decoder::embed_program>::kernels_plan().n_refused == 0);
  CHECK(fd::cpu::executor<decoder::head_program>::kernels_plan().n_refused == 0);
}

TEST_CASE("through scattered pages, 64 teacher-forced steps match transformers' logits") {
  auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  auto dec = std::make_unique<decoder>(file);
  const double worst = check_teacher_forced(*dec, [](std::span<const float>) { return 1e-3; });
  MESSAGE("largest difference over 64 paged steps: " << worst * 1e-3);
}

TEST_CASE("four sequences joining and leaving a continuous batch decode as each alone") {
  auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  batch cb(file);
  check_continuous_batch(cb);
}

TEST_CASE("a bad page table, a full cache and a bad step are clear errors") {
  auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  auto dec = std::make_unique<decoder>(file);
  const std::vector<std::int32_t> prompt{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  CHECK_THROWS_WITH_AS(dec->prefill(prompt, std::vector<std::int32_t>{4}),
                       "gpt2 paged: the prompt's page table holds 1 pages; position 9 needs 2 of "
                       "8 positions",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(dec->prefill(prompt, std::vector<std::int32_t>{4, 40}),
                       "gpt2 paged: the prompt's page table entry 1 is page 40, outside the pool "
                       "[0, 40)",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(dec->prefill(prompt, std::vector<std::int32_t>{4, -1}),
                       "gpt2 paged: the prompt's page table entry 1 is page -1, outside the pool "
                       "[0, 40)",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(dec->prefill(prompt, std::vector<std::int32_t>{4, 4}),
                       "gpt2 paged: the prompt's page table holds page 4 twice (entries 0 and 1)",
                       fm::model_error);
  const std::vector<std::int32_t> a{4, 5}, b{6, 5}, full(16, 0);
  dec->prefill(prompt, a);
  const decoder::row one{3, 10, a};
  CHECK_THROWS_WITH_AS(dec->step(std::vector<decoder::row>{one, {3, 9, b}}),
                       "gpt2 paged: page 5 is in the page tables of rows 0 and 1", fm::model_error);
  CHECK_THROWS_WITH_AS(dec->step(std::vector<decoder::row>{{3, 16, a}}),
                       "gpt2 paged: row 0's page table holds 2 pages; position 16 needs 3 of 8 "
                       "positions",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(dec->step(std::vector<decoder::row>{{3, 128, full}}),
                       "gpt2 paged: row 0: position 128 overflows the cache: a sequence holds "
                       "positions 0 to 127",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(dec->step(std::vector<decoder::row>{{512, 10, a}}),
                       "gpt2 paged: row 0: token 512 is outside the vocabulary [0, 512)",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(dec->step(std::vector<decoder::row>(5, one)),
                       "gpt2 paged: a step of 5 sequences; the batch holds 1 to 4",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(dec->step(std::vector<decoder::row>{}),
                       "gpt2 paged: a step of 0 sequences; the batch holds 1 to 4",
                       fm::model_error);
  dec->step(std::span(&one, 1));
  CHECK_THROWS_WITH_AS(dec->logits(1), "gpt2 paged: row 1: the last step had 1 rows",
                       fm::model_error);
}

TEST_CASE("an exhausted page pool is an error before anything runs; leaving frees pages") {
  auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  batch cb(file);
  // 40 pages of 8: three 104-token prompts take 13 pages each, 39 in all.
  const std::vector<std::int32_t> long_prompt(104, 7);
  const int s0 = cb.join(long_prompt);
  const int s1 = cb.join(long_prompt);
  const int s2 = cb.join(long_prompt);
  CHECK(cb.free_pages() == 1);
  CHECK_THROWS_WITH_AS(cb.join(std::vector<std::int32_t>(9, 7)),
                       "gpt2 paged: the page pool is exhausted: 2 pages needed, 1 of 40 free (3 "
                       "sequences hold the rest; let one leave)",
                       fm::model_error);
  // Position 104 starts a page for each of them: only one is free, so the step runs nothing.
  const std::vector<batch::feed> all{{s0, 1}, {s1, 1}, {s2, 1}};
  CHECK_THROWS_WITH_AS(cb.step(all),
                       "gpt2 paged: the page pool is exhausted: 3 pages needed, 1 of 40 free (3 "
                       "sequences hold the rest; let one leave)",
                       fm::model_error);
  CHECK(cb.length(s0) == 104);
  CHECK(cb.free_pages() == 1);
  cb.leave(s2);
  CHECK(cb.free_pages() == 14);
  // Both enter a new page at position 104; a bad token fails the step before any is taken.
  CHECK_THROWS_WITH_AS(cb.step(std::vector<batch::feed>{{s0, 1}, {s1, 600}}),
                       "gpt2 paged: sequence 1: token 600 is outside the vocabulary [0, 512)",
                       fm::model_error);
  CHECK(cb.free_pages() == 14);
  cb.step(std::vector<batch::feed>{{s0, 1}, {s1, 1}});
  CHECK(cb.length(s0) == 105);
  CHECK(cb.free_pages() == 12);
  CHECK_THROWS_WITH_AS(cb.step(std::vector<batch::feed>{{s2, 1}}),
                       "gpt2 paged: no sequence 2 (it left, or never joined)", fm::model_error);
  CHECK_THROWS_WITH_AS(cb.step(std::vector<batch::feed>{{s0, 1}, {s0, 2}}),
                       "gpt2 paged: sequence 0 is fed twice in one step", fm::model_error);
  CHECK_THROWS_WITH_AS(cb.join(std::vector<std::int32_t>(129, 7)),
                       "gpt2 paged: the prompt has 129 tokens; a sequence holds 128",
                       fm::model_error);
  for (int i = 0; i < 23; ++i) cb.step(std::vector<batch::feed>{{s0, 1}});
  CHECK(cb.length(s0) == 128);
  CHECK_THROWS_WITH_AS(cb.step(std::vector<batch::feed>{{s0, 1}}),
                       "gpt2 paged: sequence 0 is full: it holds 128 positions", fm::model_error);
}
