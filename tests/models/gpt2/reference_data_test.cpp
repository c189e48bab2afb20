// The small GPT-2 model's reference outputs agree with themselves: greedy ids are the argmax of
// the logits they were chosen from, by a decisive margin; the KV-cache steps match one forward pass
// without a cache; shapes and the config are the documented ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../../common/test_paths.hpp"
#include "fusedsl/io/npy.hpp"

using fusedsl::io::npy_array;
using fusedsl::io::read_npy;

namespace {

const std::string dir = fusedsl::test::test_path(FUSEDSL_GPT2_SMALL_TEST_DATA);

nlohmann::json read_json(const std::string& name) {
  std::ifstream in(dir + "/" + name, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot open " << dir << "/" << name);
  return nlohmann::json::parse(std::istreambuf_iterator<char>(in),
                               std::istreambuf_iterator<char>());
}

struct matrix {
  std::int64_t rows, cols;
  std::vector<float> v;
  const float* row(std::int64_t r) const { return v.data() + r * cols; }
};

matrix read_matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
  const npy_array a = read_npy(dir + "/" + name);
  REQUIRE(a.shape == std::vector<std::int64_t>{rows, cols});
  matrix m{rows, cols, a.values<float>()};
  for (const float x : m.v) REQUIRE(std::isfinite(x));
  return m;
}

std::vector<std::int64_t> read_ids(const std::string& name, std::int64_t n) {
  const npy_array a = read_npy(dir + "/" + name);
  REQUIRE(a.shape == std::vector<std::int64_t>{n});
  return a.values<std::int64_t>();
}

// The largest |a - b| over a row; NaN if either holds one (then every comparison fails).
double max_diff(const float* a, const float* b, std::int64_t n) {
  double m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= m)) m = d;
  }
  return m;
}

}  // namespace

TEST_CASE("config.json is GPT-2's architecture at the small test size") {
  const nlohmann::json c = read_json("config.json");
  CHECK(c["model_type"] == "gpt2");
  CHECK(c["n_layer"] == 2);
  CHECK(c["n_embd"] == 64);
  CHECK(c["n_head"] == 4);
  CHECK(c["n_positions"] == 128);
  CHECK(c["vocab_size"] == 512);
  CHECK(c["n_inner"].is_null());  // 4 * n_embd
  CHECK(c["activation_function"] == "gelu_new");
  CHECK(c["layer_norm_epsilon"].get<double>() == 1e-5);
  CHECK(c["tie_word_embeddings"] == true);
  CHECK(c["scale_attn_weights"] == true);
  CHECK(c["scale_attn_by_inverse_layer_idx"] == false);
  CHECK(c["reorder_and_upcast_attn"] == false);
}

TEST_CASE("reference.json lists save_pretrained's tensors: Conv1D [in, out], no lm_head") {
  const nlohmann::json r = read_json("reference.json");
  const auto& t = r["files"]["model.safetensors"]["tensors"];
  CHECK(t.size() == 2 + 2 + 12 * 2);
  CHECK_FALSE(t.contains("lm_head.weight"));
  CHECK(t["transformer.wte.weight"]["shape"] == nlohmann::json({512, 64}));
  CHECK(t["transformer.wpe.weight"]["shape"] == nlohmann::json({128, 64}));
  CHECK(t["transformer.h.1.attn.c_attn.weight"]["shape"] == nlohmann::json({64, 192}));
  CHECK(t["transformer.h.1.mlp.c_fc.weight"]["shape"] == nlohmann::json({64, 256}));
  CHECK(t["transformer.h.1.mlp.c_proj.weight"]["shape"] == nlohmann::json({256, 64}));
  for (const auto& [name, info] : t.items()) CHECK_MESSAGE(info["dtype"] == "F32", name);
  const auto& legacy = r["files"]["model_legacy.safetensors"]["tensors"];
  CHECK(legacy.size() == t.size() + 2 * 2);
  CHECK(legacy["h.0.attn.bias"]["shape"] == nlohmann::json({1, 1, 128, 128}));
  CHECK(legacy["h.0.attn.bias"]["dtype"] == "U8");
  CHECK(legacy["h.1.attn.masked_bias"]["shape"] == nlohmann::json::array());
  CHECK(legacy.contains("wte.weight"));
}

TEST_CASE("each greedy id is the argmax of its step's logits by at least 5e-3") {
  const auto generated = read_ids("generated_ids.npy", 64);
  const matrix steps = read_matrix("step_logits.npy", 64, 512);
  for (std::int64_t k = 0; k < 64; ++k) {
    const float* row = steps.row(k);
    const auto best = std::max_element(row, row + 512) - row;
    CHECK_MESSAGE(best == generated[static_cast<std::size_t>(k)], "step " << k);
    std::vector<float> sorted(row, row + 512);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    CHECK_MESSAGE(sorted[0] - sorted[1] >= 5e-3f, "step " << k);
  }
  std::vector<std::int64_t> distinct(generated);
  std::sort(distinct.begin(), distinct.end());
  CHECK(std::unique(distinct.begin(), distinct.end()) - distinct.begin() >= 16);
}

TEST_CASE("KV-cache steps equal one forward pass of prompt + generated ids without a cache") {
  const auto prompt = read_ids("prompt_ids.npy", 20);
  const matrix prefill = read_matrix("prefill_logits.npy", 20, 512);
  const matrix steps = read_matrix("step_logits.npy", 64, 512);
  const matrix full = read_matrix("full_logits.npy", 84, 512);
  for (const auto id : prompt) CHECK((id >= 0 && id < 512));
  CHECK(max_diff(steps.row(0), prefill.row(19), 512) == 0.0);
  for (std::int64_t r = 0; r < 20; ++r)
    CHECK_MESSAGE(max_diff(prefill.row(r), full.row(r), 512) <= 1e-5, "row " << r);
  for (std::int64_t k = 0; k < 64; ++k)
    CHECK_MESSAGE(max_diff(steps.row(k), full.row(19 + k), 512) <= 1e-5, "step " << k);
}

TEST_CASE("batch.json: four prompts of different lengths, each with 32 greedy ids") {
  const nlohmann::json b = read_json("batch.json");
  REQUIRE(b["prompts"].size() == 4);
  REQUIRE(b["generated"].size() == 4);
  CHECK(b["steps"] == 32);
  std::vector<std::size_t> lengths;
  for (std::size_t i = 0; i < 4; ++i) {
    lengths.push_back(b["prompts"][i].size());
    CHECK(b["generated"][i].size() == 32);
    CHECK(lengths.back() + 32 <= 128);
    CHECK(b["min_top2_gap"][i].get<double>() >= 5e-3);
    for (const auto& id : b["prompts"][i]) CHECK((id >= 0 && id < 512));
    for (const auto& id : b["generated"][i]) CHECK((id >= 0 && id < 512));
  }
  std::sort(lengths.begin(), lengths.end());
  CHECK(std::adjacent_find(lengths.begin(), lengths.end()) == lengths.end());
}
