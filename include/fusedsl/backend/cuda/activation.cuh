#pragma once
// Pointwise activations shared by the loop kernels and the GEMM epilogue.

namespace fusedsl::cuda {

enum class activation { none, relu, gelu, silu };

// gelu is the exact erf form, x * Phi(x) (Hendrycks & Gimpel 2016, eq. 1), computed as
// x/2 erfc(-x / sqrt 2): x/2 (1 + erf(x / sqrt 2)) cancels for negative x (6.5e5 ulp at x = -5 in
// float); silu is x * sigmoid(x).
template <activation A>
__host__ __device__ inline float activate(float x) {
  if constexpr (A == activation::none)
    return x;
  else if constexpr (A == activation::relu)
    return x > 0.0f ? x : 0.0f;
  else if constexpr (A == activation::gelu)
    return 0.5f * x * erfcf(x * -0.70710678118654752f);
  else
    return x / (1.0f + expf(-x));
}

inline constexpr const char* activation_name(activation a) {
  switch (a) {
    case activation::none:
      return "none";
    case activation::relu:
      return "relu";
    case activation::gelu:
      return "gelu";
    case activation::silu:
      return "silu";
  }
  return "?";
}

}  // namespace fusedsl::cuda
