#pragma once
// Compile-time strings usable as template arguments: input<"x", float, 4, 4>.
#include <algorithm>
#include <cstddef>
#include <string_view>

namespace fusedsl {

template <std::size_t N>
struct fixed_string {
  char data[N]{};  // includes the terminating '\0'

  constexpr fixed_string() = default;
  constexpr fixed_string(const char (&s)[N]) { std::copy_n(s, N, data); }

  static constexpr std::size_t capacity = N;
  constexpr std::size_t size() const { return N - 1; }
  constexpr std::string_view view() const { return {data, N - 1}; }
  constexpr operator std::string_view() const { return view(); }
  constexpr bool operator==(const fixed_string&) const = default;
};

template <std::size_t N, std::size_t M>
constexpr bool operator==(const fixed_string<N>&, const fixed_string<M>&) { return false; }

template <std::size_t N, std::size_t M>
constexpr fixed_string<N + M - 1> operator+(const fixed_string<N>& a, const fixed_string<M>& b) {
  fixed_string<N + M - 1> r;
  std::copy_n(a.data, N - 1, r.data);
  std::copy_n(b.data, M, r.data + N - 1);
  return r;
}

// A bounded run-time/constexpr name, stored by value inside graph nodes.
inline constexpr std::size_t max_name = 64;

struct node_name {
  char data[max_name]{};
  std::size_t len = 0;

  constexpr node_name() = default;
  constexpr node_name(std::string_view s) { assign(s); }
  constexpr void assign(std::string_view s) {
    if (s.size() >= max_name) throw "fusedsl: a tensor name is longer than 63 characters";
    len = s.size();
    for (std::size_t i = 0; i < max_name; ++i) data[i] = i < len ? s[i] : '\0';
  }
  constexpr std::string_view view() const { return {data, len}; }
  constexpr bool empty() const { return len == 0; }
  constexpr bool operator==(const node_name& o) const { return view() == o.view(); }
};

// "attn" + "wq" -> "attn.wq"; an empty prefix adds no dot.
constexpr node_name join(std::string_view prefix, std::string_view suffix) {
  char buf[2 * max_name]{};
  std::size_t n = 0;
  for (char c : prefix) buf[n++] = c;
  if (!prefix.empty()) buf[n++] = '.';
  for (char c : suffix) {
    if (n >= max_name) throw "fusedsl: a tensor name is longer than 63 characters";
    buf[n++] = c;
  }
  return node_name(std::string_view(buf, n));
}

}  // namespace fusedsl
