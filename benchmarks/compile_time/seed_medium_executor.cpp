// The translation unit docs/compile-time.md times for what a user pays to compile a model: the seed
// and medium transformers (models/transformer.hpp) planned by fd::compile and run by the CPU
// executor (every fusion group a generated kernel), nothing else. It uses only the API every tree
// of the comparison has (compare_trees.sh compiles it against each tree's include/), and it runs:
// each model once on zero weights, printing its output's first element and the arena size.
#include <iostream>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/models/transformer.hpp"

namespace fd = fusedsl;

template <class Model>
float run_once() {
  using program = typename Model::program_type;
  fd::cpu::executor<program> ex(program{}, fd::cpu::threads{1});
  std::vector<fd::dynamic_tensor> weights;
  weights.reserve(ex.bindings().size());
  for (const auto& b : ex.bindings()) {
    weights.emplace_back(b.type, b.shape);
    ex.bind(b.name, weights.back().ref());
  }
  fd::tensor<float, Model::seq, Model::d_model> out;
  ex.bind_output(0, out);
  ex.run();
  std::cout << "arena " << program::memory.arena_bytes << " bytes, ";
  return out[0];
}

int main() {
  std::cout << "seed: " << run_once<fd::models::seed>() << "\n";
  std::cout << "medium: " << run_once<fd::models::medium>() << "\n";
}
