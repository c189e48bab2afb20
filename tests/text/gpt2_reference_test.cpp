// bpe_tokenizer against Hugging Face's GPT-2 tokenizer (and tiktoken, which agrees with it on
// every case): the cases make_gpt2_cases.py wrote, under the vocabulary they were made with.
//   FUSEDSL_GPT2_CASES      the cases file (data/gpt2_cases.json or data/gpt2_512_cases.json)
//   FUSEDSL_GPT2_VOCAB_DIR  the folder with that vocabulary's vocab.json and merges.txt
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fusedsl/text/bpe.hpp"
#include "utf8_writes.hpp"

using namespace fusedsl::text;
using fusedsl::text::testing::splits_a_character;
using ids = std::vector<bpe_tokenizer::id_type>;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') FAIL(name << " is not set (CTest sets it: see tests/text)");
  return v;
}

struct reference {
  nlohmann::json doc;
  bpe_tokenizer tokenizer;
};

bpe_options options_for(const nlohmann::json& doc) {
  bpe_options o;
  if (doc["end_of_text"].is_null()) o.special_tokens.clear();
  return o;
}

const reference& load() {
  static const reference r = [] {
    std::ifstream in(env("FUSEDSL_GPT2_CASES"), std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot open " << env("FUSEDSL_GPT2_CASES"));
    nlohmann::json doc =
        nlohmann::json::parse(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    bpe_tokenizer t =
        bpe_tokenizer::from_directory(env("FUSEDSL_GPT2_VOCAB_DIR"), options_for(doc));
    return reference{std::move(doc), std::move(t)};
  }();
  return r;
}

// What a stream decoder over `stream` writes, one string per push() and one for finish().
std::vector<std::string> writes_of(const bpe_tokenizer& t, const ids& stream,
                                   bpe_stream_decoder::invalid_bytes mode) {
  bpe_stream_decoder d(t, mode);
  std::vector<std::string> writes;
  for (const auto id : stream) writes.push_back(d.push(id));
  writes.push_back(d.finish());
  return writes;
}

std::string concatenated(const std::vector<std::string>& writes) {
  std::string all;
  for (const std::string& w : writes) all += w;
  return all;
}

}  // namespace

TEST_CASE("the vocabulary is the one the cases were made with") {
  const reference& r = load();
  CHECK(r.tokenizer.vocab_size() == r.doc["vocab_size"].get<std::size_t>());
  if (r.doc["end_of_text"].is_null())
    CHECK_FALSE(r.tokenizer.end_of_text().has_value());
  else
    CHECK(r.tokenizer.end_of_text() == r.doc["end_of_text"].get<int>());
  CHECK(r.doc["cases"].size() >= 500);
}

TEST_CASE("every case encodes to the reference ids and decodes back to its text") {
  const reference& r = load();
  std::size_t checked = 0;
  for (const auto& c : r.doc["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const ids want = c["ids"].get<ids>();
    const ids got = r.tokenizer.encode(text);
    CHECK_MESSAGE(got == want, "text: " << nlohmann::json(text).dump());
    CHECK_MESSAGE(r.tokenizer.decode(got) == text, "text: " << nlohmann::json(text).dump());
    const ids ordinary = c.contains("ordinary_ids") ? c["ordinary_ids"].get<ids>() : want;
    CHECK_MESSAGE(r.tokenizer.encode_ordinary(text) == ordinary,
                  "text: " << nlohmann::json(text).dump());
    ++checked;
  }
  CHECK(checked == r.doc["cases"].size());
}

TEST_CASE("encoding again, from the piece cache, gives the same ids") {
  const reference& r = load();
  for (const auto& c : r.doc["cases"])
    CHECK(r.tokenizer.encode(c["text"].get<std::string>()) == c["ids"].get<ids>());
  CHECK(r.tokenizer.cache_size() > 0);
}

TEST_CASE("decode with U+FFFD for ill-formed bytes equals the reference decode of any ids") {
  const reference& r = load();
  REQUIRE(r.doc["decode_cases"].size() > 0);
  for (const auto& c : r.doc["decode_cases"]) {
    const ids stream = c["ids"].get<ids>();
    CHECK_MESSAGE(utf8::replace_invalid(r.tokenizer.decode(stream)) == c["text"].get<std::string>(),
                  "ids: " << c["ids"].dump());
  }
}

TEST_CASE("streamed decoding writes whole characters that concatenate to the full decode") {
  const reference& r = load();
  std::size_t split_characters = 0;  // streams where a token ends inside a character
  const auto check_stream = [&](const ids& stream) {
    const std::string full = r.tokenizer.decode(stream);
    const auto kept = writes_of(r.tokenizer, stream, bpe_stream_decoder::invalid_bytes::keep);
    CHECK(concatenated(kept) == full);
    CHECK_MESSAGE(!splits_a_character(kept), "ids: " << nlohmann::json(stream).dump());
    const auto replaced =
        writes_of(r.tokenizer, stream, bpe_stream_decoder::invalid_bytes::replace);
    CHECK(concatenated(replaced) == utf8::replace_invalid(full));
    for (const std::string& w : replaced)
      CHECK_MESSAGE(utf8::is_valid(w), "ids: " << nlohmann::json(stream).dump());
    // Writing each token's bytes as they come would split a character here.
    std::vector<std::string> naive;
    for (const auto id : stream) naive.push_back(r.tokenizer.token_bytes(id));
    if (splits_a_character(naive)) ++split_characters;
  };
  for (const auto& c : r.doc["cases"]) check_stream(c["ids"].get<ids>());
  for (const auto& c : r.doc["decode_cases"]) check_stream(c["ids"].get<ids>());
  CHECK(split_characters >= 20);
}
