#pragma once
// BERT's text normalisation and word splitting, step for step as Hugging Face tokenizers'
// BertNormalizer and BertPreTokenizer do them (character classes: text/bert_unicode.hpp).
//
// normalize, in this order:
//   clean_text            drop U+0000, U+FFFD and control characters (Cc, Cf, Co; not \t \n \r),
//                         turn every whitespace character into ' '
//   handle_chinese_chars  put a space before and after each CJK ideograph
//   strip_accents         NFD, then drop nonspacing marks (Mn); unset, it follows lowercase
//   lowercase             each character's full lowercase mapping
// pre_tokenize: split on whitespace (dropped) and around each punctuation character, which stays
// as a word of its own.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/text/bert_unicode.hpp"
#include "fusedsl/text/utf8.hpp"

namespace fusedsl::text {

struct bert_normalizer_options {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  std::optional<bool> strip_accents;  // unset: the same as lowercase, as in BertNormalizer
  bool lowercase = true;

  bool strips_accents() const { return strip_accents.value_or(lowercase); }
  friend bool operator==(const bert_normalizer_options&, const bert_normalizer_options&) = default;
};

inline std::u32string bert_normalize(std::u32string_view text, const bert_normalizer_options& o) {
  std::u32string s;
  s.reserve(text.size());
  for (char32_t c : text) {
    if (o.clean_text) {
      if (c == 0 || c == replacement_character || bert::is_control(c)) continue;
      if (bert::is_whitespace(c)) c = U' ';
    }
    if (o.handle_chinese_chars && bert::is_cjk_ideograph(c)) {
      s += U' ';
      s += c;
      s += U' ';
    } else {
      s += c;
    }
  }
  if (o.strips_accents()) {
    std::u32string d = bert::nfd(s);
    s.clear();
    for (char32_t c : d)
      if (!bert::is_nonspacing_mark(c)) s += c;
  }
  if (o.lowercase) {
    std::u32string l;
    l.reserve(s.size());
    for (char32_t c : s) bert::append_lowercase(l, c);
    s = std::move(l);
  }
  return s;
}

// The words of normalized text, as views into it.
inline std::vector<std::u32string_view> bert_pre_tokenize(std::u32string_view s) {
  std::vector<std::u32string_view> words;
  std::size_t start = 0;
  const auto flush = [&](std::size_t end) {
    if (end > start) words.push_back(s.substr(start, end - start));
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (bert::is_whitespace(s[i])) {
      flush(i);
      start = i + 1;
    } else if (bert::is_punctuation(s[i])) {
      flush(i);
      words.push_back(s.substr(i, 1));
      start = i + 1;
    }
  }
  flush(s.size());
  return words;
}

}  // namespace fusedsl::text
