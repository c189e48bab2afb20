// What a GPT-2-small-shaped stack (2 pre-LN causal layers, d 768, 12 heads, FFN 3072, seq 1024)
// costs in memory: the process's peak RSS (VmHWM) from before the weights are allocated to after
// the executor's first run, against the caller's weight buffers + the packed weight copies + the
// arena, and the executor's own footprint() by part. Prints one JSON object.
// Run: build/release/benchmarks/model/footprint_bench > footprint.json
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/fusedsl.hpp"

namespace fd = fusedsl;

namespace {

// The process's peak resident set so far, in bytes (Linux /proc/self/status, VmHWM).
std::size_t peak_rss() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmHWM:") {
      std::size_t kib = 0;
      f >> kib;
      return kib * 1024;
    }
    f.ignore(1 << 20, '\n');
  }
  return 0;
}

constexpr auto x = fd::input<"x", float, 1024, 768>();
constexpr auto block = fd::nn::transformer_block<fd::nn::pre_ln, 12, 3072, 12, true>;
using program = decltype(fd::compile(fd::nn::stack<"h", 2>(block, x)));

}  // namespace

int main() {
  static_assert(fd::cpu::executor<program>::kernels_plan().n_refused == 0,
                "every group of the GPT-2-shaped stack runs a generated kernel");
  const std::size_t before = peak_rss();
  std::vector<fd::dynamic_tensor> weights;
  std::size_t weight_bytes = 0;
  for (const auto& b : fd::cpu::executor<program>::binding_list()) {  // allocates no executor
    weights.emplace_back(b.type, b.shape);
    weight_bytes += std::size_t(b.shape.size()) * std::size_t(fd::size_of(b.type));
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (auto& w : weights)
    for (std::int64_t i = 0; i < w.shape().size(); ++i) w.data<float>()[i] = nd(rng);
  fd::dynamic_tensor out(fd::dtype::f32, program::graph[program::graph.outputs[0]].shape);
  const std::size_t with_weights = peak_rss();
  fd::cpu::executor<program> ex;
  const auto infos = ex.bindings();
  for (std::size_t i = 0; i < infos.size(); ++i) ex.bind(infos[i].name, weights[i].ref());
  ex.bind_output(0, out.ref());
  ex.run();
  const std::size_t after = peak_rss();
  const fd::cpu::memory_footprint f = ex.footprint();
  const double budget = double(weight_bytes + f.packed_weights + f.arena);
  std::printf(
      "{\"program\": \"gpt2-small shapes, 2 layers, seq 1024\", \"weights_bytes\": %zu, "
      "\"arena_bytes\": %zu, \"workspace_bytes\": %zu, \"packed_weight_bytes\": %zu, "
      "\"interpreter_bytes\": %zu, \"footprint_total_bytes\": %zu, \"peak_rss_before_bytes\": %zu, "
      "\"peak_rss_with_weights_bytes\": %zu, \"peak_rss_after_run_bytes\": %zu, "
      "\"growth_over_budget\": %.4f, \"interpreted_groups\": %d}\n",
      weight_bytes, f.arena, f.workspace, f.packed_weights, f.interpreter, f.total(), before,
      with_weights, after, double(after - before) / budget, ex.stats().interpreted_groups);
  return 0;
}
