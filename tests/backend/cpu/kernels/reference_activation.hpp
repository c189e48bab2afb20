#pragma once
// The activations of the GEMM epilogue in double, for reference results.
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusedsl/graph/ops.hpp"

namespace fusedsl_test {

// The GEMM epilogue's activations: none, or an `activation` row of the op table (every one of them,
// read from the table).
inline const std::vector<std::optional<fusedsl::graph::op_kind>> all_activations = [] {
  std::vector<std::optional<fusedsl::graph::op_kind>> r{std::nullopt};
  for (const fusedsl::graph::op_info& o : fusedsl::graph::op_infos)
    if (fusedsl::graph::is_gemm_activation(o.kind)) r.push_back(o.kind);
  return r;
}();

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
    default:  // an activation without a formula here fails the test that uses it
      throw std::logic_error("reference_activation: no formula for " +
                             std::string(fusedsl::graph::name_of(*act)));
  }
}

}  // namespace fusedsl_test
