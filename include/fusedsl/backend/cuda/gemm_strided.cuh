#pragma once
// C = epilogue(A B) for GEMMs the tiled kernels of gemm.cuh do not take: any M, N, K (tails are
// predicated: loads beyond an edge read zero, stores beyond it are skipped), A and B read through
// strided views (a transposed A, a B of any strides), a batch of products in one launch (grid z),
// and operands of any dtype. Two kernels:
//   tensor cores   A and B both bf16 or both f16: 64x64x32 block tiles, 4 warps of 32x32, the
//                  operands staged through registers into shared memory, mma.sync m16n8k16 with
//                  ldmatrix fragments (the layout of gemm.cuh's mma main loop), f32 accumulation;
//   CUDA cores     anything else (f32, or mixed dtypes): exact f32 FMAs, 64x64 tiles, 4x4 outputs
//                  per thread.
// Ops describes the launch (codegen.cuh's gemm_operands: sizes, strides, batch offsets), Epi the
// epilogue (codegen.cuh's gemm_epilogue: `apply`, `out_dtype`, `batch`). C is contiguous
// [batch, M, N] of Epi::out_dtype. gemm.cuh's exact f32 path is the CUDA-core kernel too.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <fusedsl/backend/cuda/device_math.cuh>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <fusedsl/backend/cuda/ptx.cuh>

namespace fusedsl::cuda {

namespace detail {

inline constexpr int strided_tc_threads = 128;
inline constexpr int strided_f32_threads = 256;

// Calls f(r, c) for this thread's elements of a Rows x Cols tile loaded by Threads threads:
// consecutive threads walk the columns when they are the operand's unit-stride axis (ColsUnit),
// else the rows, so that global reads coalesce.
template <int Rows, int Cols, int Threads, bool ColsUnit, class F>
__device__ inline void for_tile(int tid, F f) {
#pragma unroll
  for (int s = 0; s < Rows * Cols / Threads; ++s) {
    const int e = tid + s * Threads;
    if constexpr (ColsUnit)
      f(e / Cols, e % Cols);
    else
      f(e % Rows, e / Rows);
  }
}

// Tensor cores: block tile 64 x 64 x 32, warps 2 x 2 of 32 x 32.
template <class Ops, dtype T, class Epi>
__global__ void __launch_bounds__(strided_tc_threads)
    gemm_strided_tc_kernel(const std::uint16_t* __restrict__ a, const std::uint16_t* __restrict__ b,
                           void* __restrict__ c, Epi epi) {
  using In = storage_t<T>;
  constexpr int BM = 64, BN = 64, BK = 32, WM = 32, WN = 32, MT = WM / 16, NT = WN / 8;
  constexpr int LDA = BK + 8, LDB = BN + 8;  // +16 bytes: ldmatrix rows hit distinct banks
  constexpr long M = Ops::m, N = Ops::n, K = Ops::k;
  __shared__ __align__(16) std::uint16_t as[BM * LDA];
  __shared__ __align__(16) std::uint16_t bs[BK * LDB];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = warp / 2, wn = warp % 2;
  const long row0 = static_cast<long>(blockIdx.y) * BM, col0 = static_cast<long>(blockIdx.x) * BN;

  for (long z = blockIdx.z; z < Ops::batches; z += gridDim.z) {
    const std::uint16_t* az = a + Ops::a_batch(z);
    const std::uint16_t* bz = b + Ops::b_batch(z);
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

    for (long k0 = 0; k0 < K; k0 += BK) {
      for_tile<BM, BK, strided_tc_threads, Ops::a_ks == 1>(tid, [&](int r, int kk) {
        const long gr = row0 + r, gk = k0 + kk;
        as[r * LDA + kk] = (gr < M && gk < K) ? az[gr * Ops::a_rs + gk * Ops::a_ks] : 0;
      });
      for_tile<BK, BN, strided_tc_threads, Ops::b_ns == 1>(tid, [&](int kk, int cc) {
        const long gk = k0 + kk, gc = col0 + cc;
        bs[kk * LDB + cc] = (gk < K && gc < N) ? bz[gk * Ops::b_ks + gc * Ops::b_ns] : 0;
      });
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) {
        std::uint32_t af[MT][4], bf[NT][2];
#pragma unroll
        for (int i = 0; i < MT; ++i)
          ptx::ldmatrix_x4(af[i], as + (wm * WM + i * 16 + lane % 16) * LDA + kk + (lane / 16) * 8);
#pragma unroll
        for (int j = 0; j < NT; j += 2) {
          std::uint32_t q[4];
          ptx::ldmatrix_x4_trans(q, bs + (kk + lane % 8 + 8 * ((lane / 8) % 2)) * LDB + wn * WN +
                                        j * 8 + 8 * (lane / 16));
          bf[j][0] = q[0], bf[j][1] = q[1], bf[j + 1][0] = q[2], bf[j + 1][1] = q[3];
        }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j) ptx::mma_16816<In>(acc[i][j], af[i], bf[j]);
      }
      __syncthreads();  // every warp is done with the tiles before they are refilled
    }

    // Lane holds columns 2t, 2t+1 of rows g and g+8 of each 16 x 8 tile.
    Epi e = epi;
    e.batch = z;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const long row = row0 + wm * WM + i * 16 + g + 8 * (q / 2);
          const long col = col0 + wn * WN + j * 8 + 2 * t + q % 2;
          if (row < M && col < N)
            store_f32<Epi::out_dtype>(
                c, z * M * N + row * N + col,
                e.apply(acc[i][j][q], static_cast<int>(row), static_cast<int>(col), int(N)));
        }
  }
}

// CUDA cores: exact f32, block tile 64 x 64 x 16, 4 x 4 outputs per thread.
template <class Ops, dtype TA, dtype TB, class Epi>
__global__ void __launch_bounds__(strided_f32_threads)
    gemm_strided_f32_kernel(const void* __restrict__ a, const void* __restrict__ b,
                            void* __restrict__ c, Epi epi) {
  constexpr int BM = 64, BN = 64, BK = 16, T = strided_f32_threads;
  constexpr long M = Ops::m, N = Ops::n, K = Ops::k;
  __shared__ float as[BK][BM + 1];
  __shared__ float bs[BK][BN];
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const long row0 = static_cast<long>(blockIdx.y) * BM, col0 = static_cast<long>(blockIdx.x) * BN;

  for (long z = blockIdx.z; z < Ops::batches; z += gridDim.z) {
    const long ao = Ops::a_batch(z), bo = Ops::b_batch(z);
    float acc[4][4] = {};
    for (long k0 = 0; k0 < K; k0 += BK) {
      for_tile<BM, BK, T, Ops::a_ks == 1>(tid, [&](int r, int kk) {
        const long gr = row0 + r, gk = k0 + kk;
        as[kk][r] =
            (gr < M && gk < K) ? load_f32<TA>(a, ao + gr * Ops::a_rs + gk * Ops::a_ks) : 0.0f;
      });
      for_tile<BK, BN, T, Ops::b_ns == 1>(tid, [&](int kk, int cc) {
        const long gk = k0 + kk, gc = col0 + cc;
        bs[kk][cc] =
            (gk < K && gc < N) ? load_f32<TB>(b, bo + gk * Ops::b_ks + gc * Ops::b_ns) : 0.0f;
      });
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
    Epi e = epi;
    e.batch = z;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long row = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
        if (row < M && col < N)
          store_f32<Epi::out_dtype>(
              c, z * M * N + row * N + col,
              e.apply(acc[i][j], static_cast<int>(row), static_cast<int>(col), int(N)));
      }
  }
}

inline dim3 strided_grid(long m, long n, long batches) {
  return dim3(static_cast<unsigned>((n + 63) / 64), static_cast<unsigned>((m + 63) / 64),
              static_cast<unsigned>(batches < 65535 ? batches : 65535));
}

}  // namespace detail

// Whether gemm_strided runs on tensor cores for these operand dtypes.
constexpr bool strided_on_tensor_cores(dtype a, dtype b) {
  return a == b && (a == dtype::bf16 || a == dtype::f16);
}

// One launch of the GEMM that Ops describes: a and b point at the operands' buffers (Ops adds
// the view offsets), c at the contiguous output.
template <class Ops, dtype TA, dtype TB, class Epi>
void gemm_strided(cudaStream_t stream, const void* a, const void* b, void* c, const Epi& epi) {
  static_assert(Ops::m > 0 && Ops::n > 0 && Ops::k > 0, "gemm_strided: sizes must be positive");
  static_assert((Ops::m + 63) / 64 <= 65535, "gemm_strided: M above 65535 x 64 rows");
  const dim3 grid = detail::strided_grid(Ops::m, Ops::n, Ops::batches);
  if constexpr (strided_on_tensor_cores(TA, TB)) {
    detail::gemm_strided_tc_kernel<Ops, TA, Epi><<<grid, detail::strided_tc_threads, 0, stream>>>(
        static_cast<const std::uint16_t*>(a) + Ops::a_offset,
        static_cast<const std::uint16_t*>(b) + Ops::b_offset, c, epi);
    check_launch("gemm_strided_tc_kernel");
  } else {
    detail::gemm_strided_f32_kernel<Ops, TA, TB, Epi>
        <<<grid, detail::strided_f32_threads, 0, stream>>>(
            static_cast<const char*>(a) + Ops::a_offset * size_of(TA),
            static_cast<const char*>(b) + Ops::b_offset * size_of(TB), c, epi);
    check_launch("gemm_strided_f32_kernel");
  }
}

}  // namespace fusedsl::cuda
