#pragma once
// The activations of the GEMM epilogue in double, for reference results.
#include <cmath>

#include "fusedsl/backend/cpu/kernels/vmath.hpp"

namespace fusedsl_test {

inline double reference_activation(fusedsl::cpu::kernels::activation act, double x) {
  using fusedsl::cpu::kernels::activation;
  switch (act) {
    case activation::none:
      return x;
    case activation::relu:
      return x < 0 ? 0 : x;
    case activation::gelu_erf:  // Hendrycks & Gimpel 2016, eq. 1
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case activation::gelu_tanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case activation::silu:
      return x / (1 + std::exp(-x));
    case activation::sigmoid:
      return 1 / (1 + std::exp(-x));
  }
  return x;
}

}  // namespace fusedsl_test
