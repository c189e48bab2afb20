// The small GPT-2 test model's prompts (tests/models/data/gpt2_small_test) are the tokenizer's ids
// of their texts under the 512-id vocabulary that model uses (tests/text/data/gpt2_512).
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../common/test_paths.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/text/bpe.hpp"

using namespace fusedsl::text;
using ids = std::vector<bpe_tokenizer::id_type>;

namespace {

const std::string model_dir = fusedsl::test::test_path(FUSEDSL_GPT2_SMALL_TEST_DATA);

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot open " << path);
  return nlohmann::json::parse(std::istreambuf_iterator<char>(in),
                               std::istreambuf_iterator<char>());
}

const bpe_tokenizer& tokenizer() {
  static const bpe_tokenizer t = bpe_tokenizer::from_directory(
      fusedsl::test::test_path(FUSEDSL_GPT2_512_DIR), bpe_options{.special_tokens = {}});
  return t;
}

ids first(const ids& v, std::size_t n) {
  REQUIRE(v.size() >= n);
  return ids(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace

TEST_CASE("the 20-token prompt is the start of its text's ids") {
  const nlohmann::json r = read_json(model_dir + "/reference.json");
  const auto prompt = fusedsl::io::read_npy(model_dir + "/prompt_ids.npy").values<std::int64_t>();
  REQUIRE(prompt.size() == 20);
  const ids want(prompt.begin(), prompt.end());
  CHECK(first(tokenizer().encode(r["prompt_text"].get<std::string>()), 20) == want);
  CHECK(r["prompt_ids"].get<ids>() == want);
}

TEST_CASE("the batch prompts are the starts of their texts' ids") {
  const nlohmann::json b = read_json(model_dir + "/batch.json");
  REQUIRE(b["texts"].size() == b["prompts"].size());
  for (std::size_t i = 0; i < b["texts"].size(); ++i) {
    const ids want = b["prompts"][i].get<ids>();
    CHECK(first(tokenizer().encode(b["texts"][i].get<std::string>()), want.size()) == want);
  }
}

TEST_CASE("the generated ids decode, streamed, to whole characters") {
  const auto generated =
      fusedsl::io::read_npy(model_dir + "/generated_ids.npy").values<std::int64_t>();
  bpe_stream_decoder d(tokenizer());
  std::string text;
  for (const auto id : generated) {
    const std::string w = d.push(static_cast<bpe_tokenizer::id_type>(id));
    CHECK(utf8::is_valid(w));
    text += w;
  }
  text += d.finish();
  const ids as_ids(generated.begin(), generated.end());
  CHECK(text == utf8::replace_invalid(tokenizer().decode(as_ids)));
  CHECK_FALSE(text.empty());
}
