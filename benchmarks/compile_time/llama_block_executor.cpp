// A one-block LLaMA-style model run by the CPU executor, as a user compiles it: RMSNorm,
// grouped-query attention with rotary embeddings and SwiGLU (models/llama.hpp: 128 tokens,
// d_model 512, 8 heads, 2 key/value heads, hidden 1408), planned by fd::compile, every fusion
// group a generated kernel; no HLO export. docs/compile-time.md times it as the reference point
// of a model's compile cost (compare_trees.sh compiles it against each tree's include/). It runs:
// once on zero weights, printing its output's first element and the arena size.
#include <iostream>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/models/llama.hpp"

namespace fd = fusedsl;

using model = fd::models::llama_block_model<128, 512, 8, 2, 1408>;

int main() {
  using program = model::program_type;
  fd::cpu::executor<program> ex(program{}, fd::cpu::threads{1});
  std::vector<fd::dynamic_tensor> values;
  values.reserve(ex.bindings().size());
  for (const auto& b : ex.bindings()) {
    values.emplace_back(b.type, b.shape);
    ex.bind(b.name, values.back().ref());
  }
  fd::tensor<float, model::seq, model::d_model> out;
  ex.bind_output(0, out);
  ex.run();
  std::cout << "llama block: arena " << program::memory.arena_bytes << " bytes, output[0] "
            << out[0] << "\n";
}
