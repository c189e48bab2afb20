#pragma once
// Checks of what a stream decoder writes, shared by the tests and the fuzzer.
#include <cstddef>
#include <string>
#include <vector>

#include "fusedsl/text/utf8.hpp"

namespace fusedsl::text::testing {

// Whether a boundary between two writes falls inside a well-formed character of their
// concatenation.
inline bool splits_a_character(const std::vector<std::string>& writes) {
  std::string all;
  for (const std::string& w : writes) all += w;
  std::vector<bool> inside(all.size() + 1, false);
  for (std::size_t pos = 0; pos < all.size();) {
    const utf8::scan_result r = utf8::scan(all, pos);
    if (r.state == utf8::status::ok)
      for (std::size_t k = 1; k < r.length; ++k) inside[pos + k] = true;
    pos += r.length;
  }
  std::size_t boundary = 0;
  for (const std::string& w : writes) {
    boundary += w.size();
    if (inside[boundary]) return true;
  }
  return false;
}

}  // namespace fusedsl::text::testing
