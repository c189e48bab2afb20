// A downstream program in the compiled mode (fusedsl::compiled): a post-LN transformer layer
// exported to HLO text, parsed back and printed again, and run by the CPU executor twice, with its
// generated kernels and through the interpreter; the exporter, printer, parser and the executor's
// program-independent part (binding, the group loop, the interpreter) come from the installed
// library, each group's kernel is compiled here.
#include <cmath>
#include <cstdint>
#include <fusedsl/backend/cpu/executor.hpp>
#include <fusedsl/export/export.hpp>
#include <fusedsl/fusedsl.hpp>
#include <fusedsl/hlo/parser.hpp>
#include <iostream>
#include <vector>

#if !defined(FUSEDSL_SEPARATE_COMPILATION)
#error "fusedsl::compiled did not define FUSEDSL_SEPARATE_COMPILATION"
#endif

namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 64>();
constexpr auto y = fd::nn::transformer_block<fd::nn::post_ln, 4, 128>(x);
constexpr auto program = fd::compile(y);
using program_type = decltype(program);

// The largest difference between the generated kernels' output and the interpreter's, on
// deterministic values; negative if the executor ran a group through the interpreter.
double executor_difference() {
  fd::cpu::executor<program_type> fast(program);
  fd::cpu::executor<program_type> slow(program, fd::cpu::threads{1}, fd::cpu::interpreter_only{});
  std::vector<fd::dynamic_tensor> values;
  values.reserve(fast.bindings().size());
  float phase = 0.0f;
  for (const auto& b : fast.bindings()) {
    values.emplace_back(b.type, b.shape);
    float* p = values.back().data<float>();
    phase += 0.1f;
    for (std::int64_t i = 0; i < b.shape.size(); ++i)
      p[i] = 0.1f * std::sin(0.37f * float(i) + phase);
    fast.bind(b.name, values.back().ref());
    slow.bind(b.name, values.back().ref());
  }
  fd::tensor<float, 16, 64> a, b;
  fast.bind_output(0, a);
  slow.bind_output(0, b);
  fast.run();
  slow.run();
  if (fast.stats().interpreted_groups != 0) return -1;
  double worst = 0;
  for (std::int64_t i = 0; i < a.size(); ++i)
    worst = std::fmax(worst, std::fabs(double(a[i]) - double(b[i])));
  return std::isnan(worst) ? 1e30 : worst;
}

int main() {
  const std::string text = fd::hlo::to_text(program);
  const fd::hlo::module m = fd::hlo::parse_module(text);
  fd::hlo::verify(m);
  const bool same = fd::hlo::to_text(m) == text;
  std::cout << "compiled mode: " << text.size() << " bytes of HLO, reprinted "
            << (same ? "identically" : "differently") << "\n";
  const double diff = executor_difference();
  std::cout << "compiled mode: the CPU executor's kernels against its interpreter, largest "
               "difference "
            << diff << "\n";
  return same && diff >= 0 && diff < 1e-4 ? 0 : 1;
}
