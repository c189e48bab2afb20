// GPT-2 (models/gpt2.hpp) on the CPU executor against Hugging Face transformers' outputs for the
// small reference model (tests/models/data/gpt2_small_test): the prompt's logits from a padded
// prefill bucket, 64 decode steps with the KV cache under teacher forcing, greedy decoding, four
// prompts of other lengths, the legacy checkpoint layout, and the errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusedsl/runtime/gpt2_generator.hpp"
#include "reference.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;

namespace {

using namespace gpt2_reference;

using generator = fm::gpt2_generator<small_cfg, 16, 32, 128>;

struct model {
  fd::io::safetensors_file file;
  std::unique_ptr<generator> gen;
  explicit model(const std::string& name)
      : file(fd::io::safetensors_file::open(dir + "/" + name)),
        gen(std::make_unique<generator>(file)) {}
};

}  // namespace

TEST_CASE("the decode step and every prefill bucket run as generated kernels, none refused") {
  using D = fm::gpt2_decode_layer_program<small_cfg>;
  const auto& lp = fd::cpu::executor<D>::kernels_plan();
  CHECK(lp.n_refused == 0);
  int attention = 0;
  for (int gi = 0; gi < D::fusion.n_groups; ++gi)
    if (lp.desc[std::size_t(gi)].kind == fd::plan::kernel_kind::attention) {
      ++attention;
      CHECK(lp.desc[std::size_t(gi)].att.kv_len >= 0);  // stops at pos + 1, not the capacity
    }
  CHECK(attention == 1);
  CHECK(fd::cpu::executor<fm::gpt2_decode_embed_program<small_cfg>>::kernels_plan().n_refused == 0);
  CHECK(fd::cpu::executor<fm::gpt2_head_program<small_cfg, 1>>::kernels_plan().n_refused == 0);
  CHECK(
      fd::cpu::executor<fm::gpt2_prefill_layer_program<small_cfg, 32>>::kernels_plan().n_refused ==
      0);
  CHECK(
      fd::cpu::executor<fm::gpt2_prefill_embed_program<small_cfg, 128>>::kernels_plan().n_refused ==
      0);
  CHECK(fd::cpu::executor<fm::gpt2_head_program<small_cfg, 128>>::kernels_plan().n_refused == 0);
}

TEST_CASE("the prefill buckets and the decode step hold one copy of the GEMM panels") {
  model m("model.safetensors");
  // c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj per layer, and wte as the tied LM head: each
  // packed once for the three buckets and the decode step (f32 weights, f32 panels).
  CHECK(m.gen->packed_weights().entries() == std::size_t(4 * small_cfg::layers + 1));
  const std::int64_t D = small_cfg::d, F = 4 * small_cfg::d;
  const std::int64_t weights = small_cfg::layers * (D * 3 * D + D * D + D * F + F * D) + D * V;
  CHECK(m.gen->packed_weights().bytes() >= std::size_t(weights) * sizeof(float));
  CHECK(m.gen->packed_weights().bytes() < std::size_t(weights) * sizeof(float) * 5 / 4);
}

TEST_CASE("prefill and 64 KV-cache steps match transformers under teacher forcing") {
  model m("model.safetensors");
  const auto prompt = read_ids("prompt_ids.npy");
  const auto ids = read_ids("generated_ids.npy");
  const auto step_logits = read_floats("step_logits.npy", 64);
  const auto prefill_logits = read_floats("prefill_logits.npy", 20);
  REQUIRE(prompt.size() == 20);
  CHECK(generator::bucket_for(20) == 32);  // padded by 12 tokens
  auto logits = m.gen->prefill(prompt);
  CHECK(max_diff(logits, prefill_logits.data() + 19 * V) <= 1e-3);
  double worst = 0;
  for (int k = 0; k < 64; ++k) {
    if (k > 0) logits = m.gen->step(ids[std::size_t(k - 1)]);
    const double d = max_diff(logits, step_logits.data() + k * V);
    CHECK_MESSAGE(d <= 1e-3, "step " << k);
    worst = std::max(worst, d);
    CHECK_MESSAGE(m.gen->greedy() == ids[std::size_t(k)], "step " << k);
  }
  MESSAGE("largest difference over 64 steps: " << worst);
  CHECK(m.gen->length() == 20 + 63);
  CHECK(m.gen->interpreted_groups() == 0);
}

TEST_CASE("greedy decoding feeding back its own tokens gives transformers' 64 tokens") {
  model m("model.safetensors");
  const auto ids = read_ids("generated_ids.npy");
  m.gen->prefill(read_ids("prompt_ids.npy"));
  std::vector<std::int32_t> got{m.gen->greedy()};
  while (got.size() < ids.size()) {
    m.gen->step(got.back());
    got.push_back(m.gen->greedy());
  }
  CHECK(got == ids);
}

TEST_CASE("truncate rewinds the sequence: the steps after it match transformers again") {
  model m("model.safetensors");
  const auto ids = read_ids("generated_ids.npy");
  const auto step_logits = read_floats("step_logits.npy", 64);
  m.gen->prefill(read_ids("prompt_ids.npy"));
  for (int k = 1; k < 10; ++k) m.gen->step(ids[std::size_t(k - 1)]);
  m.gen->truncate(20);
  CHECK(m.gen->length() == 20);
  for (int k = 1; k < 4; ++k)
    CHECK(max_diff(m.gen->step(ids[std::size_t(k - 1)]), step_logits.data() + k * V) <= 1e-3);
  CHECK_THROWS_WITH_AS(m.gen->truncate(24),
                       "gpt2: truncate to 24 tokens: the cache holds 23 (keep 1 to that many)",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(m.gen->truncate(0),
                       "gpt2: truncate to 0 tokens: the cache holds 23 (keep 1 to that many)",
                       fm::model_error);
}

TEST_CASE("prompts of 5, 12, 23 and 37 tokens, in three buckets, decode as transformers does") {
  const auto b = read_batch();
  model m("model.safetensors");
  for (std::size_t s = 0; s < b["prompts"].size(); ++s) {
    const auto prompt = b["prompts"][s].get<std::vector<std::int32_t>>();
    const auto want = b["generated"][s].get<std::vector<std::int32_t>>();
    m.gen->prefill(prompt);  // a new sequence: the previous one's cache is cleared
    std::vector<std::int32_t> got{m.gen->greedy()};
    while (got.size() < want.size()) {
      m.gen->step(got.back());
      got.push_back(m.gen->greedy());
    }
    CHECK_MESSAGE(got == want, "prompt " << s << " (" << prompt.size() << " tokens, bucket "
                                         << generator::bucket_for(std::int64_t(prompt.size()))
                                         << ")");
  }
}

TEST_CASE("the legacy layout (no prefix, attn.bias buffers) binds to the same logits") {
  model a("model.safetensors"), b("model_legacy.safetensors");
  const auto prompt = read_ids("prompt_ids.npy");
  const auto la = a.gen->prefill(prompt);
  const auto lb = b.gen->prefill(prompt);
  CHECK(max_diff(la, lb.data()) == 0.0);
  const auto sa = a.gen->step(7);
  const auto sb = b.gen->step(7);
  CHECK(max_diff(sa, sb.data()) == 0.0);
}

TEST_CASE("bad prompts and tokens, and a full context, are clear errors") {
  model m("model.safetensors");
  CHECK_THROWS_WITH_AS(m.gen->step(1), "gpt2: step before prefill (start a sequence first)",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(m.gen->prefill(std::vector<std::int32_t>{}),
                       "gpt2: the prompt is empty (give at least one token)", fm::model_error);
  CHECK_THROWS_WITH_AS(m.gen->prefill(std::vector<std::int32_t>(129, 5)),
                       "gpt2: the prompt has 129 tokens; the largest prefill bucket holds 128 "
                       "(n_positions 128)",
                       fm::model_error);
  CHECK_THROWS_WITH_AS(m.gen->prefill(std::vector<std::int32_t>{3, 512}),
                       "gpt2: prompt token 1 is 512, outside the vocabulary [0, 512)",
                       fm::model_error);
  m.gen->prefill(std::vector<std::int32_t>(120, 5));
  CHECK_THROWS_WITH_AS(m.gen->step(-1), "gpt2: token is -1, outside the vocabulary [0, 512)",
                       fm::model_error);
  for (int i = 0; i < 8; ++i) m.gen->step(5);  // positions 120..127
  CHECK(m.gen->length() == 128);
  CHECK_THROWS_WITH_AS(m.gen->step(5),
                       "gpt2: the context is full: the cache holds n_positions = 128 tokens",
                       fm::model_error);
}
