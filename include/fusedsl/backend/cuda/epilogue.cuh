#pragma once
// The GEMM's fused epilogue: out[r, c] = cast<Out>(act(scale * acc + bias[c]) + residual[r, c]),
// act an elementwise unary op of the op table (graph/ops.hpp) on the device math policy, or none.
// (The executor's GEMMs take generated epilogues instead: codegen.cuh's gemm_epilogue.)

#include <fusedsl/backend/cuda/device_math.cuh>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <type_traits>

namespace fusedsl::cuda {

// An activation named by the op table: `op<op_kind::gelu_erf>`; `void` for none.
template <graph::op_kind K>
using op = std::integral_constant<graph::op_kind, K>;

// y = Act(x), or x when Act is void.
template <class Act>
__host__ __device__ inline float activate(float x) {
  if constexpr (std::is_void_v<Act>)
    return x;
  else
    return apply_op<Act::value>(x);
}

// Compile-time choice of the fused steps; the pointers and the scale arrive at run time.
template <storage_type Out, class Act = void, bool Bias = false, bool Residual = false>
struct epilogue {
  using out_type = Out;
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
