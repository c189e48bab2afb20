// The README's example, compiled and run: a 2-layer transformer, planned at compile time, run on
// the CPU, exported to HLO.
#include <fusedsl/backend/cpu/executor.hpp>
#include <fusedsl/export/export.hpp>
#include <fusedsl/fusedsl.hpp>
#include <iostream>
#include <type_traits>
#include <vector>
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 128, 128>();                      // [seq, d_model]
constexpr auto block = fd::nn::transformer_block<fd::nn::post_ln, 4, 512>;  // 4 heads, FFN 512
constexpr auto y = fd::nn::stack<"layers", 2>(block, x);                   // one plan, run twice

constexpr auto program = fd::compile(y);            // graph, fusion groups, memory plan: constexpr
static_assert(program.stats().kernels_per_layer == 7);
static_assert(program.arena_bytes() == 327680);     // 320 KiB, fixed at compile time
using program_type = std::remove_cvref_t<decltype(program)>;
static_assert(fd::cpu::executor<program_type>::kernels_plan().n_refused == 0);  // all generated

int main() {
  fd::cpu::executor run{program, fd::cpu::threads{2}};  // the arena is allocated here, once
  std::vector<fd::dynamic_tensor> weights;              // "x", "layers.0.attn.q.w", ...
  for (const auto& b : run.bindings()) {
    weights.emplace_back(b.type, b.shape);              // (zeros here; load yours)
    run.bind(b.name, weights.back().ref());             // by name; shapes checked; B packed
  }
  fd::tensor<float, 128, 128> out;
  run.bind_output(0, out);
  run.run();                                            // no allocation
  std::string hlo = fd::hlo::to_text(program);          // the same graph for XLA
  std::cout << "output[0] = " << out[0] << ", HLO text: " << hlo.size() << " bytes\n";
}
