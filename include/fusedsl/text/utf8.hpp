#pragma once
// UTF-8 to code points and back. Ill-formed input is not an error: each maximal subpart of an
// ill-formed sequence becomes one U+FFFD (Unicode 15, section 3.9, "U+FFFD Substitution of Maximal
// Subparts"), the replacement Python's bytes.decode("utf-8", errors="replace") makes, so a
// reference tokenizer fed the decoded Python string sees the same code points.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fusedsl::text {

inline constexpr char32_t replacement_character = U'\uFFFD';

// The code points of `bytes`; surrogates and values past U+10FFFF are ill-formed.
inline std::u32string decode_utf8(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  std::size_t i = 0;
  while (i < bytes.size()) {
    const unsigned b0 = byte(i);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    // Table 3-7: the lead byte fixes the length and the range of the second byte.
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;
    char32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2, cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3, cp = b0 & 0x0F;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4, cp = b0 & 0x07;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    } else {
      out.push_back(replacement_character);  // C0, C1, F5..FF, or a stray continuation byte
      ++i;
      continue;
    }
    std::size_t k = 1;
    for (; k < len && i + k < bytes.size(); ++k) {
      const unsigned b = byte(i + k);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (k == len) {
      out.push_back(cp);
    } else {
      out.push_back(replacement_character);  // the maximal subpart: lead plus the bytes that fit
    }
    i += k;
  }
  return out;
}

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

inline std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

}  // namespace fusedsl::text
