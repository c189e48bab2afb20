#pragma once
// Loop-fusion kernels: one launch evaluates a whole fused elementwise group over a compile-time
// element count. The group is a device functor; intermediates stay in registers.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <fusedsl/backend/cuda/epilogue.cuh>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>

namespace fusedsl::cuda {

namespace detail {
inline constexpr int loop_threads = 256;

template <long N>
constexpr unsigned loop_blocks() {
  // Enough blocks to cover N once, capped: the grid-stride loop covers the rest.
  constexpr long wanted = (N + loop_threads - 1) / loop_threads;
  return static_cast<unsigned>(wanted < 65535 * 4 ? wanted : 65535 * 4);
}
}  // namespace detail

// body(i) for every i in [0, N): body reads its operands at i and writes its result.
template <long N, class Body>
__global__ void __launch_bounds__(detail::loop_threads) loop_kernel(Body body) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < N;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    body(i);
}

// out[i] = Out(f(float(in[i])...)): the common shape of a fused elementwise group. launch_map uses
// the 16-byte vectorised form below when N is a multiple of 8 and every pointer is aligned.
template <long N, class F, storage_type Out, storage_type... In>
__global__ void __launch_bounds__(detail::loop_threads)
    map_kernel(F f, Out* __restrict__ out, const In* __restrict__... in) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < N;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    out[i] = from_f32<Out>(f(to_f32(in[i])...));
}

namespace detail {
template <storage_type T>
struct vec8 {
  alignas(16) T v[8];
};
template <storage_type T>
__device__ inline vec8<T> load8(const T* p) {
  vec8<T> r;
#pragma unroll
  for (int q = 0; q < static_cast<int>(sizeof(T)) / 2; ++q)
    reinterpret_cast<uint4*>(r.v)[q] = reinterpret_cast<const uint4*>(p)[q];
  return r;
}
}  // namespace detail

// The same group, 8 elements per step, 16-byte loads and stores (all pointers 16-byte aligned).
template <long N, class F, storage_type Out, storage_type... In>
__global__ void __launch_bounds__(detail::loop_threads)
    map_kernel_vec8(F f, Out* __restrict__ out, const In* __restrict__... in) {
  static_assert(N % 8 == 0, "map_kernel_vec8: N must be a multiple of 8");
  for (long c = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; c < N / 8;
       c += static_cast<long>(gridDim.x) * blockDim.x) {
    detail::vec8<Out> o;
    [&](const auto&... x) {
#pragma unroll
      for (int e = 0; e < 8; ++e) o.v[e] = from_f32<Out>(f(to_f32(x.v[e])...));
    }(detail::load8(in + c * 8)...);
#pragma unroll
    for (int q = 0; q < static_cast<int>(sizeof(Out)) / 2; ++q)
      reinterpret_cast<uint4*>(out + c * 8)[q] = reinterpret_cast<const uint4*>(o.v)[q];
  }
}

template <long N, class Body>
void launch_loop(cudaStream_t stream, Body body) {
  static_assert(N > 0, "launch_loop: the element count must be positive");
  loop_kernel<N, Body><<<detail::loop_blocks<N>(), detail::loop_threads, 0, stream>>>(body);
  check_launch("loop_kernel");
}

template <long N, class F, storage_type Out, storage_type... In>
void launch_map(cudaStream_t stream, F f, Out* out, const In*... in) {
  static_assert(N > 0, "launch_map: the element count must be positive");
  static_assert(sizeof...(In) > 0, "launch_map: needs at least one input");
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if constexpr (N % 8 == 0) {
    if ((aligned(out) && ... && aligned(in))) {
      map_kernel_vec8<N, F, Out, In...>
          <<<detail::loop_blocks<N / 8>(), detail::loop_threads, 0, stream>>>(f, out, in...);
      check_launch("map_kernel_vec8");
      return;
    }
  }
  map_kernel<N, F, Out, In...>
      <<<detail::loop_blocks<N>(), detail::loop_threads, 0, stream>>>(f, out, in...);
  check_launch("map_kernel");
}

// Building blocks for fused groups; each is a plain functor over f32.
namespace ops {
struct add {
  __host__ __device__ float operator()(float a, float b) const { return a + b; }
};
struct mul {
  __host__ __device__ float operator()(float a, float b) const { return a * b; }
};
struct scale {
  float factor;
  __host__ __device__ float operator()(float a) const { return factor * a; }
};
// An elementwise unary op of the op table (graph/ops.hpp).
template <graph::op_kind K>
struct unary {
  __host__ __device__ float operator()(float a) const { return apply_op<K>(a); }
};
// outer(inner(x...)): chains a unary step after any group.
template <class Outer, class Inner>
struct then {
  Inner inner;
  Outer outer;
  template <class... X>
  __host__ __device__ float operator()(X... x) const {
    return outer(inner(x...));
  }
};
}  // namespace ops

}  // namespace fusedsl::cuda
