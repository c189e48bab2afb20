// The main demo: the seed transformer (2 post-LN layers, d_model 128, 4 heads, FFN 512, seq 128)
//   1. compiled: its fusion plan and memory figures (all compile-time constants);
//   2. run unfused (the Eigen reference backend) and fused (the CPU executor) on the same random
//      weights: the numbers agree, and the fused run is timed against the unfused one;
//   3. exported to XLA HLO and StableHLO (docs/hlo-export.md, "Forms"):
//        seed_unfused.hlo       every node as plain HLO (XLA fuses it itself)
//        seed_fused.hlo         our fusion groups as the kLoop fusions XLA:CPU compiles as given
//                               (group_calls::xla_cpu)
//        seed_fused_kinput.hlo  our fusion groups with the plan's kinds (kLoop/kInput/kOutput): for
//                               the TPU-style backend and XLA's parser; XLA:CPU refuses kInput
//        seed_sharded8.hlo      unfused, Megatron-sharded over 8 devices
//        seed.mlir              StableHLO of the unfused module
//      every one but seed_fused_kinput.hlo is compiled and run by XLA in the test suite;
//   4. the exported HLO parsed back and run on the TPU-style backend (v5e): its MXU schedule,
//      cost report and trace, and its numbers against the reference.
// Usage: transformer_demo [output-directory]   (default: demo-out)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/export/export.hpp"
#include "fusedsl/export/sharding.hpp"
#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "fusedsl/hlo/stablehlo.hpp"
#include "fusedsl/models/transformer.hpp"
#include "fusedsl/plan/report.hpp"
#include "fusedsl/tpu/cost.hpp"
#include "fusedsl/tpu/execute.hpp"
#include "fusedsl/tpu/report.hpp"
#include "fusedsl/tpu/trace.hpp"

namespace fd = fusedsl;
using seed = fd::models::seed;

namespace {
template <class F>
double best_seconds(int repeats, F&& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
  std::cout << "  wrote " << p.string() << " (" << text.size() << " bytes)\n";
}
}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path out_dir = argc > 1 ? argv[1] : "demo-out";
  std::filesystem::create_directories(out_dir);
  constexpr auto& program = seed::program;

  std::cout << "== 1. compile: the seed transformer (2 layers, d_model 128, 4 heads, FFN 512, seq "
               "128)\n\n";
  constexpr fd::plan::memory_stats stats = program.stats();
  std::cout << fd::plan::to_text(stats, "seed") << "\n"
            << fd::plan::print_plan(program.graph, program.fusion, program.memory) << "\n";

  std::cout << "== 2. run: unfused (Eigen reference, every node materialised) vs fused (CPU "
               "executor)\n\n";
  fd::cpu::executor<seed::program_type> fused(program, fd::cpu::threads{1});
  static_assert(fd::cpu::executor<seed::program_type>::kernels_plan().n_refused == 0,
                "every group of the seed transformer runs a generated kernel");
  std::vector<std::string> names;
  std::vector<fd::dynamic_tensor> tensors;
  std::mt19937 rng(2026);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (const auto& b : fused.bindings()) {
    names.push_back(b.name);
    tensors.emplace_back(b.type, b.shape);
    const bool gamma = b.name.find("gamma") != std::string::npos,
               input = b.kind == fd::graph::op_kind::input;
    for (std::int64_t i = 0; i < b.shape.size(); ++i)
      tensors.back().data<float>()[i] = (gamma ? 1.0f : 0.0f) + nd(rng) * (input ? 20.0f : 1.0f);
  }
  fd::reference::evaluator unfused{fd::graph::graph_view(program.graph)};
  for (std::size_t i = 0; i < names.size(); ++i) {
    fused.bind(names[i], tensors[i].ref());
    unfused.bind(names[i], tensors[i].ref());
  }
  fd::tensor<float, seed::seq, seed::d_model> y;
  fused.bind_output(0, y);
  std::vector<fd::dynamic_tensor> expected;
  const double t_unfused = best_seconds(5, [&] { expected = unfused.run(); });
  const double t_fused = best_seconds(20, [&] { fused.run(); });
  double max_err = 0;
  for (std::int64_t i = 0; i < y.size(); ++i)
    max_err = std::max(max_err, double(std::fabs(y[i] - expected[0].data<float>()[i])));
  std::printf("  max |fused - unfused| = %.3g (outputs are layer-normalised, |y| ~ 1)\n", max_err);
  std::printf("  unfused %.3f ms, fused %.3f ms (best of several, one thread): %.2fx\n",
              t_unfused * 1e3, t_fused * 1e3, t_unfused / t_fused);
  std::printf("  groups on specialised kernels: %d, interpreted: %d; instruction set: %s\n\n",
              fused.stats().fast_groups, fused.stats().interpreted_groups,
              fd::cpu::instruction_set());

  std::cout << "== 3. export: XLA HLO and StableHLO\n\n";
  fd::hlo::export_options unfused_form;
  unfused_form.module_name = "seed_transformer";
  fd::hlo::export_options kinput_form = unfused_form;
  kinput_form.form = fd::hlo::export_form::fused;
  fd::hlo::export_options fused_form = kinput_form;
  fused_form.groups = fd::hlo::group_calls::xla_cpu;
  fd::hlo::export_options sharded = fd::hlo::megatron_sharding(8).options();
  sharded.module_name = "seed_transformer_sharded";
  const fd::hlo::module m = fd::hlo::to_module(program, unfused_form);
  write(out_dir / "seed_unfused.hlo", fd::hlo::to_text(m));
  write(out_dir / "seed_fused.hlo", fd::hlo::to_text(program, fused_form));
  write(out_dir / "seed_fused_kinput.hlo", fd::hlo::to_text(program, kinput_form));
  write(out_dir / "seed_sharded8.hlo", fd::hlo::to_text(program, sharded));
  write(out_dir / "seed.mlir", fd::hlo::to_stablehlo(m));
  std::cout << "  run one in JAX: see docs/hlo-export.md\n\n";

  std::cout << "== 4. TPU-style backend: parse the exported HLO, schedule it on a v5e core, run it "
               "tile by tile\n\n";
  const fd::hlo::module parsed = fd::hlo::parse_module(fd::hlo::to_text(m));
  const auto chip = fd::tpu::chip_by_name("v5e");
  const auto sched = fd::tpu::make_schedule(parsed, chip, {});
  const auto cost = fd::tpu::summarize(sched);
  std::cout << fd::tpu::text_summary(sched, cost);
  write(out_dir / "seed_v5e_report.json", fd::tpu::json_report(sched, cost));
  write(out_dir / "seed_v5e_trace.json", fd::tpu::chrome_trace(sched));
  // The module's parameters are the program's bindings in order.
  std::vector<fd::tpu::value> inputs;
  const auto& entry = parsed.entry_computation();
  const auto params = entry.parameters();
  for (const auto& b : fd::hlo::export_bindings(fd::graph::graph_view(program.graph))) {
    const auto it = std::find(names.begin(), names.end(), b.name);
    if (it == names.end())
      throw fd::binding_error("demo: the exported module has a parameter \"" + b.name +
                              "\" the program lacks");
    fd::tpu::value v = fd::tpu::value::zeros(entry.instructions[params[inputs.size()]].shape);
    const fd::dynamic_tensor& t = tensors[std::size_t(it - names.begin())];
    for (std::int64_t i = 0; i < b.shape.size(); ++i) v.data[std::size_t(i)] = t.data<float>()[i];
    inputs.push_back(std::move(v));
  }
  // The plan-shaped fused export on the same chip: what fusion saves in HBM traffic and time.
  const fd::hlo::module fused_parsed =
      fd::hlo::parse_module(fd::hlo::to_text(program, kinput_form));
  const auto fused_cost = fd::tpu::summarize(fd::tpu::make_schedule(fused_parsed, chip, {}));
  std::printf(
      "\n  fused export on v5e: %.3f us, HBM %.2f MiB (unfused: %.3f us, %.2f MiB): %.2fx less "
      "time\n",
      fused_cost.total_time_s * 1e6, double(fused_cost.hbm_bytes) / (1 << 20),
      cost.total_time_s * 1e6, double(cost.hbm_bytes) / (1 << 20),
      cost.total_time_s / fused_cost.total_time_s);
  const fd::tpu::value result = fd::tpu::execute(sched, inputs);
  const fd::tpu::value& tpu_y = result.elements.empty() ? result : result.elements[0];
  double tpu_err = 0;
  for (std::int64_t i = 0; i < y.size(); ++i)
    tpu_err = std::max(
        tpu_err, std::fabs(tpu_y.data[std::size_t(i)] - double(expected[0].data<float>()[i])));
  std::printf(
      "\n  max |tpu - reference| = %.3g (f32 dots on the MXU model, as the module says f32)\n",
      tpu_err);
  const bool ok = max_err < 1e-3 && tpu_err < 1e-3;
  std::cout << (ok ? "\ndemo: all backends agree\n" : "\ndemo: MISMATCH between backends\n");
  return ok ? 0 : 1;
}
