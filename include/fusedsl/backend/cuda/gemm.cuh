#pragma once
// C[M,N] = epilogue(A[M,K] * B[K,N]), all row-major, every size a compile-time constant.
// Tensor-core path (WMMA, f32 accumulation) for bf16/f16, and for f32 as TF32 on request;
// an exact f32 CUDA-core path for any shape. The epilogue runs on the accumulators before the
// single store, so bias, scale, activation, residual and the output cast cost no extra pass.

#include <fusedsl/backend/cuda/epilogue.cuh>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <fusedsl/backend/cuda/ptx.cuh>

#include <cuda_runtime_api.h>
#include <mma.h>

#include <cstdint>

namespace fusedsl::cuda {

enum class gemm_math { tensor_core, tf32, cuda_core };

// Block tile BM x BN x BK, warp tile WM x WN, Stages deep cp.async pipeline.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int Stages_>
struct gemm_tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, stages = Stages_;
  static constexpr int warps = (BM / WM) * (BN / WN);
  static constexpr int threads = warps * 32;
};

namespace detail {

template <storage_type In>
struct wmma_shape {
  static constexpr int k = std::same_as<In, float> ? 8 : 16;  // m16n16k8 for TF32, m16n16k16 otherwise
  using element = std::conditional_t<std::same_as<In, float>, nvcuda::wmma::precision::tf32, In>;
};

template <storage_type In, class Tile>
struct tc_layout {
  static constexpr int pad = 16 / static_cast<int>(sizeof(In));  // one 16-byte step per row: no bank aliasing
  static constexpr int lda = Tile::BK + pad;
  static constexpr int ldb = Tile::BN + pad;
  static constexpr int a_elems = Tile::BM * lda;
  static constexpr int b_elems = Tile::BK * ldb;
  static constexpr std::size_t bytes =
      sizeof(In) * Tile::stages * (a_elems + b_elems) + sizeof(float) * Tile::warps * 256;
};

template <storage_type In, class Epi, int M, int N, int K, class Tile>
__global__ void __launch_bounds__(Tile::threads)
    gemm_tc_kernel(const In* __restrict__ a, const In* __restrict__ b, typename Epi::out_type* __restrict__ c,
                   Epi epi) {
  namespace wmma = nvcuda::wmma;
  using L = tc_layout<In, Tile>;
  using Out = typename Epi::out_type;
  constexpr int WK = wmma_shape<In>::k;
  using elem = typename wmma_shape<In>::element;
  constexpr int FM = Tile::WM / 16, FN = Tile::WN / 16;
  constexpr int KT = K / Tile::BK;
  constexpr int vec = 16 / static_cast<int>(sizeof(In));  // elements per 16-byte copy

  extern __shared__ __align__(128) unsigned char smem_raw[];
  In* as = reinterpret_cast<In*>(smem_raw);
  In* bs = as + Tile::stages * L::a_elems;
  float* scratch = reinterpret_cast<float*>(bs + Tile::stages * L::b_elems);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int wm = warp / (Tile::BN / Tile::WN), wn = warp % (Tile::BN / Tile::WN);
  const int row0 = static_cast<int>(blockIdx.y) * Tile::BM, col0 = static_cast<int>(blockIdx.x) * Tile::BN;

  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * Tile::BK;
    In* sa = as + stage * L::a_elems;
    In* sb = bs + stage * L::b_elems;
    constexpr int a_chunks = Tile::BM * Tile::BK / vec;
    for (int i = tid; i < a_chunks; i += Tile::threads) {
      const int r = i / (Tile::BK / vec), k = (i % (Tile::BK / vec)) * vec;
      ptx::cp_async_16(sa + r * L::lda + k, a + static_cast<long>(row0 + r) * K + k0 + k);
    }
    constexpr int b_chunks = Tile::BK * Tile::BN / vec;
    for (int i = tid; i < b_chunks; i += Tile::threads) {
      const int r = i / (Tile::BN / vec), n = (i % (Tile::BN / vec)) * vec;
      ptx::cp_async_16(sb + r * L::ldb + n, b + static_cast<long>(k0 + r) * N + col0 + n);
    }
  };

  wmma::fragment<wmma::accumulator, 16, 16, WK, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

#pragma unroll
  for (int s = 0; s < Tile::stages - 1; ++s) {
    if (s < KT) load_stage(s, s);
    ptx::cp_async_commit();
  }

  for (int kt = 0; kt < KT; ++kt) {
    ptx::cp_async_wait<Tile::stages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt-1 is free to overwrite
    if (kt + Tile::stages - 1 < KT) load_stage((kt + Tile::stages - 1) % Tile::stages, kt + Tile::stages - 1);
    ptx::cp_async_commit();

    const In* sa = as + (kt % Tile::stages) * L::a_elems;
    const In* sb = bs + (kt % Tile::stages) * L::b_elems;
#pragma unroll
    for (int kk = 0; kk < Tile::BK; kk += WK) {
      wmma::fragment<wmma::matrix_a, 16, 16, WK, elem, wmma::row_major> fa[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, WK, elem, wmma::row_major> fb[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i) {
        wmma::load_matrix_sync(fa[i], sa + (wm * Tile::WM + i * 16) * L::lda + kk, L::lda);
        if constexpr (std::same_as<In, float>)
          for (int t = 0; t < fa[i].num_elements; ++t) fa[i].x[t] = wmma::__float_to_tf32(fa[i].x[t]);
      }
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        wmma::load_matrix_sync(fb[j], sb + kk * L::ldb + wn * Tile::WN + j * 16, L::ldb);
        if constexpr (std::same_as<In, float>)
          for (int t = 0; t < fb[j].num_elements; ++t) fb[j].x[t] = wmma::__float_to_tf32(fb[j].x[t]);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
  }
  ptx::cp_async_wait<0>();

  // Epilogue, one 16x16 fragment at a time through this warp's scratch: lane owns 8 consecutive
  // columns of one row, so the store is one 16-byte write (two for f32).
  float* mine = scratch + warp * 256;
  const int r = lane / 2, c8 = (lane % 2) * 8;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(mine, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int row = row0 + wm * Tile::WM + i * 16 + r;
      const int col = col0 + wn * Tile::WN + j * 16 + c8;
      alignas(16) Out out[8];
#pragma unroll
      for (int t = 0; t < 8; ++t) out[t] = from_f32<Out>(epi.apply(mine[r * 16 + c8 + t], row, col + t, N));
      auto* dst = reinterpret_cast<uint4*>(c + static_cast<long>(row) * N + col);
#pragma unroll
      for (int q = 0; q < static_cast<int>(sizeof(out) / 16); ++q) dst[q] = reinterpret_cast<const uint4*>(out)[q];
      __syncwarp();
    }
}

// Exact f32 on CUDA cores: 64x64 block tile, 4x4 outputs per thread, bounds-checked for any shape.
template <class Epi, int M, int N, int K>
__global__ void __launch_bounds__(256)
    gemm_f32_kernel(const float* __restrict__ a, const float* __restrict__ b, typename Epi::out_type* __restrict__ c,
                    Epi epi) {
  constexpr int BM = 64, BN = 64, BK = 16;
  __shared__ float as[BK][BM + 1];
  __shared__ float bs[BK][BN];
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int row0 = static_cast<int>(blockIdx.y) * BM, col0 = static_cast<int>(blockIdx.x) * BN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = tid; e < BM * BK; e += 256) {
      const int rr = e / BK, kk = e % BK;
      as[kk][rr] = (row0 + rr < M && k0 + kk < K) ? a[static_cast<long>(row0 + rr) * K + k0 + kk] : 0.0f;
    }
    for (int e = tid; e < BK * BN; e += 256) {
      const int kk = e / BN, cc = e % BN;
      bs[kk][cc] = (k0 + kk < K && col0 + cc < N) ? b[static_cast<long>(k0 + kk) * N + col0 + cc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
      if (row < M && col < N)
        c[static_cast<long>(row) * N + col] = from_f32<typename Epi::out_type>(epi.apply(acc[i][j], row, col, N));
    }
}

}  // namespace detail

// The block tile for a problem: large tiles when they alone fill the chip, else 64x64.
template <storage_type In, int M, int N>
using default_gemm_tile = std::conditional_t<
    (M % 128 == 0 && N % 128 == 0 && (M / 128) * (N / 128) >= 128),
    gemm_tile<128, 128, std::same_as<In, float> ? 16 : 32, 64, 32, 3>,
    gemm_tile<64, 64, std::same_as<In, float> ? 16 : 32, 32, 32, 3>>;

template <storage_type In>
inline constexpr gemm_math default_gemm_math = std::same_as<In, float> ? gemm_math::cuda_core : gemm_math::tensor_core;

template <int M, int N, int K, storage_type In, class Epi, gemm_math Math = default_gemm_math<In>,
          class Tile = default_gemm_tile<In, M, N>>
void gemm(cudaStream_t stream, const In* a, const In* b, typename Epi::out_type* c, Epi epi) {
  static_assert(M > 0 && N > 0 && K > 0, "gemm: sizes must be positive");
  if constexpr (Math == gemm_math::cuda_core) {
    static_assert(std::same_as<In, float>, "gemm: the CUDA-core path takes f32 operands");
    const dim3 grid((N + 63) / 64, (M + 63) / 64);
    detail::gemm_f32_kernel<Epi, M, N, K><<<grid, 256, 0, stream>>>(a, b, c, epi);
    check_launch("gemm_f32_kernel");
  } else {
    static_assert(Math == gemm_math::tensor_core || std::same_as<In, float>,
                  "gemm: TF32 is an option for f32 operands only");
    static_assert(Math == gemm_math::tf32 || !std::same_as<In, float>,
                  "gemm: f32 operands on tensor cores need gemm_math::tf32");
    static_assert(M % Tile::BM == 0, "gemm: the tensor-core path needs M to be a multiple of the block tile");
    static_assert(N % Tile::BN == 0, "gemm: the tensor-core path needs N to be a multiple of the block tile");
    static_assert(K % Tile::BK == 0, "gemm: the tensor-core path needs K to be a multiple of the block tile");
    using L = detail::tc_layout<In, Tile>;
    auto* kernel = &detail::gemm_tc_kernel<In, Epi, M, N, K, Tile>;
    static const bool configured = [&] {
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(L::bytes)),
            "gemm: raising the shared-memory limit");
      return true;
    }();
    (void)configured;
    const dim3 grid(N / Tile::BN, M / Tile::BM);
    kernel<<<grid, Tile::threads, L::bytes, stream>>>(a, b, c, epi);
    check_launch("gemm_tc_kernel");
  }
}

}  // namespace fusedsl::cuda
