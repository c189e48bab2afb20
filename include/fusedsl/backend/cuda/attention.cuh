#pragma once
// Flash attention (Dao 2023, "FlashAttention-2", Alg. 1): O = softmax(scale * Q K^T [+ causal
// mask]) V in one pass over K/V tiles with an online softmax, so the SeqQ x SeqK scores never reach
// memory. bf16/f16 operands on tensor cores (mma.sync m16n8k16, f32 accumulation); grouped- and
// multi-query heads share one K/V head among Heads / KvHeads query heads; causal blocks above the
// diagonal are skipped, not masked.

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <fusedsl/backend/cuda/attention_sm90.cuh>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <fusedsl/backend/cuda/ptx.cuh>
#include <stdexcept>

namespace fusedsl::cuda {

// Operands are [batch, seq, heads, head_dim] views: head h of position s in batch b starts at
// ptr + b * batch_stride + s * row_stride + h * head_dim, so Q, K and V may be column slices of one
// packed QKV buffer.
template <half_type T>
struct attention_args {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  T* o = nullptr;
  long q_row_stride = 0, k_row_stride = 0, v_row_stride = 0, o_row_stride = 0;
  long q_batch_stride = 0, k_batch_stride = 0, v_batch_stride = 0, o_batch_stride = 0;
  float scale = 0.0f;  // usually 1 / sqrt(head_dim)
};

namespace detail {
inline constexpr int attn_block_n = 64;  // keys per tile

template <int HeadDim, int BlockM>
constexpr std::size_t attention_smem_bytes(std::size_t elem) {
  return elem * static_cast<std::size_t>(BlockM + 4 * attn_block_n) * (HeadDim + 8);
}

// One warp per 16 query rows; BlockM / 16 warps share each K/V tile loaded into shared memory.
template <half_type T, int HeadDim, int Heads, int KvHeads, int SeqQ, int SeqK, bool Causal,
          bool Ldmatrix, int BlockM>
__global__ void __launch_bounds__(BlockM * 2) flash_attention_kernel(attention_args<T> p) {
  constexpr int attn_threads = BlockM * 2;
  constexpr int BM = BlockM, BN = attn_block_n, LD = HeadDim + 8;
  constexpr int DK = HeadDim / 16;     // k-steps of Q K^T
  constexpr int DN = HeadDim / 8;      // n-tiles of the output
  constexpr int SN = BN / 8;           // n-tiles of the scores
  constexpr int CPR = HeadDim / 8;     // 16-byte chunks per row
  constexpr int offset = SeqK - SeqQ;  // causal: query i sees keys j <= i + offset

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* ks = qs + BM * LD;      // two buffers of BN x LD
  T* vs = ks + 2 * BN * LD;  // two buffers of BN x LD

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  // Causal: the last query blocks do the most work, so they go first.
  const int qb =
      Causal ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z);
  const int kvh = h / (Heads / KvHeads);

  const T* qg =
      p.q + b * p.q_batch_stride + static_cast<long>(qb) * BM * p.q_row_stride + h * HeadDim;
  const T* kg = p.k + b * p.k_batch_stride + kvh * HeadDim;
  const T* vg = p.v + b * p.v_batch_stride + kvh * HeadDim;

  constexpr int all_tiles = SeqK / BN;
  const int last_visible = (qb * BM + BM - 1 + offset) / BN + 1;
  const int n_tiles = Causal && last_visible < all_tiles ? last_visible : all_tiles;

  auto load_rows = [&](T* dst, const T* src, long stride, int rows) {
    for (int i = tid; i < rows * CPR; i += attn_threads) {
      const int r = i / CPR, c = (i % CPR) * 8;
      ptx::cp_async_16(dst + r * LD + c, src + r * stride + c);
    }
  };
  auto load_kv = [&](int tile, int buf) {
    load_rows(ks + buf * BN * LD, kg + static_cast<long>(tile) * BN * p.k_row_stride,
              p.k_row_stride, BN);
    load_rows(vs + buf * BN * LD, vg + static_cast<long>(tile) * BN * p.v_row_stride,
              p.v_row_stride, BN);
  };

  load_rows(qs, qg, p.q_row_stride, BM);
  load_kv(0, 0);
  ptx::cp_async_commit();

  std::uint32_t qf[DK][4];
  float o[DN][4];
#pragma unroll
  for (int d = 0; d < DN; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const float scale_log2 = p.scale * 1.4426950408889634f;  // exp(x) = exp2(x * log2 e)
  const int q_row = qb * BM + warp * 16 + g;  // this thread's rows: q_row and q_row + 8

  for (int kt = 0; kt < n_tiles; ++kt) {
    if (kt + 1 < n_tiles) {
      load_kv(kt + 1, (kt + 1) & 1);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();

    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < DK; ++kk) {
        const T* q0 = qs + (warp * 16 + g) * LD + kk * 16 + 2 * t;
        qf[kk][0] = *reinterpret_cast<const std::uint32_t*>(q0);
        qf[kk][1] = *reinterpret_cast<const std::uint32_t*>(q0 + 8 * LD);
        qf[kk][2] = *reinterpret_cast<const std::uint32_t*>(q0 + 8);
        qf[kk][3] = *reinterpret_cast<const std::uint32_t*>(q0 + 8 * LD + 8);
      }
    }
    const T* kb = ks + (kt & 1) * BN * LD;
    const T* vb = vs + (kt & 1) * BN * LD;

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
    float s[SN][4];
#pragma unroll
    for (int n = 0; n < SN; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DK; ++kk)
#pragma unroll
      for (int n = 0; n < SN; n += 2) {
        std::uint32_t b0[2], b1[2];
        if constexpr (Ldmatrix) {
          std::uint32_t r4[4];
          ptx::ldmatrix_x4(
              r4, kb + (n * 8 + lane % 8 + 8 * (lane / 16)) * LD + kk * 16 + 8 * ((lane / 8) % 2));
          b0[0] = r4[0], b0[1] = r4[1], b1[0] = r4[2], b1[1] = r4[3];
        } else {
          const T* k0 = kb + (n * 8 + g) * LD + kk * 16 + 2 * t;
          b0[0] = *reinterpret_cast<const std::uint32_t*>(k0);
          b0[1] = *reinterpret_cast<const std::uint32_t*>(k0 + 8);
          b1[0] = *reinterpret_cast<const std::uint32_t*>(k0 + 8 * LD);
          b1[1] = *reinterpret_cast<const std::uint32_t*>(k0 + 8 * LD + 8);
        }
        ptx::mma_16816<T>(s[n], qf[kk], b0);
        ptx::mma_16816<T>(s[n + 1], qf[kk], b1);
      }

    const bool diagonal = Causal && (kt * BN + BN - 1 > qb * BM + offset);
#pragma unroll
    for (int n = 0; n < SN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] *= scale_log2;
        if (diagonal) {
          const int key = kt * BN + n * 8 + 2 * t + (e & 1);
          if (key > q_row + 8 * (e >> 1) + offset) s[n][e] = -INFINITY;
        }
      }

      // Online softmax per row; the four lanes of a quad share a row.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tmax = -INFINITY;
#pragma unroll
      for (int n = 0; n < SN; ++n) tmax = fmaxf(tmax, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
      const float m_new = fmaxf(m_run[r], tmax);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with no visible key yet
      const float alpha = exp2f(m_run[r] - m_use);
      m_run[r] = m_new;
      float row_sum = 0.0f;
#pragma unroll
      for (int n = 0; n < SN; ++n) {
        s[n][2 * r] = exp2f(s[n][2 * r] - m_use);
        s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - m_use);
        row_sum += s[n][2 * r] + s[n][2 * r + 1];
      }
      l_run[r] =
          l_run[r] * alpha + row_sum;  // per-lane partial; the quad's sum is taken at the end
#pragma unroll
      for (int d = 0; d < DN; ++d) {
        o[d][2 * r] *= alpha;
        o[d][2 * r + 1] *= alpha;
      }
    }

    // O += P V: the score accumulators are already in the A-operand layout.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const std::uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                                   pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int d = 0; d < DN; d += 2) {
        std::uint32_t b0[2], b1[2];
        if constexpr (Ldmatrix) {
          std::uint32_t r4[4];
          const T* row =
              vb + (kk * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + d * 8 + 8 * (lane / 16);
          ptx::ldmatrix_x4_trans(r4, row);
          b0[0] = r4[0], b0[1] = r4[1], b1[0] = r4[2], b1[1] = r4[3];
        } else {
          const auto* v0 =
              reinterpret_cast<const unsigned short*>(vb + (kk * 16 + 2 * t) * LD + d * 8 + g);
          auto pair = [&](int row, int col) {
            return static_cast<std::uint32_t>(v0[row * LD + col]) |
                   (static_cast<std::uint32_t>(v0[(row + 1) * LD + col]) << 16);
          };
          b0[0] = pair(0, 0), b0[1] = pair(8, 0), b1[0] = pair(0, 8), b1[1] = pair(8, 8);
        }
        ptx::mma_16816<T>(o[d], pa, b0);
        ptx::mma_16816<T>(o[d + 1], pa, b1);
      }
    }
    __syncthreads();  // every warp is done with buffer kt & 1 before it is refilled
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    T* orow = p.o + b * p.o_batch_stride + static_cast<long>(q_row + 8 * r) * p.o_row_stride +
              h * HeadDim;
#pragma unroll
    for (int d = 0; d < DN; ++d)
      *reinterpret_cast<std::uint32_t*>(orow + d * 8 + 2 * t) =
          pack2<T>(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
  }
}
}  // namespace detail

// Dense strides for [batch, seq, heads, head_dim] tensors, Q/O and K/V each in their own buffer.
template <half_type T, int HeadDim, int Heads, int KvHeads, int SeqQ, int SeqK>
attention_args<T> dense_attention_args(const T* q, const T* k, const T* v, T* o) {
  attention_args<T> a;
  a.q = q, a.k = k, a.v = v, a.o = o;
  a.q_row_stride = a.o_row_stride = static_cast<long>(Heads) * HeadDim;
  a.k_row_stride = a.v_row_stride = static_cast<long>(KvHeads) * HeadDim;
  a.q_batch_stride = a.o_batch_stride = a.q_row_stride * SeqQ;
  a.k_batch_stride = a.v_batch_stride = a.k_row_stride * SeqK;
  a.scale = 1.0f / std::sqrt(static_cast<float>(HeadDim));
  return a;
}

// Whether flash_attention's default (BlockM = 0) takes the Hopper path (attention_sm90.cuh) on
// the current device.
template <int HeadDim, int SeqQ, int SeqK>
bool attention_takes_wgmma() {
#if defined(FUSEDSL_CUDA_WGMMA)
  if constexpr (sm90::attention_fits<HeadDim, SeqQ, SeqK>) return sm90::device_has_wgmma();
#endif
  return false;
}

// Ldmatrix: K and V fragments through ldmatrix (else plain 32/16-bit shared loads).
// BlockM: queries per block of the mma.sync kernel (64 or 128), i.e. 4 or 8 warps sharing each K/V
// tile. The default, 0, picks: the wgmma + TMA kernel on a Hopper device in an sm_90a build where
// it fits (head_dim 64 or 128, seq_q % 128 == 0), else mma.sync with what measured faster on an
// H200 (performance-gpu.md): 128 queries at head_dim 128, 64 below.
template <half_type T, int HeadDim, int Batch, int Heads, int KvHeads, int SeqQ, int SeqK,
          bool Causal, bool Ldmatrix = true, int BlockMChoice = 0>
void flash_attention(cudaStream_t stream, const attention_args<T>& a) {
  constexpr int BlockM = BlockMChoice != 0 ? BlockMChoice : (HeadDim >= 128 ? 128 : 64);
  static_assert(BlockM == 64 || BlockM == 128, "flash_attention: block_m is 64 or 128 queries");
  static_assert(HeadDim % 16 == 0 && HeadDim >= 16 && HeadDim <= 256,
                "flash_attention: head_dim must be a multiple of 16 in [16, 256]");
  static_assert(KvHeads > 0 && Heads % KvHeads == 0,
                "flash_attention: heads must be a multiple of kv_heads");
  static_assert(SeqQ % BlockM == 0, "flash_attention: seq_q must be a multiple of block_m");
  static_assert(SeqK % detail::attn_block_n == 0,
                "flash_attention: seq_k must be a multiple of 64");
  static_assert(!Causal || SeqK >= SeqQ, "flash_attention: causal attention needs seq_k >= seq_q");
  if (!a.q || !a.k || !a.v || !a.o)
    throw std::invalid_argument("flash_attention: q, k, v and o must all be set");
  if (a.q_row_stride < static_cast<long>(Heads) * HeadDim ||
      a.o_row_stride < static_cast<long>(Heads) * HeadDim ||
      a.k_row_stride < static_cast<long>(KvHeads) * HeadDim ||
      a.v_row_stride < static_cast<long>(KvHeads) * HeadDim)
    throw std::invalid_argument("flash_attention: a row stride is shorter than heads * head_dim");
  if ((a.q_row_stride | a.k_row_stride | a.v_row_stride) % 8 != 0)
    throw std::invalid_argument(
        "flash_attention: q/k/v row strides must be multiples of 8 elements (16 bytes)");
  if (!(a.scale > 0.0f)) throw std::invalid_argument("flash_attention: scale must be positive");
#if defined(FUSEDSL_CUDA_WGMMA)
  if constexpr (BlockMChoice == 0 && sm90::attention_fits<HeadDim, SeqQ, SeqK>) {
    const auto aligned = [](const void* p) {
      return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    };
    // TMA reads from 16-byte aligned addresses; other views take the mma.sync kernel.
    if (sm90::device_has_wgmma() && aligned(a.q) && aligned(a.k) && aligned(a.v) &&
        (a.q_batch_stride | a.k_batch_stride | a.v_batch_stride) % 8 == 0) {
      sm90::flash_attention<T, HeadDim, Batch, Heads, KvHeads, SeqQ, SeqK, Causal>(stream, a);
      return;
    }
  }
#endif

  constexpr std::size_t smem = detail::attention_smem_bytes<HeadDim, BlockM>(sizeof(T));
  auto* kernel = &detail::flash_attention_kernel<T, HeadDim, Heads, KvHeads, SeqQ, SeqK, Causal,
                                                 Ldmatrix, BlockM>;
  static const bool configured =
      allow_dynamic_smem(kernel, smem, "flash_attention: raising the shared-memory limit");
  (void)configured;
  const dim3 grid(SeqQ / BlockM, Heads, Batch);
  kernel<<<grid, BlockM * 2, smem, stream>>>(a);
  check_launch("flash_attention_kernel");
}

// Multiply-adds of one attention call, counted as 2 flops each; causal counts the visible half.
constexpr double attention_flops(int batch, int heads, int seq_q, int seq_k, int head_dim,
                                 bool causal) {
  const double full = 4.0 * batch * heads * static_cast<double>(seq_q) * seq_k * head_dim;
  return causal ? full * 0.5 : full;
}

}  // namespace fusedsl::cuda
