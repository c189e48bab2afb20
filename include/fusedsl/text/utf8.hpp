#pragma once
// UTF-8 as the Unicode Standard defines it (chapter 3, table 3-7: well-formed byte sequences): no
// overlong forms, no surrogates, nothing above U+10FFFF. Ill-formed input is either an error
// (decode_code_points) or replaced by U+FFFD, one per maximal subpart (section 3.9, "U+FFFD
// Substitution of Maximal Subparts"), the policy Python's errors="replace" and Rust's
// from_utf8_lossy follow.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/core/error.hpp"

namespace fusedsl::text {

// Text that is not well-formed UTF-8 where UTF-8 is required.
struct utf8_error : error {
  using error::error;
};

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
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {status::ill_formed, 1, 0};
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

struct code_point_at {
  char32_t value;
  std::uint32_t offset;  // of its first byte
};

// The code points of well-formed UTF-8 with their byte offsets, plus a sentinel {0, s.size()};
// utf8_error naming the byte offset of the first ill-formed or truncated sequence.
inline std::vector<code_point_at> decode_code_points(std::string_view s, std::string_view what) {
  if (s.size() > UINT32_MAX) throw utf8_error(std::string(what) + ": text longer than 4 GiB");
  std::vector<code_point_at> out;
  out.reserve(s.size() + 1);
  for (std::size_t pos = 0; pos < s.size();) {
    const scan_result r = scan(s, pos);
    if (r.state != status::ok)
      throw utf8_error(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(pos) +
                       (r.state == status::truncated ? " (a character cut off by the end)" : ""));
    out.push_back({r.code_point, static_cast<std::uint32_t>(pos)});
    pos += r.length;
  }
  out.push_back({0, static_cast<std::uint32_t>(s.size())});
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

inline constexpr std::string_view replacement_character = "\xEF\xBF\xBD";  // U+FFFD

// s with each maximal ill-formed subpart (and a truncated end) replaced by U+FFFD.
inline std::string replace_invalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t pos = 0; pos < s.size();) {
    const scan_result r = scan(s, pos);
    if (r.state == status::ok)
      out.append(s.substr(pos, r.length));
    else
      out.append(replacement_character);
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
