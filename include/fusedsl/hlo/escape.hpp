#pragma once
// Escaping of names and strings for HLO text.
//
// Identifiers (instruction and computation names) must match [A-Za-z_][A-Za-z0-9_.-]*, must not
// start with "__" (XLA reserves it) and must not be a primitive type name such as f32, pred, u8,
// token or f8e4m3fn (XLA's parser rejects those even after '%'; checked against jaxlib 0.10.2).
// escape_identifier maps any string onto valid names deterministically, like XLA's own name
// sanitiser: every other byte becomes '_'; a leading digit, '.' or '-' gets a '_' prefix; a
// leading "__" gets an 'a' prefix; a reserved type name gets a '_' suffix; "" becomes "_".
// It is lossy; the builder keeps names unique by appending ".1", ".2", ... and keeps the original
// string in the instruction's metadata op_name.
//
// Strings (metadata op_name) are printed in double quotes with C escapes: \" \\ \n \t \r, and
// every other byte outside printable ASCII as a three-digit octal escape \ooo. XLA stores
// op_name in a protobuf string, which must be valid UTF-8: to_valid_utf8 replaces each byte of an
// ill-formed sequence with U+FFFD, and the builder applies it to every op_name.

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace fusedsl::hlo {

constexpr bool is_identifier_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
constexpr bool is_identifier_char(char c) {
  return is_identifier_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

// Lexically an identifier: [A-Za-z_][A-Za-z0-9_.-]* (what the parser reads as a name).
constexpr bool is_identifier_token(std::string_view s) {
  if (s.empty() || !is_identifier_start(s.front())) return false;
  for (char c : s)
    if (!is_identifier_char(c)) return false;
  return true;
}

// A primitive type name in XLA's spelling (s8, u32, f16, bf16, c64, f8e4m3fn, pred, token, ...).
constexpr bool is_reserved_type_name(std::string_view s) {
  if (s == "pred" || s == "token" || s == "opaque") return true;
  auto digits = [](std::string_view d) {
    if (d.empty()) return false;
    for (char c : d)
      if (c < '0' || c > '9') return false;
    return true;
  };
  if (s.size() > 1 && (s[0] == 's' || s[0] == 'u' || s[0] == 'f' || s[0] == 'c') &&
      digits(s.substr(1)))
    return true;
  if (s.size() > 2 && s.substr(0, 2) == "bf" && digits(s.substr(2))) return true;
  // fNeNmN... (f8e4m3fn, f8e5m2fnuz, f4e2m1fn, f8e8m0fnu)
  if (s.size() > 1 && s[0] == 'f') {
    std::size_t i = 1;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i > 1 && i < s.size() && s[i] == 'e') {
      std::size_t j = i + 1;
      while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
      if (j > i + 1 && j < s.size() && s[j] == 'm') return true;
    }
  }
  return false;
}

// A name XLA's parser accepts for an instruction or computation.
constexpr bool is_valid_identifier(std::string_view s) {
  return is_identifier_token(s) && !(s.size() >= 2 && s[0] == '_' && s[1] == '_') &&
         !is_reserved_type_name(s);
}

inline std::string escape_identifier(std::string_view s) {
  std::string out;
  if (s.empty() || !is_identifier_start(s.front())) out += '_';
  for (char c : s) out += is_identifier_char(c) ? c : '_';
  if (out.size() >= 2 && out[0] == '_' && out[1] == '_') out.insert(out.begin(), 'a');
  if (is_reserved_type_name(out)) out += '_';
  return out;
}

// Length of the well-formed UTF-8 sequence at s[i], or 0 if it is ill-formed (RFC 3629).
constexpr std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](std::size_t k) { return k < s.size() && (b(k) & 0xC0u) == 0x80u; };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(i + 1) > 0x9F) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(i + 1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

constexpr bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

inline std::string to_valid_utf8(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD replacement character
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

inline std::string quote_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default: {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) {
          char buf[5];
          std::snprintf(buf, sizeof buf, "\\%03o", static_cast<unsigned>(u));
          out += buf;
        } else {
          out += c;
        }
      }
    }
  }
  out += '"';
  return out;
}

}  // namespace fusedsl::hlo
