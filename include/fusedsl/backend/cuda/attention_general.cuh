#pragma once
// Attention for the descriptors flash_attention (attention.cuh) does not take: any dtype (f32
// included), any sequence lengths and head_dim up to 256, strided Q/K/V/O views with any batch
// axes, grouped heads, causal masks with seq_q != seq_kv, and the score program between Q Kᵀ and
// the softmax (additive or select masks, biases: codegen.cuh's score_program).
//
// Exact f32 on CUDA cores, with the online softmax of FlashAttention (Dao et al. 2022, Alg. 1) in
// natural units (expf): one warp per query; the block's 8 queries share each tile of 32 keys and
// values staged in shared memory as f32; lane l scores key l of the tile, then the warp
// accumulates P V with lane l owning output columns l, l + 32, ...  A query whose keys are all
// masked (-inf) gets zeros, one whose keys are all masked with the lowest float the mean of its V
// rows, and a NaN score makes the query's output NaN, as on the CPU (docs/ops.md).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <fusedsl/backend/cuda/codegen.cuh>
#include <fusedsl/backend/cuda/error.hpp>

namespace fusedsl::cuda {

namespace detail {

inline constexpr int general_attention_warps = 8;  // queries per block
inline constexpr int general_attention_keys = 32;  // keys per tile

template <int D>
constexpr std::size_t general_attention_smem() {
  return sizeof(float) * std::size_t(general_attention_keys * (D + 1) + general_attention_keys * D +
                                     general_attention_warps * D);
}

template <class Att, dtype TQ, dtype TK, dtype TV, dtype TO, class Score>
__global__ void __launch_bounds__(general_attention_warps * 32)
    attention_general_kernel(const void* __restrict__ q, const void* __restrict__ k,
                             const void* __restrict__ v, void* __restrict__ o, Score score) {
  constexpr int W = general_attention_warps, KT = general_attention_keys;
  constexpr int D = int(Att::head_dim), DP = D + 1, DL = (D + 31) / 32;
  constexpr float neg_inf = -INFINITY;
  extern __shared__ float smem[];
  float* ks = smem;          // [KT][DP]: padded, so that lane l reading key l is conflict-free
  float* vs = ks + KT * DP;  // [KT][D]
  float* qs = vs + KT * D;   // [W][D]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const long h = blockIdx.y, kvh = h / Att::group;
  const long i0 = static_cast<long>(blockIdx.x) * W, i = i0 + warp;
  const bool query = i < Att::seq_q;
  const long i_last = (i0 + W - 1 < Att::seq_q ? i0 + W - 1 : Att::seq_q - 1);
  constexpr long all_tiles = (Att::seq_kv + KT - 1) / KT;
  long tiles = all_tiles;
  if constexpr (Att::causal) {
    const long visible = i_last + Att::causal_offset + 1;  // keys the block's last query sees
    tiles = visible <= 0
                ? 0
                : ((visible + KT - 1) / KT < all_tiles ? (visible + KT - 1) / KT : all_tiles);
  }

  for (long b = blockIdx.z; b < Att::batches; b += gridDim.z) {
    const long qo = Att::template offset<0> + Att::template batch<0>(b) +
                    h * Att::template head_stride<0> + i * Att::template row_stride<0>;
    const long ko =
        Att::template offset<1> + Att::template batch<1>(b) + kvh * Att::template head_stride<1>;
    const long vo =
        Att::template offset<2> + Att::template batch<2>(b) + kvh * Att::template head_stride<2>;
    __syncthreads();  // the previous batch's readers of qs are done
    for (int d = lane; d < D; d += 32) qs[warp * D + d] = query ? load_f32<TQ>(q, qo + d) : 0.0f;
    float m = neg_inf, l = 0.0f, acc[DL];
#pragma unroll
    for (int x = 0; x < DL; ++x) acc[x] = 0.0f;
    for (long kt = 0; kt < tiles; ++kt) {
      __syncthreads();  // every warp is done with the previous tile
      for (int e = tid; e < KT * D; e += W * 32) {
        const int r = e / D, d = e % D;
        const long key = kt * KT + r;
        const bool in = key < Att::seq_kv;
        ks[r * DP + d] = in ? load_f32<TK>(k, ko + key * Att::template row_stride<1> + d) : 0.0f;
        vs[r * D + d] = in ? load_f32<TV>(v, vo + key * Att::template row_stride<2> + d) : 0.0f;
      }
      __syncthreads();
      const long key = kt * KT + lane;
      float s = neg_inf;
      if (query && key < Att::seq_kv && (!Att::causal || key <= i + Att::causal_offset)) {
        float dot = 0.0f;
#pragma unroll 8
        for (int d = 0; d < D; ++d) dot = fmaf(qs[warp * D + d], ks[lane * DP + d], dot);
        s = score.apply(Att::scale * dot, b, h, i, key);
      }
      float tmax = s;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1)
        tmax = nan_max(tmax, __shfl_xor_sync(0xffffffffu, tmax, off));
      const float m_new = nan_max(m, tmax);
      const float shift = m_new == neg_inf ? 0.0f : m_new;  // no visible key yet: exp gives 0
      const float alpha = expf(m - shift), p = expf(s - shift);
      float sum = p;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l = l * alpha + sum;
      m = m_new;
#pragma unroll
      for (int x = 0; x < DL; ++x) acc[x] *= alpha;
      for (int j = 0; j < KT; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int x = 0; x < DL; ++x) {
          const int d = lane + 32 * x;
          if (D % 32 == 0 || d < D) acc[x] = fmaf(pj, vs[j * D + d], acc[x]);
        }
      }
    }
    if (query) {
      const float inv = l > 0.0f ? 1.0f / l : (l == l ? 0.0f : l);
      const long oo = Att::template offset<3> + Att::template batch<3>(b) +
                      h * Att::template head_stride<3> + i * Att::template row_stride<3>;
#pragma unroll
      for (int x = 0; x < DL; ++x) {
        const int d = lane + 32 * x;
        if (D % 32 == 0 || d < D) store_f32<TO>(o, oo + d, acc[x] * inv);
      }
    }
  }
}

}  // namespace detail

// One launch of the attention Att describes (codegen.cuh's attention_operands); q, k, v and o
// point at the buffers of the views' base nodes.
template <class Att, dtype TQ, dtype TK, dtype TV, dtype TO, class Score>
void attention_general(cudaStream_t stream, const void* q, const void* k, const void* v, void* o,
                       const Score& score) {
  static_assert(Att::head_dim >= 1 && Att::head_dim <= 256,
                "attention_general: head_dim must be in [1, 256]");
  constexpr int D = int(Att::head_dim);
  constexpr std::size_t smem = detail::general_attention_smem<D>();
  auto* kernel = &detail::attention_general_kernel<Att, TQ, TK, TV, TO, Score>;
  if constexpr (smem > 48 * 1024) {
    static const bool configured =
        allow_dynamic_smem(kernel, smem, "attention_general: raising the shared-memory limit");
    (void)configured;
  }
  const dim3 grid(static_cast<unsigned>((Att::seq_q + detail::general_attention_warps - 1) /
                                        detail::general_attention_warps),
                  static_cast<unsigned>(Att::heads),
                  static_cast<unsigned>(Att::batches < 65535 ? Att::batches : 65535));
  kernel<<<grid, detail::general_attention_warps * 32, smem, stream>>>(q, k, v, o, score);
  check_launch("attention_general_kernel");
}

}  // namespace fusedsl::cuda
