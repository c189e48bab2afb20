#pragma once
// The questions BERT's tokenizer asks about a character, answered as Hugging Face tokenizers (the
// implementation sentence-transformers runs) answers them: Unicode data from utf8proc, except on
// the code points where tokenizers' older Unicode tables say otherwise
// (text/bert_unicode_table.hpp, generated from tokenizers itself by
// scripts/make_bert_unicode_table.py).
#include <utf8proc.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "fusedsl/text/bert_unicode_table.hpp"
#include "fusedsl/text/code_point_table.hpp"
#include "fusedsl/text/unicode.hpp"

namespace fusedsl::text::bert {

// Cc, Cf or Co, but not \t \n \r (BERT counts those as whitespace): clean_text drops them.
inline bool is_control(char32_t c) {
  if (c == U'\t' || c == U'\n' || c == U'\r') return false;
  const utf8proc_category_t k = general_category(c);
  const bool u =
      k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO;
  return u != in_table(bert_table::control_flips, c);
}

// White_Space (text/unicode.hpp; Rust's char::is_whitespace).
inline bool is_whitespace(char32_t c) {
  return is_white_space(c) != in_table(bert_table::white_space_flips, c);
}

// Mn: what strip_accents removes after NFD.
inline bool is_nonspacing_mark(char32_t c) {
  return (general_category(c) == UTF8PROC_CATEGORY_MN) !=
         in_table(bert_table::nonspacing_mark_flips, c);
}

// Pc, Pd, Ps, Pe, Pi, Pf, Po, and the ASCII symbols BERT splits like punctuation ($ + < = > ^ `
// | ~ are S* in Unicode): each one becomes a word of its own.
inline bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  const utf8proc_category_t k = general_category(c);
  const bool u = k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
  return u != in_table(bert_table::punctuation_flips, c);
}

// The CJK blocks BERT surrounds with spaces, as tokenizers lists them (its Extension E range
// starts at U+2B920, not U+2B820).
inline bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

inline int combining_class(char32_t c) {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
}

// Appends the canonical decomposition of `c` (full, Hangul syllables included).
inline void append_decomposition(std::u32string& out, char32_t c) {
  if (const code_point_mapping* m = find_in_table(bert_table::nfd_overrides, c)) {
    out += m->to;
    return;
  }
  utf8proc_int32_t buf[8];  // no canonical decomposition is longer than 4 code points
  const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 8,
                                                     UTF8PROC_DECOMPOSE, nullptr);
  if (n <= 0 || n > 8) {
    out += c;
    return;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i) out += static_cast<char32_t>(buf[i]);
}

// NFD: decompose every code point, then order each run of combining marks by combining class
// (stable, Unicode 15 section 3.11, "Canonical Ordering Algorithm").
inline std::u32string nfd(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) append_decomposition(out, c);
  for (std::size_t i = 1; i < out.size(); ++i) {
    const int cc = combining_class(out[i]);
    if (cc == 0) continue;
    for (std::size_t j = i; j > 0; --j) {  // insertion sort within the run; runs are short
      const int prev = combining_class(out[j - 1]);
      if (prev == 0 || prev <= cc) break;
      std::swap(out[j - 1], out[j]);
    }
  }
  return out;
}

// Appends the full lowercase mapping of `c` (Rust's char::to_lowercase): the simple mapping,
// except U+0130, whose lowercase is i + U+0307 COMBINING DOT ABOVE (SpecialCasing.txt). No final
// sigma rule: each character is lowercased alone, as tokenizers does.
inline void append_lowercase(std::u32string& out, char32_t c) {
  if (const code_point_mapping* m = find_in_table(bert_table::lowercase_overrides, c)) {
    out += m->to;
  } else if (c == 0x130) {
    out += U"i\u0307";
  } else {
    out += static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
  }
}

}  // namespace fusedsl::text::bert
