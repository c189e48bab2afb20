// The runtimes' and the model-directory reader's headers at their old paths under models/
// (bert_bucket, sentence_embedder, gpt2_generator, gpt2_paged, sentence_model), kept for one
// release with a deprecation message: a program that includes them still builds and runs them.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "fusedsl/models/bert_bucket.hpp"
#include "fusedsl/models/gpt2_generator.hpp"
#include "fusedsl/models/gpt2_paged.hpp"
#include "fusedsl/models/sentence_embedder.hpp"
#include "fusedsl/models/sentence_model.hpp"

namespace fm = fusedsl::models;

TEST_CASE("the old paths still name the runtimes and the reader") {
  const std::vector<std::int64_t> lengths = {5, 9};
  const auto calls = fm::plan_encoder_calls(lengths, 8, 0.0, [](std::int64_t, std::int64_t n) {
    return n <= 16 ? std::int64_t(16) : std::int64_t(0);
  });
  REQUIRE(!calls.empty());
  CHECK(calls.back().first + calls.back().count == lengths.size());
  CHECK_THROWS_AS(fm::read_sentence_model_config(std::filesystem::path("no/such/model/directory")),
                  fm::model_error);
}
