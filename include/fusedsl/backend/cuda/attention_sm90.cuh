#pragma once
// Hopper (sm_90a) flash attention forward: the FlashAttention-2 algorithm of attention.cuh with
// Hopper's data path. One producer thread streams Q once and K/V tiles through a ring of
// 128-byte-swizzled shared-memory stages with TMA; two consumer warpgroups (64 query rows each)
// compute S = Q K^T with wgmma from shared memory, run the online softmax on the accumulators, and
// compute O += P V with wgmma taking P from registers (the S accumulators rounded to 16 bits are
// already in wgmma's A-fragment layout). PTX ISA 8.x "wgmma.mma_async" (register A operand);
// descriptors, mbarriers and TMA as in gemm_sm90.cuh.
//
// flash_attention() (attention.cuh) takes this path on a compute-capability 9.0 device in a build
// with an sm_90a cubin, for head_dim 64 or 128 and seq_q a multiple of 128.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/gemm_sm90.cuh>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <fusedsl/backend/cuda/ptx.cuh>
#include <stdexcept>
#include <string>

namespace fusedsl::cuda {

template <half_type T>
struct attention_args;

namespace sm90 {

// 128 queries per block (two consumer warpgroups of 64), 64 keys per K/V tile, a 3-stage ring.
template <int HeadDim>
struct attention_tile {
  static constexpr int BM = 128, BN = 64, stages = 3, consumers = 2;
  static constexpr int threads = 128 * (consumers + 1);
  static constexpr int chunks = HeadDim / 64;  // 64-column (128-byte) boxes per row
  static constexpr int q_bytes = BM * HeadDim * 2;
  static constexpr int kv_bytes = BN * HeadDim * 2;  // one K or V tile
  static constexpr int stage_bytes = 2 * kv_bytes;
  static constexpr std::size_t smem_bytes = std::size_t(q_bytes) + stages * stage_bytes + 1024;
};

template <int HeadDim, int SeqQ, int SeqK>
inline constexpr bool attention_fits =
    (HeadDim == 64 || HeadDim == 128) && SeqQ % 128 == 0 && SeqK % 64 == 0;

namespace detail {

#if defined(FUSEDSL_SM90A_DEVICE)
// A 3-D box of `map` at (col, row, batch) into shared memory, counted towards `bar`.
__device__ inline void tma_load_3d(void* dst, const CUtensorMap* map, std::uint64_t* bar, int col,
                                   int row, int batch) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(ptx::smem_address(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(ptx::smem_address(bar)), "r"(col), "r"(row),
      "r"(batch)
      : "memory");
}

#endif  // FUSEDSL_SM90A_DEVICE

template <half_type T, int HeadDim, int Heads, int KvHeads, int SeqQ, int SeqK, bool Causal>
__global__ void __launch_bounds__(384, 1)
    flash_attention_wgmma_kernel(const __grid_constant__ CUtensorMap map_q,
                                 const __grid_constant__ CUtensorMap map_k,
                                 const __grid_constant__ CUtensorMap map_v, T* __restrict__ o,
                                 long o_row_stride, long o_batch_stride, float scale_log2) {
#if defined(FUSEDSL_SM90A_DEVICE)
  using Tile = attention_tile<HeadDim>;
  constexpr int BM = Tile::BM, BN = Tile::BN, S = Tile::stages, C = Tile::chunks;
  constexpr int offset = SeqK - SeqQ;  // causal: query i sees keys j <= i + offset
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) std::uint64_t q_full, full[S], empty[S];
  const unsigned raw = ptx::smem_address(smem_raw);
  unsigned char* base = smem_raw + ((1024 - (raw & 1023)) & 1023);
  unsigned char* qs = base;
  unsigned char* ring = base + Tile::q_bytes;

  // The heaviest (last) query blocks first when causal.
  const int qb = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int h = int(blockIdx.y), b = int(blockIdx.z), kvh = h / (Heads / KvHeads);
  const int q0 = qb * BM;
  // Causal: the tiles up to the diagonal of the block's last query row.
  const int diagonal_kv = (q0 + BM + offset + BN - 1) / BN;
  const int n_kv = Causal && diagonal_kv < SeqK / BN ? diagonal_kv : SeqK / BN;
  const int wg = int(threadIdx.x) / 128;

  if (threadIdx.x == 0) {
    mbar_init(&q_full, 1);
    init_ring(full, empty, Tile::consumers);  // its fence covers q_full too
  }
  __syncthreads();

  if (wg == 0) {
    if (threadIdx.x == 0) {
      mbar_expect_tx(&q_full, Tile::q_bytes);
#pragma unroll
      for (int c = 0; c < C; ++c)
        tma_load_3d(qs + c * BM * 128, &map_q, &q_full, h * HeadDim + c * 64, q0, b);
      for (int j = 0; j < n_kv; ++j) {
        const int s = j % S;
        if (j >= S) mbar_wait(&empty[s], unsigned((j / S - 1) & 1));
        unsigned char* st = ring + std::size_t(s) * Tile::stage_bytes;
        mbar_expect_tx(&full[s], Tile::stage_bytes);
#pragma unroll
        for (int c = 0; c < C; ++c) {
          tma_load_3d(st + c * BN * 128, &map_k, &full[s], kvh * HeadDim + c * 64, j * BN, b);
          tma_load_3d(st + Tile::kv_bytes + c * BN * 128, &map_v, &full[s], kvh * HeadDim + c * 64,
                      j * BN, b);
        }
      }
    }
    return;
  }

  // Consumer warpgroup cw owns query rows q0 + 64 cw .. + 63; this thread holds rows r and r + 8
  // of them (the accumulator layout: register 4j + e is row 16 warp + lane/4 + 8(e/2), column
  // 8j + 2(lane%4) + e%2).
  const int cw = wg - 1, lane = int(threadIdx.x) % 32, warp = (int(threadIdx.x) % 128) / 32;
  const int g = lane / 4, t = lane % 4;
  const int row_in_block = cw * 64 + warp * 16 + g;
  float acc_o[HeadDim / 2];
#pragma unroll
  for (int i = 0; i < HeadDim / 2; ++i) acc_o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  mbar_wait(&q_full, 0);

  for (int j = 0; j < n_kv; ++j) {
    const int s = j % S;
    mbar_wait(&full[s], unsigned((j / S) & 1));
    const unsigned char* ks = ring + std::size_t(s) * Tile::stage_bytes;
    const unsigned char* vs = ks + Tile::kv_bytes;

    float acc_s[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc_s[i] = 0.0f;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < HeadDim / 16; ++k) {
      // Q: K-major rows of 128 bytes per 64-column chunk; K likewise (its rows are keys).
      const unsigned char* qa = qs + (k / 4) * BM * 128 + cw * 64 * 128 + (k % 4) * 32;
      const unsigned char* kb = ks + (k / 4) * BN * 128 + (k % 4) * 32;
      wgmma_ss<BN, T, 0>(acc_s, smem_desc(qa, 16, 1024), smem_desc(kb, 16, 1024));
    }
    wgmma_commit();
    wgmma_wait<0>();

    // Online softmax in the log2 domain; keys past the causal diagonal are -inf.
    const int key0 = j * BN;
    float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      const int hh = (i % 4) / 2, key = key0 + (i / 4) * 8 + 2 * t + (i % 2);
      float v = acc_s[i] * scale_log2;
      if (Causal && key > q0 + row_in_block + 8 * hh + offset) v = -INFINITY;
      acc_s[i] = v;
      mx[hh] = fmaxf(mx[hh], v);
    }
    float corr[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffffu, mx[hh], 1));
      mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffffu, mx[hh], 2));
      corr[hh] = exp2f(m_run[hh] - mx[hh]);  // 0 on the first tile (m_run = -inf)
      m_run[hh] = mx[hh];
    }
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      const int hh = (i % 4) / 2;
      acc_s[i] = exp2f(acc_s[i] - mx[hh]);
      sum[hh] += acc_s[i];
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) l_run[hh] = l_run[hh] * corr[hh] + sum[hh];
#pragma unroll
    for (int i = 0; i < HeadDim / 2; ++i) acc_o[i] *= corr[(i % 4) / 2];

    // O += P V: k16 step kk takes score columns 16kk .. 16kk + 15 (chunks 2kk, 2kk + 1).
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const std::uint32_t a[4] = {pack2<T>(acc_s[8 * kk + 0], acc_s[8 * kk + 1]),
                                  pack2<T>(acc_s[8 * kk + 2], acc_s[8 * kk + 3]),
                                  pack2<T>(acc_s[8 * kk + 4], acc_s[8 * kk + 5]),
                                  pack2<T>(acc_s[8 * kk + 6], acc_s[8 * kk + 7])};
      // V: N-major (head_dim contiguous), 64-column boxes BN*128 bytes apart, 16 keys = 2048 B.
      wgmma_rs<HeadDim, T>(acc_o, a, smem_desc(vs + kk * 2048, BN * 128, 1024));
    }
    wgmma_commit();
    wgmma_wait<0>();
    if (threadIdx.x % 128 == 0) mbar_arrive(&empty[s]);
  }

  // Row sums over the quad, then O / l.
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    l_run[hh] += __shfl_xor_sync(0xffffffffu, l_run[hh], 1);
    l_run[hh] += __shfl_xor_sync(0xffffffffu, l_run[hh], 2);
  }
  T* ob = o + long(b) * o_batch_stride + long(h) * HeadDim;
#pragma unroll
  for (int jn = 0; jn < HeadDim / 8; ++jn)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = q0 + row_in_block + 8 * hh, col = jn * 8 + 2 * t;
      const float inv = 1.0f / l_run[hh];
      store_pair(ob + long(row) * o_row_stride + col, acc_o[4 * jn + 2 * hh] * inv,
                 acc_o[4 * jn + 2 * hh + 1] * inv);
    }
#else
  (void)map_q, (void)map_k, (void)map_v, (void)o, (void)o_row_stride, (void)o_batch_stride,
      (void)scale_log2;
  __trap();  // never launched: flash_attention() takes this path only with an sm_90a cubin
#endif
}

// [batch, seq, row_stride] read in [1, rows, 64] boxes (a head's 64 columns of `rows` positions).
template <half_type T>
CUtensorMap tensor_map_3d(const T* base, long row_stride, int seq, int batch, long batch_stride,
                          int box_rows, const char* what) {
  const long bs = batch > 1 ? batch_stride : row_stride * seq;
  return tensor_map<T, 3>(base, {cuuint64_t(row_stride), cuuint64_t(seq), cuuint64_t(batch)},
                          {cuuint64_t(row_stride) * sizeof(T), cuuint64_t(bs) * sizeof(T)},
                          {64, cuuint32_t(box_rows), 1}, what);
}

}  // namespace detail

// The wgmma path of flash_attention (attention.cuh checks the arguments first).
template <half_type T, int HeadDim, int Batch, int Heads, int KvHeads, int SeqQ, int SeqK,
          bool Causal>
void flash_attention(cudaStream_t stream, const attention_args<T>& a) {
  static_assert(attention_fits<HeadDim, SeqQ, SeqK>,
                "flash_attention (wgmma): head_dim 64 or 128, seq_q % 128 == 0, seq_k % 64 == 0");
  using Tile = attention_tile<HeadDim>;
  if (!device_has_wgmma())
    throw std::runtime_error(
        "flash_attention (wgmma): needs a compute-capability 9.0 device and an sm_90a build");
  const CUtensorMap mq =
      detail::tensor_map_3d(a.q, a.q_row_stride, SeqQ, Batch, a.q_batch_stride, Tile::BM, "Q");
  const CUtensorMap mk =
      detail::tensor_map_3d(a.k, a.k_row_stride, SeqK, Batch, a.k_batch_stride, Tile::BN, "K");
  const CUtensorMap mv =
      detail::tensor_map_3d(a.v, a.v_row_stride, SeqK, Batch, a.v_batch_stride, Tile::BN, "V");
  auto* kernel =
      &detail::flash_attention_wgmma_kernel<T, HeadDim, Heads, KvHeads, SeqQ, SeqK, Causal>;
  static const bool configured = allow_dynamic_smem(
      kernel, Tile::smem_bytes, "flash_attention (wgmma): raising the shared-memory limit");
  (void)configured;
  const dim3 grid(SeqQ / Tile::BM, Heads, Batch);
  kernel<<<grid, Tile::threads, Tile::smem_bytes, stream>>>(
      mq, mk, mv, a.o, a.o_row_stride, a.o_batch_stride, a.scale * 1.4426950408889634f);
  check_launch("flash_attention_wgmma_kernel");
}

}  // namespace sm90
}  // namespace fusedsl::cuda
