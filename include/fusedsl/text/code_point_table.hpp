#pragma once
// Sorted tables of code points (ranges and single-code-point mappings) with binary search: the
// form of text/bert_unicode_table.hpp.
#include <algorithm>
#include <array>
#include <cstddef>
#include <iterator>
#include <string_view>

namespace fusedsl::text {

struct code_point_range {
  char32_t first;
  char32_t last;  // inclusive
};

struct code_point_mapping {
  char32_t from;
  std::u32string_view to;
};

template <std::size_t N>
constexpr bool in_table(const std::array<code_point_range, N>& table, char32_t c) {
  const auto it =
      std::upper_bound(table.begin(), table.end(), c,
                       [](char32_t v, const code_point_range& r) { return v < r.first; });
  return it != table.begin() && c <= std::prev(it)->last;
}

template <std::size_t N>
constexpr const code_point_mapping* find_in_table(const std::array<code_point_mapping, N>& table,
                                                  char32_t c) {
  const auto it =
      std::lower_bound(table.begin(), table.end(), c,
                       [](const code_point_mapping& m, char32_t v) { return m.from < v; });
  return it != table.end() && it->from == c ? &*it : nullptr;
}

}  // namespace fusedsl::text
