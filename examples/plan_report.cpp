// Prints the fusion and memory figures of the seed and medium transformer configs.
//   plan_report            text, with the fusion plan of the seed config
//   plan_report --json     one JSON object per config and line
//   plan_report --dot      the seed config's fusion plan as Graphviz DOT
#include <cstring>
#include <iostream>

#include "fusedsl/models/transformer.hpp"
#include "fusedsl/plan/report.hpp"

namespace fd = fusedsl;

template <class Model>
void report(const char* name, bool json) {
  constexpr auto p = Model::program;
  constexpr fd::plan::memory_stats s = p.stats();
  if (json) std::cout << fd::plan::to_json(s, name) << "\n";
  else std::cout << fd::plan::to_text(s, name) << "\n";
}

int main(int argc, char** argv) {
  const bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  const bool dot = argc > 1 && std::strcmp(argv[1], "--dot") == 0;
  constexpr auto seed = fd::models::seed::program;
  if (dot) {
    std::cout << fd::plan::plan_to_dot(seed.graph, seed.fusion);
    return 0;
  }
  report<fd::models::seed>("seed", json);
  report<fd::models::medium>("medium", json);
  if (!json) std::cout << fd::plan::print_plan(seed.graph, seed.fusion, seed.memory);
  return 0;
}
