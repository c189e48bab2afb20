// all-MiniLM-L6-v2's tokenizer against the Python one: the same ids on every one of the 560
// reference sentences (English, punctuation, numbers, European diacritics, CJK, other scripts,
// emoji, URLs, code, control characters, whitespace, literal special tokens, invalid UTF-8, long
// words, texts past 256 tokens, mixed scripts and random strings).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "../common/test_paths.hpp"
#include "fusedsl/text/wordpiece_files.hpp"
#include "reference_file.hpp"

using namespace fusedsl::text;

namespace {

const std::string data = fusedsl::test::test_path(FUSEDSL_TEXT_TEST_DATA);

std::string pieces(const wordpiece_tokenizer& t, const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::int32_t id : ids) s += t.vocab().token(id) + " ";
  return s;
}

}  // namespace

TEST_CASE("every reference sentence gets the Python tokenizer's ids, truncated at 256") {
  nlohmann::json header;
  const auto sentences =
      fusedsl::test::read_reference(data + "/minilm_wordpiece_reference.jsonl", &header);
  REQUIRE(sentences.size() == header.at("count").get<std::size_t>());
  REQUIRE(sentences.size() >= 500);
  const wordpiece_tokenizer t = load_wordpiece_tokenizer(data + "/all-MiniLM-L6-v2");
  REQUIRE(t.config().max_length == 256);
  std::map<std::string, int> mismatches;
  std::size_t truncated = 0;
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    const auto& s = sentences[i];
    const encoding e = t.encode(s.bytes, [](const std::string&) {});
    CAPTURE(i);
    CAPTURE(s.group);
    CAPTURE(s.bytes);
    if (e.ids != s.ids) {
      ++mismatches[s.group];
      CHECK_MESSAGE(e.ids == s.ids,
                    "fusedsl: " << pieces(t, e.ids) << "\npython:  " << pieces(t, s.ids));
    }
    CHECK(e.truncated == (s.untruncated > 256));
    truncated += e.truncated;
    if (s.untruncated <= 256) CHECK(t.token_ids(s.bytes).size() + 2 == s.untruncated);
  }
  CHECK(mismatches.empty());
  CHECK(truncated >= 10);
}
