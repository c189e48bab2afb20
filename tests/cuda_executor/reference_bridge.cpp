#include "reference_bridge.hpp"

#include "fusedsl/backend/reference/evaluate.hpp"

namespace fusedsl::test {

std::vector<dynamic_tensor> run_reference(
    const graph::graph_view& g, std::span<const std::pair<std::string_view, tensor_ref>> bindings) {
  return reference::run(g, bindings);
}

}  // namespace fusedsl::test
