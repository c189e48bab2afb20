#pragma once
// C[M,N] = epilogue(A[M,K] * B[K,N]), all row-major, every size a compile-time constant.
// Tensor-core paths with f32 accumulation: mma.sync + ldmatrix for bf16/f16 (the default), WMMA
// for bf16/f16 and for f32 as TF32 on request; an exact f32 CUDA-core path for any shape. The
// epilogue runs on the accumulators before the single store, so bias, scale, activation, residual
// and the output cast cost no extra pass.

#include <cuda_runtime_api.h>
#include <mma.h>

#include <cstdint>
#include <fusedsl/backend/cuda/epilogue.cuh>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/gemm_sm90.cuh>
#include <fusedsl/backend/cuda/gemm_strided.cuh>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <fusedsl/backend/cuda/ptx.cuh>

namespace fusedsl::cuda {

// tensor_core: bf16/f16 on tensor cores, the path chosen at run time: wgmma + TMA
// (gemm_sm90.cuh) on a Hopper device in a build with an sm_90a cubin for shapes that fill the
// chip, else mma.sync m16n8k16. mma / wgmma: that path only (wgmma throws where it cannot run).
// wmma: the WMMA API (bf16/f16); tf32: WMMA on f32 operands rounded to TF32; cuda_core: exact f32.
enum class gemm_math { tensor_core, mma, wgmma, wmma, tf32, cuda_core };

// The operands of G GEMMs that share A and every shape (a horizontal Q/K/V group).
template <class In, class Epi, int G>
struct gemm_siblings {
  const In* b[G];
  typename Epi::out_type* c[G];
  Epi epi[G];
};

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
  static constexpr int k =
      std::same_as<In, float> ? 8 : 16;  // m16n16k8 for TF32, m16n16k16 otherwise
  using element = std::conditional_t<std::same_as<In, float>, nvcuda::wmma::precision::tf32, In>;
};

template <storage_type In, class Tile>
struct tc_layout {
  static constexpr int pad =
      16 / static_cast<int>(sizeof(In));  // one 16-byte step per row: no bank aliasing
  static constexpr int lda = Tile::BK + pad;
  static constexpr int ldb = Tile::BN + pad;
  static constexpr int a_elems = Tile::BM * lda;
  static constexpr int b_elems = Tile::BK * ldb;
  static constexpr std::size_t bytes =
      sizeof(In) * Tile::stages * (a_elems + b_elems) + sizeof(float) * Tile::warps * 256;
};

template <storage_type In, class Epi, int M, int N, int K, class Tile>
__global__ void __launch_bounds__(Tile::threads)
    gemm_tc_kernel(const In* __restrict__ a, const In* __restrict__ b,
                   typename Epi::out_type* __restrict__ c, Epi epi) {
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
  const int row0 = static_cast<int>(blockIdx.y) * Tile::BM,
            col0 = static_cast<int>(blockIdx.x) * Tile::BN;

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
    if (kt + Tile::stages - 1 < KT)
      load_stage((kt + Tile::stages - 1) % Tile::stages, kt + Tile::stages - 1);
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
          for (int t = 0; t < fa[i].num_elements; ++t)
            fa[i].x[t] = wmma::__float_to_tf32(fa[i].x[t]);
      }
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        wmma::load_matrix_sync(fb[j], sb + kk * L::ldb + wn * Tile::WN + j * 16, L::ldb);
        if constexpr (std::same_as<In, float>)
          for (int t = 0; t < fb[j].num_elements; ++t)
            fb[j].x[t] = wmma::__float_to_tf32(fb[j].x[t]);
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
      for (int t = 0; t < 8; ++t)
        out[t] = from_f32<Out>(epi.apply(mine[r * 16 + c8 + t], row, col + t, N));
      auto* dst = reinterpret_cast<uint4*>(c + static_cast<long>(row) * N + col);
#pragma unroll
      for (int q = 0; q < static_cast<int>(sizeof(out) / 16); ++q)
        dst[q] = reinterpret_cast<const uint4*>(out)[q];
      __syncwarp();
    }
}

// The mma.sync main loop shared by the GEMM kernels: a Stages-deep cp.async pipeline of BMxBK A
// and BKxBN B tiles, ldmatrix operand loads, m16n8k16 products into this warp's WMxWN accumulators.
template <half_type In, int N, int K, class Tile>
__device__ inline void mma_mainloop(const In* __restrict__ a, const In* __restrict__ b, int row0,
                                    int col0, unsigned char* smem,
                                    float (&acc)[Tile::WM / 16][Tile::WN / 8][4]) {
  constexpr int LDA = Tile::BK + 8,
                LDB = Tile::BN + 8;  // +16 bytes: ldmatrix rows hit distinct banks
  constexpr int MT = Tile::WM / 16, NT = Tile::WN / 8;
  constexpr int KT = K / Tile::BK;
  constexpr int vec = 8;
  In* as = reinterpret_cast<In*>(smem);
  In* bs = as + Tile::stages * Tile::BM * LDA;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int wm = warp / (Tile::BN / Tile::WN), wn = warp % (Tile::BN / Tile::WN);

  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * Tile::BK;
    In* sa = as + stage * Tile::BM * LDA;
    In* sb = bs + stage * Tile::BK * LDB;
    for (int i = tid; i < Tile::BM * Tile::BK / vec; i += Tile::threads) {
      const int r = i / (Tile::BK / vec), k = (i % (Tile::BK / vec)) * vec;
      ptx::cp_async_16(sa + r * LDA + k, a + static_cast<long>(row0 + r) * K + k0 + k);
    }
    for (int i = tid; i < Tile::BK * Tile::BN / vec; i += Tile::threads) {
      const int r = i / (Tile::BN / vec), n = (i % (Tile::BN / vec)) * vec;
      ptx::cp_async_16(sb + r * LDB + n, b + static_cast<long>(k0 + r) * N + col0 + n);
    }
  };

#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

#pragma unroll
  for (int s = 0; s < Tile::stages - 1; ++s) {
    if (s < KT) load_stage(s, s);
    ptx::cp_async_commit();
  }

  for (int kt = 0; kt < KT; ++kt) {
    ptx::cp_async_wait<Tile::stages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt-1 is free to overwrite
    if (kt + Tile::stages - 1 < KT)
      load_stage((kt + Tile::stages - 1) % Tile::stages, kt + Tile::stages - 1);
    ptx::cp_async_commit();

    const In* sa = as + (kt % Tile::stages) * Tile::BM * LDA;
    const In* sb = bs + (kt % Tile::stages) * Tile::BK * LDB;
#pragma unroll
    for (int kk = 0; kk < Tile::BK; kk += 16) {
      std::uint32_t af[MT][4], bf[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i)
        ptx::ldmatrix_x4(af[i],
                         sa + (wm * Tile::WM + i * 16 + lane % 16) * LDA + kk + (lane / 16) * 8);
#pragma unroll
      for (int j = 0; j < NT; j += 2) {
        std::uint32_t r[4];
        ptx::ldmatrix_x4_trans(r, sb + (kk + lane % 8 + 8 * ((lane / 8) % 2)) * LDB +
                                      wn * Tile::WN + j * 8 + 8 * (lane / 16));
        bf[j][0] = r[0], bf[j][1] = r[1], bf[j + 1][0] = r[2], bf[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) ptx::mma_16816<In>(acc[i][j], af[i], bf[j]);
    }
  }
  ptx::cp_async_wait<0>();
}

template <class Tile>
constexpr std::size_t mma_smem_bytes(std::size_t elem) {
  return elem * Tile::stages * (Tile::BM * (Tile::BK + 8) + Tile::BK * (Tile::BN + 8));
}

// mma.sync GEMM; blocks are visited in groups of 8 block-rows so that the B panels they share stay
// in L2 (the grouped order of Triton's matmul tutorial).
template <half_type In, class Epi, int M, int N, int K, class Tile>
__device__ __forceinline__ void gemm_mma_block(const In* __restrict__ a, const In* __restrict__ b,
                                               typename Epi::out_type* __restrict__ c,
                                               const Epi& epi) {
  constexpr int MT = Tile::WM / 16, NT = Tile::WN / 8;
  constexpr int grid_m = M / Tile::BM, grid_n = N / Tile::BN, group_rows = 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = warp / (Tile::BN / Tile::WN), wn = warp % (Tile::BN / Tile::WN);
  const int pid = static_cast<int>(blockIdx.x);
  const int first_m = pid / (group_rows * grid_n) * group_rows;
  const int rows_here = grid_m - first_m < group_rows ? grid_m - first_m : group_rows;
  const int bm = first_m + (pid % (group_rows * grid_n)) % rows_here;
  const int bn = (pid % (group_rows * grid_n)) / rows_here;
  const int row0 = bm * Tile::BM, col0 = bn * Tile::BN;

  float acc[MT][NT][4];
  mma_mainloop<In, N, K, Tile>(a, b, row0, col0, smem_raw, acc);

  // Epilogue straight from the accumulators: lane holds columns 2t, 2t+1 of rows g and g+8.
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + wm * Tile::WM + i * 16 + g + 8 * h;
        const int col = col0 + wn * Tile::WN + j * 8 + 2 * t;
        store_pair(c + static_cast<long>(row) * N + col, epi.apply(acc[i][j][2 * h], row, col, N),
                   epi.apply(acc[i][j][2 * h + 1], row, col + 1, N));
      }
}

template <half_type In, class Epi, int M, int N, int K, class Tile>
__global__ void __launch_bounds__(Tile::threads)
    gemm_mma_kernel(const In* __restrict__ a, const In* __restrict__ b,
                    typename Epi::out_type* __restrict__ c, Epi epi) {
  gemm_mma_block<In, Epi, M, N, K, Tile>(a, b, c, epi);
}

// G GEMMs sharing A and every shape in one launch (blockIdx.y picks the member).
template <half_type In, class Epi, int M, int N, int K, class Tile, int G>
__global__ void __launch_bounds__(Tile::threads)
    gemm_mma_siblings_kernel(const In* __restrict__ a, gemm_siblings<In, Epi, G> s) {
  const int m = static_cast<int>(blockIdx.y);
  gemm_mma_block<In, Epi, M, N, K, Tile>(a, s.b[m], s.c[m], s.epi[m]);
}

// GEMM whose block owns whole rows (16 x N), so the epilogue can finish with a layernorm over
// each row: out = layernorm(epilogue(A B)) * gamma + beta, and the pre-norm sum never reaches
// memory.
template <half_type In, class Epi, int M, int N, int K, class Tile>
__global__ void __launch_bounds__(Tile::threads)
    gemm_mma_layernorm_kernel(const In* __restrict__ a, const In* __restrict__ b,
                              typename Epi::out_type* __restrict__ c, Epi epi,
                              const typename Epi::out_type* __restrict__ gamma,
                              const typename Epi::out_type* __restrict__ beta, float eps) {
  constexpr int NT = Tile::WN / 8, warps = Tile::warps;
  static_assert(Tile::BM == 16 && Tile::WM == 16 && Tile::BN == N,
                "gemm_layernorm: a block owns 16 whole rows");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ float partial[2][warps][16];

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int row0 = static_cast<int>(blockIdx.x) * 16;

  float acc[1][NT][4];
  mma_mainloop<In, N, K, Tile>(a, b, row0, 0, smem_raw, acc);

  float v[NT][4];
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row0 + g + 8 * (e / 2), col = warp * Tile::WN + j * 8 + 2 * t + (e % 2);
      v[j][e] = epi.apply(acc[0][j][e], row, col, N);
      sum[e / 2] += v[j][e];
    }
  // Row sums: the quad's four lanes, then the warps through shared memory; twice (mean, variance).
  float mean[2], rstd[2];
#pragma unroll
  for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
      if (t == 0) partial[pass][warp][g + 8 * h] = sum[h];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < warps; ++w) total += partial[pass][w][g + 8 * h];
      if (pass == 0)
        mean[h] = total / N;
      else
        rstd[h] = rsqrtf(total / N + eps);
    }
    if (pass == 0) {
      sum[0] = sum[1] = 0.0f;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float d = v[j][e] - mean[e / 2];
          sum[e / 2] += d * d;
        }
    }
  }
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + g + 8 * h, col = warp * Tile::WN + j * 8 + 2 * t;
      const float y0 = (v[j][2 * h] - mean[h]) * rstd[h] * to_f32(gamma[col]) + to_f32(beta[col]);
      const float y1 =
          (v[j][2 * h + 1] - mean[h]) * rstd[h] * to_f32(gamma[col + 1]) + to_f32(beta[col + 1]);
      store_pair(c + static_cast<long>(row) * N + col, y0, y1);
    }
}

// The contiguous row-major operands of gemm<M, N, K> in gemm_strided's form, and an epilogue of
// epilogue.cuh's form in gemm_strided's: the exact f32 path is gemm_strided's CUDA-core kernel.
template <int M, int N, int K>
struct contiguous_operands {
  static constexpr long m = M, n = N, k = K, a_rs = K, a_ks = 1, b_ks = N, b_ns = 1;
  static constexpr long a_offset = 0, b_offset = 0, batches = 1;
  __host__ __device__ static long a_batch(long) { return 0; }
  __host__ __device__ static long b_batch(long) { return 0; }
};
template <class Epi>
struct strided_epilogue : Epi {
  static constexpr dtype out_dtype = dtype_of_storage<typename Epi::out_type>;
  long batch = 0;
};

}  // namespace detail

// The block tile for a problem: large tiles when they alone fill the chip, else 64x64.
template <storage_type In, int M, int N>
using default_gemm_tile =
    std::conditional_t<(M % 128 == 0 && N % 128 == 0 && (M / 128) * (N / 128) >= 128),
                       gemm_tile<128, 128, std::same_as<In, float> ? 16 : 32, 64, 32, 3>,
                       gemm_tile<64, 64, std::same_as<In, float> ? 16 : 32, 32, 32, 3>>;

// mma.sync tiles: 128x128 (4 warps of 64x64) when there is a wave of such blocks, 64x64 for mid
// sizes, 32x32 (4 warps of 16x16) for small problems, where the number of blocks sets the latency.
// G GEMMs launched together (gemm_siblings_launch) count G times the blocks.
template <int M, int N, int G = 1>
using default_mma_tile = std::conditional_t<
    (M % 128 == 0 && N % 128 == 0 && (M / 128) * (N / 128) * G >= 96),
    gemm_tile<128, 128, 32, 64, 64, 4>,
    std::conditional_t<(M % 64 == 0 && N % 64 == 0 && (M / 64) * (N / 64) * G >= 66),
                       gemm_tile<64, 64, 32, 32, 32, 4>, gemm_tile<32, 32, 32, 16, 16, 4>>>;

template <int M, int N, gemm_math Math, storage_type In>
using default_tile_for =
    std::conditional_t<Math == gemm_math::tensor_core || Math == gemm_math::mma,
                       default_mma_tile<M, N>, default_gemm_tile<In, M, N>>;

template <storage_type In>
inline constexpr gemm_math default_gemm_math =
    std::same_as<In, float> ? gemm_math::cuda_core : gemm_math::tensor_core;

template <int M, int N, int K, storage_type In, class Epi, gemm_math Math = default_gemm_math<In>,
          class Tile = default_tile_for<M, N, Math, In>>
void gemm(cudaStream_t stream, const In* a, const In* b, typename Epi::out_type* c, Epi epi) {
  static_assert(M > 0 && N > 0 && K > 0, "gemm: sizes must be positive");
  if constexpr (Math == gemm_math::cuda_core) {
    static_assert(std::same_as<In, float>, "gemm: the CUDA-core path takes f32 operands");
    using E = detail::strided_epilogue<Epi>;
    detail::gemm_strided_f32_kernel<detail::contiguous_operands<M, N, K>, dtype::f32, dtype::f32, E>
        <<<detail::strided_grid(M, N, 1), detail::strided_f32_threads, 0, stream>>>(a, b, c,
                                                                                    E{epi});
    check_launch("gemm_strided_f32_kernel");
  } else if constexpr (Math == gemm_math::wgmma) {
    static_assert(!std::same_as<In, float>, "gemm: the wgmma path takes bf16/f16 operands");
    if constexpr (requires { Tile::consumers; })  // an sm90::wgmma_tile
      sm90::gemm<M, N, K, In, Epi, Tile>(stream, a, b, c, epi);
    else if constexpr (sm90::wide_blocks<M, N>)
      sm90::gemm<M, N, K, In, Epi, sm90::wgmma_tile<256, 4>>(stream, a, b, c, epi);
    else
      sm90::gemm<M, N, K, In, Epi>(stream, a, b, c, epi);
  } else if constexpr (Math == gemm_math::tensor_core || Math == gemm_math::mma) {
    static_assert(!std::same_as<In, float>,
                  "gemm: f32 operands on tensor cores need gemm_math::tf32");
#if defined(FUSEDSL_CUDA_WGMMA)
    if constexpr (Math == gemm_math::tensor_core && sm90::fits<M, N, K>) {
      if (sm90::device_has_wgmma()) {
        gemm<M, N, K, In, Epi, gemm_math::wgmma>(stream, a, b, c, epi);
        return;
      }
    }
#endif
    static_assert(M % Tile::BM == 0 && N % Tile::BN == 0 && K % Tile::BK == 0,
                  "gemm: the tensor-core path needs M, N, K to be multiples of the block tile");
    static_assert(Tile::WN % 16 == 0 && Tile::WM % 16 == 0,
                  "gemm: mma warp tiles are multiples of 16");
    constexpr std::size_t smem = detail::mma_smem_bytes<Tile>(sizeof(In));
    auto* kernel = &detail::gemm_mma_kernel<In, Epi, M, N, K, Tile>;
    static const bool configured =
        allow_dynamic_smem(kernel, smem, "gemm: raising the shared-memory limit");
    (void)configured;
    kernel<<<(M / Tile::BM) * (N / Tile::BN), Tile::threads, smem, stream>>>(a, b, c, epi);
    check_launch("gemm_mma_kernel");
  } else {
    static_assert(Math == gemm_math::wmma || std::same_as<In, float>,
                  "gemm: TF32 is an option for f32 operands only");
    static_assert(Math == gemm_math::tf32 || !std::same_as<In, float>,
                  "gemm: f32 operands on tensor cores need gemm_math::tf32");
    static_assert(M % Tile::BM == 0,
                  "gemm: the tensor-core path needs M to be a multiple of the block tile");
    static_assert(N % Tile::BN == 0,
                  "gemm: the tensor-core path needs N to be a multiple of the block tile");
    static_assert(K % Tile::BK == 0,
                  "gemm: the tensor-core path needs K to be a multiple of the block tile");
    using L = detail::tc_layout<In, Tile>;
    auto* kernel = &detail::gemm_tc_kernel<In, Epi, M, N, K, Tile>;
    static const bool configured =
        allow_dynamic_smem(kernel, L::bytes, "gemm: raising the shared-memory limit");
    (void)configured;
    const dim3 grid(N / Tile::BN, M / Tile::BM);
    kernel<<<grid, Tile::threads, L::bytes, stream>>>(a, b, c, epi);
    check_launch("gemm_tc_kernel");
  }
}

// C_i = epilogue_i(A B_i) for the G members of `s` (bf16/f16). Where the wgmma path takes the
// shape, G launches of it; else one mma.sync launch whose grid covers every member.
template <int M, int N, int K, half_type In, class Epi, int G>
void gemm_siblings_launch(cudaStream_t stream, const In* a, const gemm_siblings<In, Epi, G>& s) {
  static_assert(G >= 1, "gemm_siblings_launch: at least one GEMM");
#if defined(FUSEDSL_CUDA_WGMMA)
  if constexpr (sm90::fits<M, N, K>) {
    if (sm90::device_has_wgmma()) {
      for (int m = 0; m < G; ++m) gemm<M, N, K, In, Epi>(stream, a, s.b[m], s.c[m], s.epi[m]);
      return;
    }
  }
#endif
  using Tile = default_mma_tile<M, N, G>;
  static_assert(M % Tile::BM == 0 && N % Tile::BN == 0 && K % Tile::BK == 0,
                "gemm_siblings_launch: M, N, K must be multiples of the block tile");
  constexpr std::size_t smem = detail::mma_smem_bytes<Tile>(sizeof(In));
  auto* kernel = &detail::gemm_mma_siblings_kernel<In, Epi, M, N, K, Tile, G>;
  static const bool configured =
      allow_dynamic_smem(kernel, smem, "gemm_siblings_launch: raising the shared-memory limit");
  (void)configured;
  const dim3 grid((M / Tile::BM) * (N / Tile::BN), G);
  kernel<<<grid, Tile::threads, smem, stream>>>(a, s);
  check_launch("gemm_mma_siblings_kernel");
}

// out[M,N] = layernorm_rows(epilogue(A[M,K] B[K,N])) * gamma + beta in one launch (bf16/f16 on
// tensor cores). Each block owns 16 whole rows, so N is limited to what one block's registers hold.
template <int M, int N, int K, half_type In, class Epi>
void gemm_layernorm(cudaStream_t stream, const In* a, const In* b, typename Epi::out_type* c,
                    Epi epi, const typename Epi::out_type* gamma,
                    const typename Epi::out_type* beta, float eps = 1e-5f) {
  static_assert(M % 16 == 0, "gemm_layernorm: M must be a multiple of 16");
  static_assert(N % 64 == 0 && N <= 256, "gemm_layernorm: N must be a multiple of 64, at most 256");
  static_assert(K % 32 == 0, "gemm_layernorm: K must be a multiple of 32");
  if (gamma == nullptr || beta == nullptr)
    throw std::invalid_argument("gemm_layernorm: gamma and beta must be set");
  using Tile = gemm_tile<16, N, 32, 16, N / 4, 4>;
  constexpr std::size_t smem = detail::mma_smem_bytes<Tile>(sizeof(In));
  auto* kernel = &detail::gemm_mma_layernorm_kernel<In, Epi, M, N, K, Tile>;
  static const bool configured =
      allow_dynamic_smem(kernel, smem, "gemm_layernorm: raising the shared-memory limit");
  (void)configured;
  kernel<<<M / 16, Tile::threads, smem, stream>>>(a, b, c, epi, gamma, beta, eps);
  check_launch("gemm_mma_layernorm_kernel");
}

}  // namespace fusedsl::cuda
