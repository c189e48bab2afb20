#pragma once
// Warp-level row kernels: one warp owns one row of a [Rows, Cols] row-major tensor, keeps the row
// in registers and reduces with shuffles, so each element is read once and written once.

#include <cuda_runtime_api.h>

#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>

namespace fusedsl::cuda {

enum class row_op { softmax, log_softmax, layernorm, rmsnorm };

struct row_params {
  float eps = 1e-5f;            // layernorm, rmsnorm
  const void* gamma = nullptr;  // [Cols] of the output type: layernorm, rmsnorm
  const void* beta = nullptr;   // [Cols] of the output type: layernorm
};

namespace detail {
inline constexpr int row_warps = 4;

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
}  // namespace detail

template <row_op Op, int Rows, int Cols, storage_type In, storage_type Out>
__global__ void __launch_bounds__(detail::row_warps * 32)
    row_kernel(const In* __restrict__ in, Out* __restrict__ out, row_params p) {
  constexpr int per_lane = (Cols + 31) / 32;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int row =
      static_cast<int>(blockIdx.x) * detail::row_warps + static_cast<int>(threadIdx.x) / 32;
  if (row >= Rows) return;
  const In* x = in + static_cast<long>(row) * Cols;
  Out* y = out + static_cast<long>(row) * Cols;

  float v[per_lane];
#pragma unroll
  for (int j = 0; j < per_lane; ++j) {
    const int c = lane + 32 * j;
    // Padding lanes hold the identity of the reduction that follows (-inf for max, 0 for sums).
    const float pad = (Op == row_op::softmax || Op == row_op::log_softmax) ? -INFINITY : 0.0f;
    v[j] = (Cols % 32 == 0 || c < Cols) ? to_f32(x[c]) : pad;
  }

  if constexpr (Op == row_op::softmax || Op == row_op::log_softmax) {
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < per_lane; ++j) m = fmaxf(m, v[j]);
    m = detail::warp_max(m);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < per_lane; ++j) s += __expf(v[j] - m);
    s = detail::warp_sum(s);
    const float inv = 1.0f / s, log_s = __logf(s);
#pragma unroll
    for (int j = 0; j < per_lane; ++j) {
      const int c = lane + 32 * j;
      if (Cols % 32 == 0 || c < Cols) {
        if constexpr (Op == row_op::softmax)
          y[c] = from_f32<Out>(__expf(v[j] - m) * inv);
        else
          y[c] = from_f32<Out>(v[j] - m - log_s);
      }
    }
  } else {
    const Out* gamma = static_cast<const Out*>(p.gamma);
    float mean = 0.0f;
    if constexpr (Op == row_op::layernorm) {
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < per_lane; ++j) s += v[j];
      mean = detail::warp_sum(s) / Cols;
    }
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < per_lane; ++j) {
      const int c = lane + 32 * j;
      const float d = (Cols % 32 == 0 || c < Cols) ? v[j] - mean : 0.0f;
      sq += d * d;
    }
    const float rstd = rsqrtf(detail::warp_sum(sq) / Cols + p.eps);
#pragma unroll
    for (int j = 0; j < per_lane; ++j) {
      const int c = lane + 32 * j;
      if (Cols % 32 == 0 || c < Cols) {
        float r = (v[j] - mean) * rstd * to_f32(gamma[c]);
        if constexpr (Op == row_op::layernorm) r += to_f32(static_cast<const Out*>(p.beta)[c]);
        y[c] = from_f32<Out>(r);
      }
    }
  }
}

template <row_op Op, int Rows, int Cols, storage_type In, storage_type Out>
void launch_row(cudaStream_t stream, const In* in, Out* out, row_params p = {}) {
  static_assert(Rows > 0 && Cols > 0, "launch_row: the shape must be positive");
  static_assert(Cols <= 4096,
                "launch_row: a row longer than 4096 does not fit one warp's registers");
  if constexpr (Op == row_op::layernorm || Op == row_op::rmsnorm) {
    if (p.gamma == nullptr) throw std::invalid_argument("launch_row: normalisation needs gamma");
    if (Op == row_op::layernorm && p.beta == nullptr)
      throw std::invalid_argument("launch_row: layernorm needs beta");
  }
  constexpr unsigned blocks = (Rows + detail::row_warps - 1) / detail::row_warps;
  row_kernel<Op, Rows, Cols, In, Out><<<blocks, detail::row_warps * 32, 0, stream>>>(in, out, p);
  check_launch("row_kernel");
}

}  // namespace fusedsl::cuda
