#pragma once
// Attention on AMX-BF16 tiles: O = softmax(scale * Q K^T + mask) V with Q, K, V and the
// probabilities P rounded to bf16 (round to nearest even), products accumulated in f32 and the
// softmax in f32 — the arithmetic of bf16 flash attention on GPUs and TPUs, and of the executor's
// amx_bf16 opt-in (not the f32 arithmetic of kernels::flash_attention).
//
// Per work item (one head, a block of 32 queries), whole rows: every key a row sees is scored at
// once, so the softmax is exact (no running max, no rescaling) and no seq_q x seq_kv buffer is
// ever held, only 32 x seq_kv scores per thread:
//   Qt = bf16(scale log2(e) Q_blk)             (A tiles: 2 x 16 rows, head_dim in steps of 32)
//   S  = Qt . Kt                                (tiles; Kt = bf16(K)^T packed per kv head)
//   mask, causal; m = row max; P = 2^(S - m)    (f32, the f32 kernel's softmax); l = row sum
//   Pt = bf16(P)                                (A tiles: keys in steps of 32)
//   O  = (Pt . Vt) / l                          (tiles; Vt = bf16(V) packed per kv head)
// Causal rows see keys j <= i + seq_kv - seq_q; key panels no row of the block sees are skipped.
// Grouped/multi-query heads: query head h reads kv head h / (num_heads / num_kv_heads); a thread
// packs K and V again only when its kv head changes. A query that sees no key (all masked, or
// causal with seq_kv < seq_q) gets a row of zeros, like kernels::flash_attention.
//
// Layouts are those of amx.hpp: A tiles in 16-row blocks (block stride 16 * kp, a k step of 32
// values at + s * 512), B packed in 32-column panels of pairs (pack_b_bf16). Without AMX (or with
// amx_mode::portable) the same products run on amx.hpp's portable loops over the same operands.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <stdexcept>

#include "fusedsl/backend/cpu/kernels/amx.hpp"
#include "fusedsl/backend/cpu/kernels/attention.hpp"  // shapes, arguments, the whole-row softmax
#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"

namespace fusedsl::cpu::kernels {

// bf16 elements of workspace one thread needs (flash_attention_amx takes threads times this):
// K^T and V of one kv head packed, the Q tiles, the f32 scores and the P tiles of 32 queries.
constexpr std::size_t attention_amx_workspace_elements_per_thread(std::ptrdiff_t head_dim,
                                                                  std::ptrdiff_t seq_kv) {
  const std::ptrdiff_t d = std::max<std::ptrdiff_t>(head_dim, 1),
                       kv = std::max<std::ptrdiff_t>(seq_kv, 1);
  const std::size_t dp = std::size_t(round_up(d, 32)), kvp = std::size_t(round_up(kv, 32));
  return packed_b_bf16_elements(d, kv) + packed_b_bf16_elements(kv, d)  // K^T, V
         + 32 * dp + 32                                                 // Q tiles
         + 2 * 32 * kvp + 32                                            // scores (f32)
         + 32 * kvp + 32;                                               // P tiles
}
constexpr std::size_t attention_amx_workspace_elements(std::ptrdiff_t head_dim,
                                                       std::ptrdiff_t seq_kv, int threads = 1) {
  return std::size_t(std::max(threads, 1)) *
         attention_amx_workspace_elements_per_thread(head_dim, seq_kv);
}

namespace detail {

#if FUSEDSL_CPU_AMX && defined(__AVX512BF16__)
#define FUSEDSL_CPU_AMX_ATTENTION_VECTOR 1
#else
#define FUSEDSL_CPU_AMX_ATTENTION_VECTOR 0
#endif

#if FUSEDSL_CPU_AMX_ATTENTION_VECTOR
// K^T of one kv head (keys rows ld apart, d dims each) packed as pack_b_bf16(d, seq_kv, k, ld,
// trans_b = true) does, for the tiles: a panel row holds one dim pair of 32 keys, so 16 keys'
// pairs are gathered as 64-bit values and rounded by one VCVTNE2PS2BF16.
inline void pack_kt_for_tiles(std::ptrdiff_t d, std::ptrdiff_t seq_kv, const float* k,
                              std::ptrdiff_t ld, bf16_bits* dst) {
  const std::ptrdiff_t dp = round_up(d, 32), panels = round_up(seq_kv, 32) / 32;
  const __m256i rows = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm256_set1_epi32(int(ld)));
  for (std::ptrdiff_t pnl = 0; pnl < panels; ++pnl)
    for (std::ptrdiff_t half = 0; half < 2; ++half) {
      const std::ptrdiff_t j0 = pnl * 32 + half * 16;  // first key of these 16
      const std::ptrdiff_t keys = std::clamp<std::ptrdiff_t>(seq_kv - j0, 0, 16);
      const __mmask8 live0 = __mmask8(keys >= 8 ? 0xff : (1u << keys) - 1u);
      const __mmask8 live1 = __mmask8(keys >= 16 ? 0xff : keys > 8 ? (1u << (keys - 8)) - 1u : 0u);
      bf16_bits* out = dst + pnl * dp * 32 + half * 32;
      for (std::ptrdiff_t r = 0; r < dp / 2; ++r) {
        const std::ptrdiff_t p = 2 * r;  // dims p, p + 1 of each key
        __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
        if (p + 1 < d) {  // both dims: one 64-bit gather lane per key
          if (live0)
            lo = _mm512_castpd_ps(_mm512_mask_i32gather_pd(_mm512_setzero_pd(), live0, rows,
                                                           k + j0 * ld + p, 4));
          if (live1)
            hi = _mm512_castpd_ps(_mm512_mask_i32gather_pd(_mm512_setzero_pd(), live1, rows,
                                                           k + (j0 + 8) * ld + p, 4));
        } else if (p < d) {  // the last, odd dim: its pair partner is zero
          alignas(64) float t[32] = {};
          for (std::ptrdiff_t q = 0; q < keys; ++q) t[2 * q] = k[(j0 + q) * ld + p];
          lo = _mm512_load_ps(t), hi = _mm512_load_ps(t + 16);
        }
        const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
        _mm512_store_si512(out + r * 64, std::bit_cast<__m512i>(v));
      }
    }
}

// V of one kv head (keys rows ld apart) packed as pack_b_bf16(seq_kv, d, v, ld, false) does, for
// the tiles: a panel row interleaves two keys' values of 32 dims, so each 16 dims of the two rows
// are rounded by one VCVTNE2PS2BF16 and interleaved by one VPERMW.
inline void pack_v_for_tiles(std::ptrdiff_t d, std::ptrdiff_t seq_kv, const float* v,
                             std::ptrdiff_t ld, bf16_bits* dst) {
  const std::ptrdiff_t kvp = round_up(seq_kv, 32), panels = round_up(d, 32) / 32;
  alignas(64) static constexpr short order[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                  21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                  11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(order);
  for (std::ptrdiff_t pnl = 0; pnl < panels; ++pnl)
    for (std::ptrdiff_t half = 0; half < 2; ++half) {
      const std::ptrdiff_t j0 = pnl * 32 + half * 16,
                           lanes = std::clamp<std::ptrdiff_t>(d - j0, 0, 16);
      const __mmask16 live = __mmask16(lanes >= 16 ? 0xffff : (1u << lanes) - 1u);
      bf16_bits* out = dst + pnl * kvp * 32 + half * 32;
      for (std::ptrdiff_t r = 0; r < kvp / 2; ++r) {
        const std::ptrdiff_t key = 2 * r;
        const __m512 v0 = key < seq_kv ? _mm512_maskz_loadu_ps(live, v + key * ld + j0)
                                       : _mm512_setzero_ps();
        const __m512 v1 = key + 1 < seq_kv ? _mm512_maskz_loadu_ps(live, v + (key + 1) * ld + j0)
                                           : _mm512_setzero_ps();
        const __m512i pairs = _mm512_permutexvar_epi16(
            interleave, std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(v1, v0)));
        _mm512_store_si512(out + r * 64, pairs);
      }
    }
}
#endif

// Packs K^T and V of kv head kvh into kt and vt (both 64-byte aligned inside their slots).
inline void pack_kv_for_amx(const attention_shape& s, const attention_args& a, std::ptrdiff_t kvh,
                            bf16_bits* kt, bf16_bits* vt, bool tiles) {
  const float* kh = a.k + kvh * a.k_head_stride;
  const float* vh = a.v + kvh * a.v_head_stride;
#if FUSEDSL_CPU_AMX_ATTENTION_VECTOR
  // The 64-bit gathers index keys by 32-bit element offsets (7 * ld must fit).
  if (tiles && a.k_row_stride <= (std::ptrdiff_t(1) << 28)) {
    pack_kt_for_tiles(s.head_dim, s.seq_kv, kh, a.k_row_stride, align_64(kt));
    pack_v_for_tiles(s.head_dim, s.seq_kv, vh, a.v_row_stride, align_64(vt));
    return;
  }
#endif
  (void)tiles;
  pack_b_bf16(s.head_dim, s.seq_kv, kh, a.k_row_stride, true, kt);
  pack_b_bf16(s.seq_kv, s.head_dim, vh, a.v_row_stride, false, vt);
}

// Runs the MT x NT variant of block_amx (tiles) or block_portable for a 32 x 32 block.
template <class F>
void amx_block(bool tiles, std::ptrdiff_t rows, std::ptrdiff_t cols, const bf16_bits* a,
               std::ptrdiff_t a_next, const bf16_bits* b, std::ptrdiff_t steps, float* out,
               std::ptrdiff_t ld, const F& between) {
#if FUSEDSL_CPU_AMX
  if (tiles) {
    if (rows > 16 && cols > 16)
      block_amx<2, 2>(a, a_next, b, steps, out, between, ld);
    else if (rows > 16)
      block_amx<2, 1>(a, a_next, b, steps, out, between, ld);
    else if (cols > 16)
      block_amx<1, 2>(a, a_next, b, steps, out, between, ld);
    else
      block_amx<1, 1>(a, a_next, b, steps, out, between, ld);
    return;
  }
#endif
  (void)tiles, (void)cols;
  block_portable(a, a_next, b, steps, rows, out, ld);
  between();
}

// One work item: queries [q0, q0 + rows) (rows <= 32) of head h, K^T and V of its kv head packed.
template <class Arch>
void attention_amx_block(const attention_shape& s, const attention_args& a, std::ptrdiff_t h,
                         std::ptrdiff_t q0, std::ptrdiff_t rows, const bf16_bits* kt,
                         const bf16_bits* vt, bf16_bits* qt, float* sc, bf16_bits* pt,
                         bool tiles) {
  const std::ptrdiff_t d = s.head_dim, dp = round_up(d, 32), ld = round_up(s.seq_kv, 32);
  auto visible = [&](std::ptrdiff_t i) { return keys_seen(s, a, q0 + i); };
  const std::ptrdiff_t kend = round_up(visible(rows - 1), 32);  // causal: the last row sees most
  float* oh = a.o + h * a.o_head_stride;
  if (kend == 0) {  // no query of these rows sees a key
    for (std::ptrdiff_t i = 0; i < rows; ++i)
      for (std::ptrdiff_t x = 0; x < d; ++x) oh[(q0 + i) * a.o_row_stride + x] = 0.0f;
    return;
  }
  const auto nothing = [] {};
  // S = bf16(scale log2(e) Q) . K^T over the key panels the block sees: base-2 scores for the
  // f32 kernel's softmax.
  convert_a_rows(0, 32, rows, d, a.q + h * a.q_head_stride + q0 * a.q_row_stride, a.q_row_stride,
                 false, qt, tiles, float(double(a.scale) * log2e));
  for (std::ptrdiff_t jp = 0; jp < kend / 32; ++jp)
    amx_block(tiles, rows, std::min<std::ptrdiff_t>(32, s.seq_kv - jp * 32), qt, 16 * dp,
              kt + jp * dp * 32, dp / 32, sc + jp * 32, ld, nothing);
  // Exact softmax per row, in place: P = 2^(S - max) over the keys the row sees, zeros after.
  alignas(64) float inv[32];
  softmax_whole_rows<Arch>(sc, ld, rows, kend, visible,
                           a.mask ? a.mask + q0 * a.mask_row_stride : nullptr, a.mask_row_stride,
                           inv);
  // O = bf16(P) . V / l, one 32-dim panel at a time.
  convert_a_rows(0, 32, rows, kend, sc, ld, false, pt, tiles);
  alignas(64) float acc[32 * 32];
  for (std::ptrdiff_t x0 = 0; x0 < dp; x0 += 32) {
    const std::ptrdiff_t cols = std::min<std::ptrdiff_t>(32, d - x0);
    amx_block(tiles, rows, cols, pt, 16 * kend, vt + (x0 / 32) * ld * 32, kend / 32, acc, 32,
              nothing);
    for (std::ptrdiff_t i = 0; i < rows; ++i) {
      float* orow = oh + (q0 + i) * a.o_row_stride + x0;
      for (std::ptrdiff_t x = 0; x < cols; ++x) orow[x] = acc[i * 32 + x] * inv[i];
    }
  }
}

}  // namespace detail

// Attention over all heads on AMX-BF16 tiles (the portable loops where AMX is absent, or with
// amx_mode::portable); shapes and arguments as kernels::flash_attention. `workspace` holds
// attention_amx_workspace_elements(head_dim, seq_kv, threads) bf16 values (threads =
// pool->size(), 1 without a pool). Work items (head, 32 queries) are split statically across
// threads; results do not depend on the thread count.
template <class Arch = native_arch>
void flash_attention_amx(const attention_shape& s, const attention_args& a, bf16_bits* workspace,
                         thread_pool* pool = nullptr, amx_mode mode = amx_mode::automatic) {
  detail::check_attention(s, a);
  if (s.seq_q == 0) return;
  if (workspace == nullptr) throw std::invalid_argument("flash_attention_amx: workspace is null");
  const bool tiles = mode == amx_mode::automatic && amx_available();
  const std::ptrdiff_t d = s.head_dim, dp = round_up(d, 32), kvp = round_up(s.seq_kv, 32);
  const std::size_t per_thread = attention_amx_workspace_elements_per_thread(d, s.seq_kv);
  const std::ptrdiff_t blocks = (s.seq_q + 31) / 32;
  parallel_for(pool, s.num_heads * blocks, [&](std::ptrdiff_t b, std::ptrdiff_t e, int t) {
    bf16_bits* kt = workspace + std::size_t(t) * per_thread;
    bf16_bits* vt = kt + packed_b_bf16_elements(d, s.seq_kv);
    bf16_bits* qt = detail::align_64(vt + packed_b_bf16_elements(s.seq_kv, d));
    float* sc = reinterpret_cast<float*>(detail::align_64(qt + 32 * dp));
    bf16_bits* pt = detail::align_64(reinterpret_cast<bf16_bits*>(sc + 32 * kvp));
#if FUSEDSL_CPU_AMX
    if (tiles) {
      static constexpr detail::tile_config cfg{};
      _tile_loadconfig(&cfg);  // per thread: the configuration is thread state
    }
#endif
    std::ptrdiff_t packed = -1;  // kv head whose K^T and V are packed (consecutive items share it)
    for (std::ptrdiff_t item = b; item < e; ++item) {
      const std::ptrdiff_t h = item / blocks, kvh = h / (s.num_heads / s.num_kv_heads);
      if (kvh != packed) detail::pack_kv_for_amx(s, a, kvh, kt, vt, tiles), packed = kvh;
      const std::ptrdiff_t q0 = (item % blocks) * 32;
      detail::attention_amx_block<Arch>(s, a, h, q0, std::min<std::ptrdiff_t>(32, s.seq_q - q0),
                                        detail::align_64(kt), detail::align_64(vt), qt, sc, pt,
                                        tiles);
    }
#if FUSEDSL_CPU_AMX
    if (tiles) _tile_release();
#endif
  });
}

}  // namespace fusedsl::cpu::kernels
