// The all-MiniLM-L6-v2 reference outputs in tests/models/data (make_minilm_reference.py) hold
// together: fusedsl's tokenizer gives their sentences the ids the model was fed, the embeddings
// are [N, 384] unit vectors, and each hidden-state file, mean-pooled over its tokens and
// L2-normalised (the model's Pooling and Normalize modules), is its sentence's embedding.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/test_paths.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/text/wordpiece_files.hpp"
#include "reference_file.hpp"

using namespace fusedsl;

namespace {

const std::string models = fusedsl::test::test_path(FUSEDSL_MODELS_TEST_DATA);
const std::string text_data = fusedsl::test::test_path(FUSEDSL_TEXT_TEST_DATA);

nlohmann::json meta() {
  std::ifstream f(models + "/minilm_reference.json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

}  // namespace

TEST_CASE("the reference sentences get the ids the model was fed") {
  const auto sentences = test::read_reference(models + "/minilm_sentences.jsonl");
  const nlohmann::json m = meta();
  REQUIRE(sentences.size() == m.at("sentences").at("count").get<std::size_t>());
  CHECK(sentences.size() >= 200);
  const text::wordpiece_tokenizer t =
      text::load_wordpiece_tokenizer(text_data + "/all-MiniLM-L6-v2");
  std::size_t truncated = 0, shortest = 1000, longest = 0;
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    CAPTURE(i);
    const text::encoding e = t.encode(sentences[i].bytes, [](const std::string&) {});
    CHECK(e.ids == sentences[i].ids);
    truncated += e.truncated;
    shortest = std::min(shortest, e.ids.size());
    longest = std::max(longest, sentences[i].untruncated);
  }
  CHECK(truncated == m.at("sentences").at("truncated").get<std::size_t>());
  CHECK(shortest == 2);  // empty text: [CLS] [SEP]
  CHECK(longest > 256);  // truncation is covered
}

TEST_CASE("the reference embeddings are finite unit vectors, one per sentence") {
  const io::npy_array a = io::read_npy(models + "/minilm_embeddings.npy");
  const nlohmann::json m = meta();
  REQUIRE(a.dtype == io::npy_dtype::f4);
  REQUIRE(a.shape ==
          std::vector<std::int64_t>{m.at("sentences").at("count").get<std::int64_t>(), 384});
  const std::vector<float> v = a.values<float>();
  for (std::int64_t r = 0; r < a.shape[0]; ++r) {
    double n = 0;
    for (std::int64_t c = 0; c < 384; ++c) n += double(v[r * 384 + c]) * v[r * 384 + c];
    CAPTURE(r);
    CHECK(std::isfinite(n));
    CHECK(std::abs(std::sqrt(n) - 1.0) < 1e-5);
  }
}

TEST_CASE("mean-pooling and normalising the last hidden state gives the sentence's embedding") {
  const nlohmann::json m = meta();
  const auto sentences = test::read_reference(models + "/minilm_sentences.jsonl");
  const std::vector<float> emb = io::read_npy(models + "/minilm_embeddings.npy").values<float>();
  REQUIRE(m.at("hidden_states").size() == 3);
  for (const nlohmann::json& h : m.at("hidden_states")) {
    const auto i = h.at("sentence").get<std::size_t>();
    const auto tokens = h.at("tokens").get<std::int64_t>();
    CAPTURE(i);
    CHECK(static_cast<std::int64_t>(sentences.at(i).ids.size()) == tokens);
    const io::npy_array a = io::read_npy(models + "/" + h.at("file").get<std::string>());
    REQUIRE(a.shape == std::vector<std::int64_t>{7, tokens, 384});
    const std::vector<float> hs = a.values<float>();
    for (std::size_t layer = 0; layer < 7; ++layer) {
      double sum = 0;
      for (std::int64_t k = 0; k < tokens * 384; ++k) sum += hs[layer * tokens * 384 + k];
      CHECK(sum == doctest::Approx(h.at("layer_sums")[layer].get<double>()).epsilon(1e-9));
    }
    std::vector<double> pooled(384, 0.0);
    const float* last = hs.data() + 6 * tokens * 384;
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int c = 0; c < 384; ++c) pooled[c] += last[t * 384 + c] / double(tokens);
    double n = 0;
    for (double p : pooled) n += p * p;
    double worst = 0;
    for (int c = 0; c < 384; ++c)
      worst = std::max(worst, std::abs(pooled[c] / std::sqrt(n) - emb[i * 384 + c]));
    CHECK(worst < 1e-5);
  }
}
