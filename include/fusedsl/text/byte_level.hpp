#pragma once
// GPT-2's byte-level alphabet (bytes_to_unicode in OpenAI's gpt-2 encoder.py): each of the 256
// byte values stands for one printable code point, so that a vocabulary of strings can hold every
// byte sequence. The printable bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for
// themselves; the other 68 bytes, in increasing order, for U+0100, U+0101, ...

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "fusedsl/text/utf8.hpp"

namespace fusedsl::text::byte_level {

constexpr bool stands_for_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// byte -> the code point that stands for it.
inline constexpr std::array<char16_t, 256> code_point_of_byte = [] {
  std::array<char16_t, 256> t{};
  char16_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) t[b] = stands_for_itself(b) ? char16_t(b) : next++;
  return t;
}();

// Code points U+0000..U+01FF -> the byte they stand for, or -1 (not in the alphabet).
inline constexpr std::array<std::int16_t, 512> byte_of_code_point = [] {
  std::array<std::int16_t, 512> t{};
  t.fill(-1);
  for (unsigned b = 0; b < 256; ++b) t[code_point_of_byte[b]] = static_cast<std::int16_t>(b);
  return t;
}();

// The alphabet's spelling of a byte string (UTF-8 of the standing-in code points).
inline std::string spell(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) utf8::append(out, code_point_of_byte[static_cast<unsigned char>(c)]);
  return out;
}

// The bytes a spelling stands for; false when `spelled` is not well-formed UTF-8 or holds a code
// point outside the alphabet (then `bad` is that code point, or U+FFFD for bad UTF-8).
inline bool unspell(std::string_view spelled, std::string& bytes, char32_t& bad) {
  bytes.clear();
  for (std::size_t pos = 0; pos < spelled.size();) {
    const utf8::scan_result r = utf8::scan(spelled, pos);
    if (r.state != utf8::status::ok) {
      bad = 0xFFFD;
      return false;
    }
    const std::int16_t b = r.code_point < 512 ? byte_of_code_point[r.code_point] : -1;
    if (b < 0) {
      bad = r.code_point;
      return false;
    }
    bytes += static_cast<char>(b);
    pos += r.length;
  }
  return true;
}

}  // namespace fusedsl::text::byte_level
