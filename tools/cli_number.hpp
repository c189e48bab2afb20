#pragma once
// The command-line tools' reading of a number given to a flag: the whole text must be the number
// (no sign-only, blank or trailing characters). Each tool words its own error around nullopt.
#include <cstddef>
#include <exception>
#include <optional>
#include <string>

namespace fusedsl::tools {

inline std::optional<long long> parse_whole_integer(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return n;
}

}  // namespace fusedsl::tools
