// A downstream program in the compiled mode (fusedsl::compiled): a post-LN transformer layer
// exported to HLO text, parsed back and printed again; the exporter, printer and parser come from
// the installed library.
#include <fusedsl/fusedsl.hpp>
#include <fusedsl/hlo/export.hpp>
#include <fusedsl/hlo/parser.hpp>

#include <iostream>

#if !defined(FUSEDSL_SEPARATE_COMPILATION)
#error "fusedsl::compiled did not define FUSEDSL_SEPARATE_COMPILATION"
#endif

namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 64>();
constexpr auto y = fd::nn::transformer_block<fd::nn::post_ln, 4, 128>(x);
constexpr auto program = fd::compile(y);

int main() {
  const std::string text = fd::hlo::to_text(program);
  const fd::hlo::module m = fd::hlo::parse_module(text);
  fd::hlo::verify(m);
  const bool same = fd::hlo::to_text(m) == text;
  std::cout << "compiled mode: " << text.size() << " bytes of HLO, reprinted "
            << (same ? "identically" : "differently") << "\n";
  return same ? 0 : 1;
}
