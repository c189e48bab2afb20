#pragma once
// The activations of the GEMM epilogue in double, for reference results.
#include <cmath>
#include <optional>

#include "fusedsl/graph/ops.hpp"

namespace fusedsl_test {

// The GEMM epilogue's activations: none, or a unary op of the op table.
inline const std::optional<fusedsl::graph::op_kind> all_activations[] = {
    std::nullopt,
    fusedsl::graph::op_kind::relu,
    fusedsl::graph::op_kind::gelu_erf,
    fusedsl::graph::op_kind::gelu_tanh,
    fusedsl::graph::op_kind::silu,
    fusedsl::graph::op_kind::sigmoid};

inline const char* name_of(std::optional<fusedsl::graph::op_kind> act) {
  return act ? fusedsl::graph::name_of(*act).data() : "none";
}

inline double reference_activation(std::optional<fusedsl::graph::op_kind> act, double x) {
  using fusedsl::graph::op_kind;
  if (!act) return x;
  switch (*act) {
    case op_kind::relu:
      return x < 0 ? 0 : x;
    case op_kind::gelu_erf:  // Hendrycks & Gimpel 2016, eq. 1
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case op_kind::gelu_tanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case op_kind::silu:
      return x / (1 + std::exp(-x));
    case op_kind::sigmoid:
      return 1 / (1 + std::exp(-x));
    case op_kind::tanh:
      return std::tanh(x);
    default:
      return x;
  }
}

}  // namespace fusedsl_test
