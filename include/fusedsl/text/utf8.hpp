#pragma once
// UTF-8 as the Unicode Standard defines it (chapter 3, table 3-7: well-formed byte sequences): no
// overlong forms, no surrogates, nothing above U+10FFFF. utf8::scan reads one character; the rest
// is built on it. Ill-formed input is either an error (require_valid) or replaced by U+FFFD, one
// per maximal subpart (section 3.9, "U+FFFD Substitution of Maximal Subparts"), the policy of
// Python's bytes.decode("utf-8", errors="replace") and Rust's from_utf8_lossy, so a reference
// tokenizer fed the decoded Python string sees the same code points.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fusedsl/text/error.hpp"

namespace fusedsl::text {

// Text that is not well-formed UTF-8 where UTF-8 is required.
struct utf8_error : text_error {
  using text_error::text_error;
};

inline constexpr char32_t replacement_character = U'\uFFFD';

namespace utf8 {

enum class status : std::uint8_t {
  ok,          // a whole character
  ill_formed,  // a maximal subpart that no byte could complete
  truncated,   // the start of a character, cut off by the end of the input
};

struct scan_result {
  status state;
  std::size_t length;   // bytes: the character, the maximal subpart, or what is left
  char32_t code_point;  // valid when state == ok
};

// The character (or maximal ill-formed subpart) that starts at s[pos], pos < s.size().
constexpr scan_result scan(std::string_view s, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(pos);
  if (b0 < 0x80) return {status::ok, 1, b0};
  std::size_t need = 0;
  char32_t cp = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte (table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {status::ill_formed, 1, 0};  // C0, C1, F5..FF, or a stray continuation byte
  }
  for (std::size_t k = 1; k <= need; ++k) {
    if (pos + k >= s.size()) return {status::truncated, k, 0};
    const unsigned char b = byte(pos + k);
    if (b < lo || b > hi) return {status::ill_formed, k, 0};
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  return {status::ok, need + 1, cp};
}

// Appends the UTF-8 form of a scalar value (cp <= U+10FFFF, not a surrogate).
inline void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The UTF-8 form of scalar values.
inline std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t c : s) append(out, c);
  return out;
}

// The code points of `s`, each maximal ill-formed subpart (and a truncated end) as one U+FFFD.
inline std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t pos = 0; pos < s.size();) {
    const scan_result r = scan(s, pos);
    out += r.state == status::ok ? r.code_point : replacement_character;
    pos += r.length;
  }
  return out;
}

constexpr bool is_valid(std::string_view s) {
  for (std::size_t pos = 0; pos < s.size();) {
    const scan_result r = scan(s, pos);
    if (r.state != status::ok) return false;
    pos += r.length;
  }
  return true;
}

// utf8_error "<what> is not valid UTF-8 at byte N" unless `s` is well-formed.
inline void require_valid(std::string_view s, std::string_view what) {
  for (std::size_t pos = 0; pos < s.size();) {
    const scan_result r = scan(s, pos);
    if (r.state != status::ok)
      throw utf8_error(std::string(what) + " is not valid UTF-8 at byte " + std::to_string(pos) +
                       (r.state == status::truncated ? " (a character cut off by the end)" : ""));
    pos += r.length;
  }
}

// s with each maximal ill-formed subpart (and a truncated end) replaced by U+FFFD.
inline std::string replace_invalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t pos = 0; pos < s.size();) {
    const scan_result r = scan(s, pos);
    if (r.state == status::ok)
      out.append(s.substr(pos, r.length));
    else
      append(out, replacement_character);
    pos += r.length;
  }
  return out;
}

// The length of the longest prefix of s that ends neither inside a character nor inside a
// truncated start of one: what a stream may write now, keeping the rest for the next bytes.
constexpr std::size_t complete_prefix(std::string_view s) {
  std::size_t pos = 0;
  while (pos < s.size()) {
    const scan_result r = scan(s, pos);
    if (r.state == status::truncated) break;
    pos += r.length;
  }
  return pos;
}

}  // namespace utf8
}  // namespace fusedsl::text
