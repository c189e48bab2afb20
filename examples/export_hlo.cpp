// Writes the seed transformer (2 layers, d_model 128, 4 heads, FFN 512, seq 128), or with `medium`
// after the directory the medium one (d_model 512, 8 heads, FFN 2048, seq 512), as XLA HLO and
// StableHLO into the directory given on the command line (files named <model>.*):
//   seed.unfused.hlo        every node as plain HLO; XLA fuses it itself
//   seed.fused_kinput.hlo   one fusion computation per fusion group of our plan, with the
//                           plan's kinds (kLoop/kOutput/kInput): for the TPU-style backend and
//                           XLA's parser (XLA:CPU refuses kInput fusions)
//   seed.fused_calls.hlo    the same computations called with `call` (XLA's CPU backend
//                           inlines them)
//   seed.fused_xla_cpu.hlo  each group as the kLoop fusion(s) XLA's CPU backend compiles as given
//   seed.sharded8.hlo       unfused, with the Megatron layout over 8 devices (num_partitions=8)
//   seed.unfused.mlir       StableHLO of the unfused module
//   seed.sharded8.mlir      StableHLO of the sharded module (shardings as mhlo.sharding)
//   seed.bindings.txt       the entry parameters in order: index, name, dtype, shape
// docs/hlo-export.md shows how to run them with jax; the test suite runs every .hlo and .mlir but
// the kInput one on XLA:CPU (tests/examples).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "fusedsl/export/export.hpp"
#include "fusedsl/export/sharding.hpp"
#include "fusedsl/hlo/stablehlo.hpp"
#include "fusedsl/models/transformer.hpp"

namespace fd = fusedsl;
namespace hlo = fusedsl::hlo;

static void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
  std::cout << p.string() << " (" << text.size() << " bytes)\n";
}

template <class Model>
void export_model(const std::filesystem::path& dir, const std::string& name) {
  constexpr auto& program = Model::program;

  hlo::export_options fused;
  fused.form = hlo::export_form::fused;
  hlo::export_options fused_calls = fused;
  fused_calls.groups = hlo::group_calls::call;
  hlo::export_options fused_xla_cpu = fused;
  fused_xla_cpu.groups = hlo::group_calls::xla_cpu;
  const hlo::export_options sharded = hlo::megatron_sharding(8).options();

  const hlo::module unfused_module = hlo::to_module(program);
  const hlo::module sharded_module = hlo::to_module(program, sharded);
  write(dir / (name + ".unfused.hlo"), hlo::to_text(unfused_module));
  write(dir / (name + ".fused_kinput.hlo"), hlo::to_text(program, fused));
  write(dir / (name + ".fused_calls.hlo"), hlo::to_text(program, fused_calls));
  write(dir / (name + ".fused_xla_cpu.hlo"), hlo::to_text(program, fused_xla_cpu));
  write(dir / (name + ".sharded8.hlo"), hlo::to_text(sharded_module));
  write(dir / (name + ".unfused.mlir"), hlo::to_stablehlo(unfused_module));
  write(dir / (name + ".sharded8.mlir"), hlo::to_stablehlo(sharded_module));

  std::string bindings;
  int i = 0;
  for (const hlo::export_binding& b : hlo::export_bindings(fd::graph::graph_view(program.graph)))
    bindings += std::to_string(i++) + " " + b.name + " " + std::string(fd::name_of(b.type)) + " " +
                fd::to_string(b.shape) + "\n";
  write(dir / (name + ".bindings.txt"), bindings);
  std::cout << "fusion groups: " << program.kernel_count()
            << ", arena bytes: " << program.arena_bytes() << "\n";
}

int main(int argc, char** argv) {
  const std::string model = argc == 3 ? argv[2] : "seed";
  if ((argc != 2 && argc != 3) || (model != "seed" && model != "medium")) {
    std::cerr << "usage: " << argv[0] << " <output directory> [seed|medium]\n";
    return 2;
  }
  try {
    const std::filesystem::path dir(argv[1]);
    std::filesystem::create_directories(dir);
    if (model == "seed")
      export_model<fd::models::seed>(dir, model);
    else
      export_model<fd::models::medium>(dir, model);
  } catch (const std::exception& e) {
    std::cerr << "export_hlo: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
