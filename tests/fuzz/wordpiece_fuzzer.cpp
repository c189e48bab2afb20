// libFuzzer target for the WordPiece tokenizer (all-MiniLM-L6-v2's files, from the directory in
// FUSEDSL_WORDPIECE_DIR). Any bytes must tokenize without crashing or throwing; every id must be
// in the vocabulary; [CLS] first, [SEP] last, at most max_length ids, truncated exactly when the
// untruncated pieces do not fit; the same ids on a second call and inside a batch. The first
// byte picks the full tokenizer (256 tokens, words up to 100 code points) or a small one (8
// tokens, words up to 5), so that truncation and over-long words are reached often.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/text/wordpiece_files.hpp"

namespace {

using namespace fusedsl::text;

const wordpiece_tokenizer& tokenizer(bool small) {
  static const wordpiece_tokenizer full = [] {
    const char* dir = std::getenv("FUSEDSL_WORDPIECE_DIR");
    if (!dir) {
      std::fprintf(stderr, "wordpiece_fuzzer: set FUSEDSL_WORDPIECE_DIR to a model directory\n");
      std::abort();
    }
    return load_wordpiece_tokenizer(dir);
  }();
  static const wordpiece_tokenizer tiny = [] {
    wordpiece_config c = full.config();
    c.max_length = 8;
    c.max_input_chars_per_word = 5;
    return wordpiece_tokenizer(full.vocab(), c);
  }();
  return small ? tiny : full;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "wordpiece_fuzzer: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const wordpiece_tokenizer& t = tokenizer(data[0] & 1);
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const warning_sink quiet = [](const std::string&) {};

  const encoding e = t.encode(text, quiet);
  const std::size_t max = t.config().max_length;
  check(e.ids.size() >= 2 && e.ids.size() <= max, "length out of range");
  check(e.ids.front() == t.cls_id() && e.ids.back() == t.sep_id(), "not [CLS] ... [SEP]");
  for (std::int32_t id : e.ids)
    check(id >= 0 && static_cast<std::size_t>(id) < t.vocab().size(), "id out of range");

  const std::vector<std::int32_t> all = t.token_ids(text);
  check(e.truncated == (all.size() > max - 2), "truncated flag disagrees with the piece count");
  check(std::equal(e.ids.begin() + 1, e.ids.end() - 1, all.begin()), "not a prefix of the pieces");
  check(t.encode(text, quiet).ids == e.ids, "a second call differs");

  const std::vector<std::string_view> texts = {text, text.substr(0, text.size() / 2)};
  const token_batch b = t.encode_batch(texts, quiet);
  check(b.rows == 2 && b.ids.size() == 2 * b.columns, "batch shape");
  check(static_cast<std::size_t>(b.lengths[0]) == e.ids.size(), "batch length differs");
  check(std::equal(e.ids.begin(), e.ids.end(), b.ids.begin()), "batch row differs");
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < b.columns; ++c) {
      const bool token = c < static_cast<std::size_t>(b.lengths[r]);
      check(b.attention_mask[r * b.columns + c] == (token ? 1 : 0), "mask disagrees with lengths");
      check(token || b.ids[r * b.columns + c] == t.pad_id(), "padding is not [PAD]");
    }
  return 0;
}
