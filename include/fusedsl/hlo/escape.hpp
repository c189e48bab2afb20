#pragma once
// Escaping of names and strings for HLO text.
//
// Identifiers (instruction and computation names) must match [A-Za-z_][A-Za-z0-9_.-]*.
// escape_identifier maps any string onto that set deterministically, as XLA's own name
// sanitiser does: every other byte becomes '_', a leading digit, '.' or '-' gets a '_' prefix,
// and the empty string becomes "_". It is lossy; the builder keeps names unique by appending
// ".1", ".2", ... and keeps the original string in the instruction's metadata op_name.
//
// Strings (metadata op_name) are printed in double quotes with C escapes: \" \\ \n \t \r, and
// every other byte outside printable ASCII as a three-digit octal escape \ooo.

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

constexpr bool is_valid_identifier(std::string_view s) {
  if (s.empty() || !is_identifier_start(s.front())) return false;
  for (char c : s)
    if (!is_identifier_char(c)) return false;
  return true;
}

inline std::string escape_identifier(std::string_view s) {
  std::string out;
  if (s.empty() || !is_identifier_start(s.front())) out += '_';
  for (char c : s) out += is_identifier_char(c) ? c : '_';
  return out;
}

inline std::string quote_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
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
