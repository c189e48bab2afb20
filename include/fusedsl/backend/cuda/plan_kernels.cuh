#pragma once
// Kernels for the loop, reduce and row groups of a program, generated from their descriptors
// (codegen.cuh): each thread evaluates the group's code at its points, straight-line, in
// registers. The split of a reduction or a row over threads is a template argument that the
// executor's plan chooses (executor_plan.hpp), and the order in which partial results combine is
// fixed (per thread in index order, a butterfly within each warp, then warps in order), so a
// result does not depend on timing and the host emulation reproduces it. Update groups (dynamic
// update slices) copy elements, one per thread.
#include <cuda_runtime_api.h>

#include <fusedsl/backend/cuda/codegen.cuh>
#include <fusedsl/backend/cuda/error.hpp>

namespace fusedsl::cuda {

namespace detail {

inline constexpr int group_block = 256;  // threads per block of the loop and reduce kernels

inline unsigned grid_for(long items, long per_block) {
  const long blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 8 * 65535 ? (blocks > 0 ? blocks : 1) : 8 * 65535);
}

// Lane l's value from lane l ^ o (a float, or argmax's value and position).
__device__ inline float shfl_xor(float v, int o) {
  return __shfl_xor_sync(0xffffffffu, v, o);
}
__device__ inline gen::arg_best shfl_xor(gen::arg_best v, int o) {
  return gen::arg_best{shfl_xor(v.value, o), shfl_xor(v.at, o)};
}

// Every lane of the warp gets combine over the warp's 32 values (xor butterfly: lanes l and
// l ^ o combine their values, o = 16, 8, 4, 2, 1).
template <class T, class Combine>
__device__ inline T warp_allreduce(T v, Combine combine) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = combine(v, shfl_xor(v, o));
  return v;
}

// Every thread of the block gets combine over the block's values: the warps' butterflies, then
// the warps' results in warp order. `scratch` holds one value per warp.
template <int Threads, class T, class Combine>
__device__ inline T block_allreduce(T v, Combine combine, T* scratch) {
  v = warp_allreduce(v, combine);
  if constexpr (Threads > 32) {
    const int warp = static_cast<int>(threadIdx.x) / 32;
    __syncthreads();  // earlier readers of scratch are done
    if (threadIdx.x % 32 == 0) scratch[warp] = v;
    __syncthreads();
    v = scratch[0];
#pragma unroll
    for (int w = 1; w < Threads / 32; ++w) v = combine(v, scratch[w]);
  }
  return v;
}

}  // namespace detail

// ---- loop groups: one element per thread (grid-stride) ----

template <class Desc>
__global__ void __launch_bounds__(detail::group_block) loop_group_kernel(gen::access_ptrs ptr) {
  using G = gen::loop_group<Desc>;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < G::size;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    G::element(ptr, i);
}

template <class Desc>
void launch_loop_group(cudaStream_t stream, const gen::access_ptrs& ptr) {
  constexpr long n = gen::loop_group<Desc>::size;
  loop_group_kernel<Desc>
      <<<detail::grid_for(n, detail::group_block), detail::group_block, 0, stream>>>(ptr);
  check_launch("loop_group_kernel");
}

// ---- reduce groups: Lanes threads per output (1, 32 or 256) ----

template <class Desc, int Lanes>
__global__ void __launch_bounds__(detail::group_block) reduce_group_kernel(gen::access_ptrs ptr) {
  using G = gen::reduce_group<Desc>;
  using C = typename G::carry;  // a float, or argmax's (value, position)
  __shared__ C scratch[detail::group_block / 32];
  const auto combine = [](C a, C b) { return G::combine(a, b); };
  constexpr int per_block = detail::group_block / Lanes;  // outputs per block
  const long lane = static_cast<long>(threadIdx.x) % Lanes;
  // Every thread of a block runs the same number of rounds (block_allreduce synchronises).
  for (long base = static_cast<long>(blockIdx.x) * per_block; base < G::outputs;
       base += static_cast<long>(gridDim.x) * per_block) {
    const long o = base + static_cast<long>(threadIdx.x) / Lanes;
    C acc = o < G::outputs ? G::partial(ptr, o, lane, Lanes) : G::identity();
    if constexpr (Lanes == 32)
      acc = detail::warp_allreduce(acc, combine);
    else if constexpr (Lanes > 32)
      acc = detail::block_allreduce<Lanes>(acc, combine, scratch);
    if (lane == 0 && o < G::outputs) G::store(ptr, o, acc);
  }
}

template <class Desc, int Lanes>
void launch_reduce_group(cudaStream_t stream, const gen::access_ptrs& ptr) {
  static_assert(Lanes == 1 || Lanes == 32 || Lanes == detail::group_block,
                "launch_reduce_group: 1, 32 or 256 threads per output");
  constexpr long outputs = gen::reduce_group<Desc>::outputs;
  reduce_group_kernel<Desc, Lanes>
      <<<detail::grid_for(outputs, detail::group_block / Lanes), detail::group_block, 0, stream>>>(
          ptr);
  check_launch("reduce_group_kernel");
}

// ---- row groups: Threads threads per row (a warp, or a block of 256 or 512) ----
// Cached: each thread keeps its columns' inputs in registers between the passes; otherwise every
// pass evaluates the prologue again (rows too long for registers, e.g. a vocabulary softmax).

template <class Desc, int Threads, bool Cached>
__global__ void __launch_bounds__(Threads < 128 ? 128 : Threads)
    row_group_kernel(gen::access_ptrs ptr) {
  using G = gen::row_group<Desc>;
  constexpr int block = Threads < 128 ? 128 : Threads;
  constexpr int rows_per_block = block / Threads;
  constexpr long cols = G::cols;
  constexpr int per_thread = int((cols + Threads - 1) / Threads);
  constexpr int last = G::last;
  __shared__ float scratch[block / 32];
  const int t = static_cast<int>(threadIdx.x) % Threads;
  const auto comb_a = [](float x, float y) { return G::combine_a(x, y); };
  const auto comb_b = [](float x, float y) { return G::combine_b(x, y); };
  for (long base = static_cast<long>(blockIdx.x) * rows_per_block; base < G::rows;
       base += static_cast<long>(gridDim.x) * rows_per_block) {
    const long r = base + static_cast<long>(threadIdx.x) / Threads;
    if (Threads == 32 && r >= G::rows) break;        // a warp alone owns its row
    const long row = r < G::rows ? r : G::rows - 1;  // idle rows of a block repeat the last one
    gen::point p = G::row_point(row);
    // f(k, j) for this thread's columns j = t + k * Threads: unrolled when the inputs stay in
    // registers (v[k] then names a register), a plain loop when every pass evaluates them again.
    const auto each = [&](auto&& f) {
      if constexpr (Cached) {
#pragma unroll
        for (int k = 0; k < per_thread; ++k) {
          const long j = t + static_cast<long>(k) * Threads;
          if (j < cols) f(k, j);
        }
      } else {
#pragma unroll 1
        for (long j = t; j < cols; j += Threads) f(0, j);
      }
    };
    float v[Cached ? per_thread : 1] = {};
    const auto x_at = [&](int k, long j) {
      if constexpr (Cached) {
        return v[k];
      } else {
        p.i[last] = j;
        return G::input(ptr, p);
      }
    };
    if constexpr (Cached) {
      each([&](int k, long j) {
        p.i[last] = j;
        v[k] = G::input(ptr, p);
      });
    }
    float a = G::identity_a();
    each([&](int k, long j) { a = G::add_a(a, x_at(k, j)); });
    a = detail::block_allreduce<Threads>(a, comb_a, scratch);
    float b = 0.0f;
    if constexpr (G::has_b) {
      const float c = G::centre(a);
      each([&](int k, long j) { b = G::add_b(b, x_at(k, j), c); });
      b = detail::block_allreduce<Threads>(b, comb_b, scratch);
    }
    const typename G::scalars s = G::finish(a, b);
    if (r < G::rows) {
      each([&](int k, long j) {
        const float x = x_at(k, j);
        p.i[last] = j;
        G::store(ptr, p, x, s);
      });
    }
  }
}

template <class Desc, int Threads, bool Cached>
void launch_row_group(cudaStream_t stream, const gen::access_ptrs& ptr) {
  static_assert(Threads == 32 || Threads == 256 || Threads == 512,
                "launch_row_group: a warp, or a block of 256 or 512 threads, per row");
  constexpr int block = Threads < 128 ? 128 : Threads;
  row_group_kernel<Desc, Threads, Cached>
      <<<detail::grid_for(gen::row_group<Desc>::rows, block / Threads), block, 0, stream>>>(ptr);
  check_launch("row_group_kernel");
}

// ---- update groups: a dynamic update slice, one element per thread (grid-stride) ----

template <int Bytes, long Outer, long Extent, long Len, long Inner>
__global__ void __launch_bounds__(detail::group_block) update_slice_kernel(gen::update_args a) {
  using U = gen::update_slice<Bytes, Outer, Extent, Len, Inner>;
  const long s = U::start(a), n = U::size(a);
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    U::element(a, s, i);
}

template <int Bytes, long Outer, long Extent, long Len, long Inner>
void launch_update_slice(cudaStream_t stream, const gen::update_args& a) {
  const long n = gen::update_slice<Bytes, Outer, Extent, Len, Inner>::size(a);
  update_slice_kernel<Bytes, Outer, Extent, Len, Inner>
      <<<detail::grid_for(n, detail::group_block), detail::group_block, 0, stream>>>(a);
  check_launch("update_slice_kernel");
}

}  // namespace fusedsl::cuda
