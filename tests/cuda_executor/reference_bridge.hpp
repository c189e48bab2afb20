#pragma once
// The Eigen reference backend behind a plain function, compiled by the host compiler, so that the
// CUDA test translation unit does not pass Eigen through nvcc.
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "fusedsl/core/tensor.hpp"
#include "fusedsl/graph/node.hpp"

namespace fusedsl::test {

std::vector<dynamic_tensor> run_reference(
    const graph::graph_view& g, std::span<const std::pair<std::string_view, tensor_ref>> bindings);

}  // namespace fusedsl::test
