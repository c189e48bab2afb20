#pragma once
// GPT-2's pre-tokenisation: the pieces that
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// finds, left to right, in the text (OpenAI's gpt-2 encoder.py; Hugging Face's ByteLevel
// pre-tokenizer), matched by hand over code points. The regex's alternatives are tried in order
// at each position; every code point is a letter (\p{L}: Lu Ll Lt Lm Lo), a number (\p{N}: Nd Nl
// No), white space (\s: Unicode's White_Space property) or none of these, so some alternative
// always matches and the pieces cover the text (character properties: text/unicode.hpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/text/unicode.hpp"
#include "fusedsl/text/utf8.hpp"

namespace fusedsl::text {

enum class gpt2_char_class : std::uint8_t { letter, number, space, other };

inline gpt2_char_class classify_gpt2(char32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return gpt2_char_class::letter;
    if (cp >= '0' && cp <= '9') return gpt2_char_class::number;
    return is_white_space(cp) ? gpt2_char_class::space : gpt2_char_class::other;
  }
  if (is_white_space(cp)) return gpt2_char_class::space;
  switch (general_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return gpt2_char_class::letter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return gpt2_char_class::number;
    default:
      return gpt2_char_class::other;
  }
}

// Calls piece(std::string_view) for each piece of `text`, in order; the pieces concatenate to
// `text`. utf8_error (naming the byte offset) when `text` is not well-formed UTF-8.
template <class F>
void gpt2_pretokenize(std::string_view text, F&& piece) {
  const std::size_t n = text.size();
  struct char_at {
    gpt2_char_class cls;
    std::size_t length;
  };
  const auto at = [&](std::size_t pos) -> char_at {
    const utf8::scan_result r = utf8::scan(text, pos);
    if (r.state != utf8::status::ok)
      throw utf8_error("gpt2 pre-tokenizer: text is not valid UTF-8 at byte " +
                       std::to_string(pos));
    return {classify_gpt2(r.code_point), r.length};
  };
  // The end of the run of class `cls` that starts at `pos`.
  const auto run_end = [&](std::size_t pos, gpt2_char_class cls) {
    while (pos < n) {
      const char_at c = at(pos);
      if (c.cls != cls) break;
      pos += c.length;
    }
    return pos;
  };
  // 's 't 're 've 'm 'll 'd (ASCII, case-sensitive): the end of the one at `pos`, or 0.
  const auto contraction_end = [&](std::size_t pos) -> std::size_t {
    if (pos + 1 >= n) return 0;
    if (pos + 2 < n) {
      const std::string_view two = text.substr(pos + 1, 2);
      if (two == "re" || two == "ve" || two == "ll") return pos + 3;
    }
    const char c = text[pos + 1];
    return c == 's' || c == 't' || c == 'm' || c == 'd' ? pos + 2 : 0;
  };

  std::size_t pos = 0;
  while (pos < n) {
    const char_at c0 = at(pos);
    std::size_t end = 0;
    if (text[pos] == '\'' && (end = contraction_end(pos)) != 0) {
      // a contraction
    } else if (text[pos] == ' ' && pos + 1 < n && at(pos + 1).cls != gpt2_char_class::space) {
      end = run_end(pos + 1, at(pos + 1).cls);  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    } else if (c0.cls != gpt2_char_class::space) {
      end = run_end(pos, c0.cls);
    } else {
      std::size_t last = pos;  // the start of the run's last character
      std::size_t q = pos;
      while (q < n) {
        const char_at c = at(q);
        if (c.cls != gpt2_char_class::space) break;
        last = q;
        q += c.length;
      }
      // '\s+(?!\S)' takes the whole run at the end of the text, else all of it but the last
      // character (which then starts the next piece); a lone one before a non-space is '\s+'.
      end = q == n || last == pos ? q : last;
    }
    piece(text.substr(pos, end - pos));
    pos = end;
  }
}

inline std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  gpt2_pretokenize(text, [&](std::string_view p) { pieces.push_back(p); });
  return pieces;
}

}  // namespace fusedsl::text
