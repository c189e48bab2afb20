#pragma once
// The GEMM's fused epilogue: out[r, c] = cast<Out>(act(scale * acc + bias[c]) + residual[r, c]).

#include <fusedsl/backend/cuda/activation.cuh>
#include <fusedsl/backend/cuda/numeric.cuh>

namespace fusedsl::cuda {

// Compile-time choice of the fused steps; the pointers and the scale arrive at run time.
template <storage_type Out, activation Act = activation::none, bool Bias = false,
          bool Residual = false>
struct epilogue {
  using out_type = Out;
  static constexpr activation act = Act;
  static constexpr bool has_bias = Bias;
  static constexpr bool has_residual = Residual;

  float scale = 1.0f;
  const Out* bias = nullptr;      // [N], read when has_bias
  const Out* residual = nullptr;  // [M, N] row-major, read when has_residual

  __host__ __device__ float apply(float acc, int row, int col, int ld) const {
    float v = scale * acc;
    if constexpr (Bias) v += to_f32(bias[col]);
    v = activate<Act>(v);
    if constexpr (Residual) v += to_f32(residual[static_cast<long>(row) * ld + col]);
    return v;
  }
};

}  // namespace fusedsl::cuda
