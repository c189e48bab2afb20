// A downstream program: two post-LN transformer layers, flattened at compile time and printed.
#include <fusedsl/fusedsl.hpp>

#include <iostream>

namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 64>();
constexpr auto block = fd::nn::transformer_block<fd::nn::post_ln, 4, 128>;
constexpr auto y = fd::nn::stack<"layers", 2>(block, x);
constexpr const auto& g = fd::flatten(y);
static_assert(g.n_regions == 2, "one region for the repeated block's body");

int main() {
  std::cout << fd::graph::to_text(g);
  return g.size() > 0 ? 0 : 1;
}
