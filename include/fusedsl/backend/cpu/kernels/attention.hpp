#pragma once
// Flash attention on the CPU: O = softmax(scale * Q K^T + mask) V per head, computed block by
// block with an online softmax (Dao et al., "FlashAttention", 2022, Alg. 1; Milakov & Gimelshein
// 2018 for the running max/sum), so no seq_q x seq_kv matrix is ever stored.
//
// Per (head, block of BQ queries): Q^T is packed once (scaled); then for each block of BK keys
//   S^T = K_blk . Q^T             (GEMM micro-kernel, keys x queries, K read in place)
//   mask / causal on the block    (only blocks that cross the diagonal are masked element-wise)
//   m' = max(m, colmax S^T), P^T = 2^(S^T - m'), l = l 2^(m - m') + colsum P^T
//   O_acc = O_acc 2^(m - m') + P V (GEMM micro-kernel, A = P read in place from S^T)
// Computing S transposed makes every softmax reduction a vertical (lane-wise) one. Scores are kept
// in base 2: log2(e) is folded into the scale of Q (or of K^T) and into the mask as it is added,
// so every exp is an exp2 (9 vector operations against 12; vmath.hpp).
// Causal blocks entirely above the diagonal are skipped. Grouped/multi-query heads: query head h
// reads key/value head h / (num_heads / num_kv_heads).
//
// Short sequences (seq_kv <= whole_rows_max_kv) take the whole_rows path instead: the scores of
// mr queries against every key they see, an exact row softmax, then P V, with K^T packed once per
// key/value head (see attention_path).
//
// A few queries (seq_q <= decode_max_queries: a decode step) take the decode path: per (head,
// query, split of the keys), the scores by dot products against K's rows read in place (no
// transpose, no tile of padded queries), an online softmax over chunks of decode_chunk keys, and
// P V; the splits' partial maxima, sums and outputs are then combined in a fixed order (Dao et
// al.'s flash-decoding, 2023). The split length depends on seq_kv only, so results do not depend
// on the thread count. K and V may be bf16 there (a bf16 KV cache: attention_args::k_bf16,
// v_bf16), read in place and widened as they are loaded, exactly.
//
// Layout: element (t, h, d) of Q is q[t*q_row_stride + h*q_head_stride + d]; K, V, O likewise.
// Causal masking aligns the last query with the last key (query i sees keys j <= i + seq_kv -
// seq_q). The optional additive mask is seq_q x seq_kv (mask[i*mask_row_stride + j]), shared by
// all heads. A query whose keys are all masked gets an output row of zeros.
//
// A score modifier (ScoreMod, see no_score_mod) may rewrite every score after Q Kᵀ and before the
// softmax (masks of any kind, biases): the kernels hand it blocks of base-2 scores (scale log2(e)
// q.k) with the head and the positions they hold, and apply causal masking after it.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include "fusedsl/backend/cpu/kernels/bf16.hpp"
#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/backend/cpu/kernels/vmath.hpp"

namespace fusedsl::cpu::kernels {

struct attention_shape {
  std::ptrdiff_t seq_q = 0, seq_kv = 0, num_heads = 1, num_kv_heads = 1, head_dim = 0;
};

struct attention_args {
  const float* q = nullptr;
  std::ptrdiff_t q_row_stride = 0, q_head_stride = 0;
  const float* k = nullptr;
  std::ptrdiff_t k_row_stride = 0, k_head_stride = 0;
  const float* v = nullptr;
  std::ptrdiff_t v_row_stride = 0, v_head_stride = 0;
  float* o = nullptr;
  std::ptrdiff_t o_row_stride = 0, o_head_stride = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
  bool causal = false;
  const float* mask = nullptr;  // additive, seq_q x seq_kv; null for none
  std::ptrdiff_t mask_row_stride = 0;
  // K and V kept as bf16 (a bf16 KV cache), in place of k and v (null then), with the same strides
  // in elements: read in place and widened as they are loaded. The decode path only.
  const bf16_bits* k_bf16 = nullptr;
  const bf16_bits* v_bf16 = nullptr;
};

// The score modifier that changes nothing. A modifier has
//   keys_by_queries(h, q0, bq, k0, bk, st, ld)  st[r * ld + j]: key k0 + r, query q0 + j
//   queries_by_keys(h, q0, rows, sc, ld, visible) sc[i * ld + j]: query q0 + i, key j < visible(i)
// and rewrites the base-2 scores in place.
struct no_score_mod {
  static constexpr bool active = false;
  void keys_by_queries(std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t,
                       std::ptrdiff_t, float*, std::ptrdiff_t) const {}
  template <class Visible>
  void queries_by_keys(std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t, float*, std::ptrdiff_t,
                       const Visible&) const {}
};

// Arguments for the usual layout: one row per position holding every head's head_dim values side
// by side (a linear's output before the head split). Q and O rows are q_ld floats apart, K and V
// rows kv_ld apart; the scale is 1 / sqrt(head_dim), no mask, not causal.
inline attention_args attention_args_by_rows(const attention_shape& s, const float* q,
                                             const float* k, const float* v, float* o,
                                             std::ptrdiff_t q_ld, std::ptrdiff_t kv_ld) {
  const std::ptrdiff_t d = s.head_dim;
  attention_args a;
  a.q = q, a.q_row_stride = q_ld, a.q_head_stride = d;
  a.k = k, a.k_row_stride = kv_ld, a.k_head_stride = d;
  a.v = v, a.v_row_stride = kv_ld, a.v_head_stride = d;
  a.o = o, a.o_row_stride = q_ld, a.o_head_stride = d;
  a.scale = 1.0f / std::sqrt(float(d));
  return a;
}

// Block sizes: BQ queries x BK keys; both multiples of the GEMM tile (mr and nr).
template <class Arch>
struct attention_blocking {
  static constexpr int mr = gemm_tile<Arch>::mr, nr = gemm_tile<Arch>::nr;
  static constexpr int lcm = [] {
    int a = mr, b = nr;
    while (b != 0) {
      const int t = a % b;
      a = b;
      b = t;
    }
    return mr / a * nr;
  }();
  static constexpr int bq = lcm >= 64 ? lcm : (64 / lcm) * lcm;
  static constexpr int bk = bq;
};

// Which algorithm flash_attention uses. `whole_rows` (short sequences, seq_kv <=
// whole_rows_max_kv): per mr queries, their scores against every key at once, an exact row
// softmax, then P V — no running max or rescaling, and K^T packed once per head. `flash`: the
// blocked online softmax above, for any length. `automatic` picks whole_rows when it applies.
// `decode` (seq_q <= decode_max_queries): see the top comment; automatic picks it when it applies.
enum class attention_path { automatic, flash, whole_rows, decode };
// Measured (one thread, d 64): whole_rows at 0.55 of peak against flash's 0.42 at 512 keys,
// about equal at 1024; the buffers stay bounded (mr x 512 scores, K^T of 512 keys).
inline constexpr std::ptrdiff_t whole_rows_max_kv = 512;
// The decode path: at most this many queries; keys scored per chunk; keys per split (at least).
inline constexpr std::ptrdiff_t decode_max_queries = 4, decode_chunk = 256, decode_split = 512;

// The paths one instantiation of flash_attention compiles (all by default). A caller whose shapes
// are fixed at compile time names only those its calls can take (attention_paths_for), so each
// instantiation carries one or two of the three loop nests; a call that needs a path left out
// throws std::logic_error.
struct attention_paths {
  bool decode = true, whole_rows = true, flash = true;
};
// The paths `automatic` can take for seq_q queries and at most max_kv keys.
constexpr attention_paths attention_paths_for(std::ptrdiff_t seq_q, std::ptrdiff_t max_kv) {
  if (seq_q <= decode_max_queries) return {true, false, false};
  return {false, true, max_kv > whole_rows_max_kv};
}

// Floats of workspace one thread needs; flash_attention takes threads times this.
template <class Arch = native_arch>
constexpr std::size_t attention_workspace_floats_per_thread(std::ptrdiff_t head_dim) {
  using blk = attention_blocking<Arch>;
  const std::ptrdiff_t d = std::max<std::ptrdiff_t>(head_dim, 1), dp = round_up(d, blk::nr);
  const std::size_t flash = std::size_t(dp * blk::bq         // Q^T, packed and scaled
                                        + blk::bk * blk::bq  // S^T / P^T block
                                        + blk::bq * dp       // O accumulator
                                        + blk::bk * dp       // V block, packed when d % nr != 0
                                        + 3 * blk::bq);      // running max, sum, correction
  const std::ptrdiff_t kv = round_up(whole_rows_max_kv, blk::nr);
  const std::size_t whole_rows = std::size_t(d * kv          // K^T, packed in nr-key panels
                                             + blk::mr * kv  // scores / P of mr queries
                                             + kv * dp       // V, packed when d % nr != 0
                                             + blk::mr);     // 1 / row sums
  return std::max(flash, whole_rows);
}
template <class Arch = native_arch>
constexpr std::size_t attention_workspace_floats(std::ptrdiff_t head_dim, int threads = 1) {
  return std::size_t(threads) * attention_workspace_floats_per_thread<Arch>(head_dim);
}

namespace detail {

// An additive mask value in base 2 (times log2(e)), finite where it is finite: frameworks mask with
// the lowest float as often as with -inf, and -FLT_MAX log2(e) overflowing to -inf would turn a
// fully masked row's uniform weights (what softmax(s + mask) gives) into zeros.
inline float mask_in_base2(float m) {
  const float t = float(log2e) * m;
  return std::isinf(t) && !std::isinf(m) ? std::copysign(std::numeric_limits<float>::max(), t) : t;
}

inline void check_attention(const attention_shape& s, const attention_args& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("flash_attention: " + m); };
  if (s.seq_q < 0 || s.seq_kv < 0 || s.head_dim <= 0 || s.num_heads <= 0 || s.num_kv_heads <= 0)
    fail("sizes must be positive (seq_q " + std::to_string(s.seq_q) + ", seq_kv " +
         std::to_string(s.seq_kv) + ", heads " + std::to_string(s.num_heads) + ", kv heads " +
         std::to_string(s.num_kv_heads) + ", head_dim " + std::to_string(s.head_dim) + ")");
  if (s.num_heads % s.num_kv_heads != 0)
    fail("num_heads " + std::to_string(s.num_heads) + " is not a multiple of num_kv_heads " +
         std::to_string(s.num_kv_heads));
  if (!a.q || !a.o) fail("q and o must not be null");
  if (a.k_bf16 || a.v_bf16) {
    if (!a.k_bf16 || !a.v_bf16 || a.k || a.v)
      fail("give k and v as f32 or both as bf16 (k_bf16, v_bf16), each once");
    if (s.seq_q > decode_max_queries)
      fail("bf16 k and v are read by the decode path only (seq_q <= " +
           std::to_string(decode_max_queries) + ", got " + std::to_string(s.seq_q) +
           "): widen them to f32");
  } else if (!a.k || !a.v) {
    fail("k and v must not be null");
  }
}

template <class Arch, class Mod>
void attention_block(const attention_shape& s, const attention_args& a, std::ptrdiff_t h,
                     std::ptrdiff_t q0, float* ws, const Mod& mod) {
  using mk = micro_kernel<Arch>;
  using blk = attention_blocking<Arch>;
  using V = vec_t<Arch>;
  constexpr int MR = mk::MR, NR = mk::NR, W = simd<Arch>::width, BQ = blk::bq, BK = blk::bk;
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  const std::ptrdiff_t d = s.head_dim, dp = round_up(d, NR);
  const std::ptrdiff_t bq = std::min<std::ptrdiff_t>(BQ, s.seq_q - q0);
  const std::ptrdiff_t kvh = h / (s.num_heads / s.num_kv_heads);
  const std::ptrdiff_t offset = s.seq_kv - s.seq_q;  // causal: query i sees keys <= i + offset

  float* qt = ws;              // dp/NR panels of d x NR  (panel-major: [panel][dim][NR])
  float* st = qt + dp * BQ;    // BK x BQ, keys x queries
  float* oacc = st + BK * BQ;  // BQ x dp
  float* vpack = oacc + BQ * dp;
  float* m = vpack + BK * dp;
  float* l = m + BQ;
  float* corr = l + BQ;

  // Q^T block, scaled: qt[panel][dim][j] = scale log2(e) Q(q0 + panel*NR + j, h, dim).
  const float* qh = a.q + h * a.q_head_stride;
  const float qscale = float(double(a.scale) * log2e);
  for (std::ptrdiff_t pnl = 0; pnl < BQ / NR; ++pnl)
    for (std::ptrdiff_t dim = 0; dim < d; ++dim)
      for (std::ptrdiff_t j = 0; j < NR; ++j) {
        const std::ptrdiff_t qi = pnl * NR + j;
        qt[(pnl * d + dim) * NR + j] = qi < bq ? qscale * qh[(q0 + qi) * a.q_row_stride + dim] : 0;
      }
  for (std::ptrdiff_t j = 0; j < BQ; ++j) m[j] = neg_inf, l[j] = 0.0f;
  for (std::ptrdiff_t i = 0; i < BQ * dp; ++i) oacc[i] = 0.0f;

  const float* kh = a.k + kvh * a.k_head_stride;
  const float* vh = a.v + kvh * a.v_head_stride;
  std::ptrdiff_t kv_end = s.seq_kv;
  if (a.causal) kv_end = std::clamp<std::ptrdiff_t>(q0 + bq + offset, 0, s.seq_kv);

  for (std::ptrdiff_t kb = 0; kb < kv_end; kb += BK) {
    const std::ptrdiff_t bk = std::min<std::ptrdiff_t>(BK, kv_end - kb);
    // S^T = K_blk . Q^T: rows are keys (MR at a time), columns are queries.
    for (std::ptrdiff_t r0 = 0; r0 < bk; r0 += MR) {
      const std::ptrdiff_t rows = std::min<std::ptrdiff_t>(MR, bk - r0);
      const float* ka = kh + (kb + r0) * a.k_row_stride;
      for (std::ptrdiff_t pnl = 0; pnl < BQ / NR; ++pnl) {
        auto store_scores = [&](typename mk::tile& acc) {
          mk::store_rows(acc, rows, st + r0 * BQ + pnl * NR, BQ);
        };
        mk::compute(rows, d, ka, a.k_row_stride, 1, qt + pnl * d * NR, NR, store_scores);
      }
    }
    // Mask: the score modifier or the additive mask, then causal on blocks that cross the diagonal.
    if constexpr (Mod::active) mod.keys_by_queries(h, q0, bq, kb, bk, st, BQ);
    if (a.mask)
      for (std::ptrdiff_t r = 0; r < bk; ++r)
        for (std::ptrdiff_t j = 0; j < bq; ++j)
          st[r * BQ + j] += mask_in_base2(a.mask[(q0 + j) * a.mask_row_stride + kb + r]);
    if (a.causal && kb + bk - 1 > q0 + offset)
      for (std::ptrdiff_t r = 0; r < bk; ++r)
        for (std::ptrdiff_t j = 0; j < BQ; ++j)
          if (kb + r > q0 + j + offset) st[r * BQ + j] = neg_inf;
    // Online softmax, vertical over keys, W queries at a time.
    for (std::ptrdiff_t j = 0; j < BQ; j += W) {
      V mx = simd<Arch>::load(m + j);
      for (std::ptrdiff_t r = 0; r < bk; ++r) mx = maximum(mx, simd<Arch>::load(st + r * BQ + j));
      // A query with every key so far masked keeps max -inf; shift by 0 so exp gives 0, not NaN.
      const V shift = where(mx == V(neg_inf), V(0.0f), mx);
      const V c = vexp2_nonpositive(simd<Arch>::load(m + j) - shift);
      V sum(0.0f);
      for (std::ptrdiff_t r = 0; r < bk; ++r) {
        const V p = vexp2_nonpositive(simd<Arch>::load(st + r * BQ + j) - shift);
        simd<Arch>::store(st + r * BQ + j, p);
        sum = sum + p;
      }
      simd<Arch>::store(l + j, fmadd(simd<Arch>::load(l + j), c, sum));
      simd<Arch>::store(m + j, mx);
      simd<Arch>::store(corr + j, c);
    }
    // O_acc = O_acc * corr + P V.
    for (std::ptrdiff_t i = 0; i < bq; ++i) {
      const V c(corr[i]);
      for (std::ptrdiff_t x = 0; x < dp; x += W)
        simd<Arch>::store(oacc + i * dp + x, simd<Arch>::load(oacc + i * dp + x) * c);
    }
    const float* vb = vh + kb * a.v_row_stride;
    std::ptrdiff_t vstride = a.v_row_stride;
    if (d % NR != 0) {  // pad V rows to whole tiles
      for (std::ptrdiff_t r = 0; r < bk; ++r)
        for (std::ptrdiff_t x = 0; x < dp; ++x)
          vpack[r * dp + x] = x < d ? vb[r * a.v_row_stride + x] : 0.0f;
      vb = vpack, vstride = dp;
    }
    for (std::ptrdiff_t i0 = 0; i0 < bq; i0 += MR) {
      const std::ptrdiff_t rows = std::min<std::ptrdiff_t>(MR, bq - i0);
      for (std::ptrdiff_t x0 = 0; x0 < dp; x0 += NR) {
        auto accumulate = [&](typename mk::tile& acc) {
#pragma GCC unroll 16
          for (int i = 0; i < MR; ++i) {
            if (i >= rows) break;
#pragma GCC unroll 4
            for (int v = 0; v < mk::NV; ++v) {
              float* o = oacc + (i0 + i) * dp + x0 + v * W;
              simd<Arch>::store(o, simd<Arch>::load(o) + acc[i][v]);
            }
          }
        };
        mk::compute(rows, bk, st + i0, 1, BQ, vb + x0, vstride, accumulate);
      }
    }
  }
  // O = O_acc / l; a query with no visible key (l == 0) gets zeros.
  float* oh = a.o + h * a.o_head_stride;
  for (std::ptrdiff_t i = 0; i < bq; ++i) {
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    float* orow = oh + (q0 + i) * a.o_row_stride;
    for (std::ptrdiff_t x = 0; x < d; ++x) orow[x] = oacc[i * dp + x] * inv;
  }
}

#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
// r[i] = row i of a 16 x 16 block becomes r[c] = column c: 64 shuffles in four rounds (pairs of
// floats, of float pairs, of 128-bit lanes twice), several times faster than one 16-lane gather
// per column (docs/design.md, "Kernel choices").
[[gnu::always_inline]] inline void transpose_16x16(__m512 (&r)[16]) {
  __m512 t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  const auto lo = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  const auto hi = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {
    r[i] = lo(t[i], t[i + 2]);
    r[i + 1] = hi(t[i], t[i + 2]);
    r[i + 2] = lo(t[i + 1], t[i + 3]);
    r[i + 3] = hi(t[i + 1], t[i + 3]);
  }
  // r[4g + c] now holds element c of each 128-bit lane of rows 4g..4g+3, lane by lane; two rounds
  // of 128-bit lane shuffles (even and odd lanes of a pair) finish the transpose.
  const auto lanes = [](__m512 a, __m512 b, __m512& even, __m512& odd) {
    even = _mm512_shuffle_f32x4(a, b, 0x88);
    odd = _mm512_shuffle_f32x4(a, b, 0xdd);
  };
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    lanes(r[i], r[i + 4], t[i], t[i + 4]);
    lanes(r[i + 8], r[i + 12], t[i + 8], t[i + 12]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    lanes(t[i], t[i + 8], r[i], r[i + 8]);
    lanes(t[i + 4], t[i + 12], r[i + 4], r[i + 12]);
  }
}
#endif

// kt = scale * K^T (seq_kv keys of d dimensions, rows ld apart) in nr-key panels, zero-padded:
// panel p holds dims x nr floats for keys [p*nr, p*nr + nr).
template <class Arch>
void pack_scaled_kt(std::ptrdiff_t d, std::ptrdiff_t seq_kv, const float* k, std::ptrdiff_t ld,
                    float scale, float* kt) {
  constexpr int NR = gemm_tile<Arch>::nr;
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  if constexpr (std::is_same_v<Arch, xsimd::avx512f>) {
    // Whole 16 x 16 blocks (16 keys, 16 dims) by register transposes; the rest (a last group of
    // fewer keys, d % 16 dims) one dimension of 16 keys per gather: the scalar transpose's
    // strided stores cost 2x more.
    if (ld <= (std::ptrdiff_t(1) << 26)) {  // 15 * ld fits the 32-bit gather index
      const __m512i rows =
          _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                             _mm512_set1_epi32(int(ld)));
      const __m512 sc = _mm512_set1_ps(scale);
      for (std::ptrdiff_t j0 = 0; j0 < round_up(seq_kv, NR); j0 += 16) {
        const std::ptrdiff_t keys = std::clamp<std::ptrdiff_t>(seq_kv - j0, 0, 16);
        const __mmask16 live = __mmask16((1u << keys) - 1u);
        float* out = kt + (j0 / NR) * d * NR + j0 % NR;
        std::ptrdiff_t p = 0;
        if (keys == 16) {
          for (; p + 16 <= d; p += 16) {
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(k + (j0 + i) * ld + p);
            transpose_16x16(r);
#pragma GCC unroll 16
            for (int c = 0; c < 16; ++c)
              _mm512_storeu_ps(out + (p + c) * NR, _mm512_mul_ps(r[c], sc));
          }
        }
        for (; p < d; ++p) {
          const __m512 col = keys == 0 ? _mm512_setzero_ps()
                                       : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, rows,
                                                                  k + j0 * ld + p, 4);
          _mm512_storeu_ps(out + p * NR, _mm512_mul_ps(col, sc));
        }
      }
      return;
    }
  }
#endif
  pack_b_panels<NR>(d, seq_kv, k, ld, true, kt);  // B(p, j) = K(j, p): the transposed form
  const std::ptrdiff_t n = d * round_up(seq_kv, NR);
  for (std::ptrdiff_t i = 0; i < n; ++i) kt[i] *= scale;
}

// whole_rows path: K^T (and V when d % nr != 0) of kv head `kvh` packed into ws.
template <class Arch>
void pack_whole_rows_kv(const attention_shape& s, const attention_args& a, std::ptrdiff_t kvh,
                        float* kt, float* vpack) {
  constexpr int NR = gemm_tile<Arch>::nr;
  const std::ptrdiff_t d = s.head_dim, dp = round_up(d, NR);
  // The scale, times log2(e) for the base-2 softmax, goes into K^T once here rather than onto
  // every score.
  pack_scaled_kt<Arch>(d, s.seq_kv, a.k + kvh * a.k_head_stride, a.k_row_stride,
                       float(double(a.scale) * log2e), kt);
  if (d % NR != 0) {
    const float* vh = a.v + kvh * a.v_head_stride;
    for (std::ptrdiff_t r = 0; r < s.seq_kv; ++r)
      for (std::ptrdiff_t x = 0; x < dp; ++x)
        vpack[r * dp + x] = x < d ? vh[r * a.v_row_stride + x] : 0.0f;
  }
}

// How many keys query q sees: all, or (causal) those up to q + seq_kv - seq_q.
inline std::ptrdiff_t keys_seen(const attention_shape& s, const attention_args& a,
                                std::ptrdiff_t q) {
  return a.causal ? std::clamp<std::ptrdiff_t>(q + 1 + s.seq_kv - s.seq_q, 0, s.seq_kv) : s.seq_kv;
}

// Exact softmax of `rows` score rows (ld apart, rows <= 32) in place, for the whole_rows paths.
// The scores are in base 2 (scaled by log2(e) already). Row i adds its mask row (mask + i *
// mask_ld, if any; natural units, so times log2(e)) over the visible(i) keys it sees, then
// P = 2^(S - row max) there and 0 up to kend (a multiple of the vector width); inv[i] = 1 / sum
// of P, or 0 for a row whose keys are all masked (its P is all 0, so its output is 0). A NaN
// score makes the row's P and inv NaN (the one-op vector max may drop a NaN, so a row whose max
// looks like -inf is checked for one). The row maxima come first, then the exp passes:
// independent chains that overlap.
template <class Arch, class Visible, class Mod>
void softmax_whole_rows(float* sc, std::ptrdiff_t ld, std::ptrdiff_t rows, std::ptrdiff_t kend,
                        const Visible& visible, const float* mask, std::ptrdiff_t mask_ld,
                        float* inv, const Mod& mod, std::ptrdiff_t h, std::ptrdiff_t q0) {
  if constexpr (Mod::active) mod.queries_by_keys(h, q0, rows, sc, ld, visible);
  using V = vec_t<Arch>;
  constexpr int W = simd<Arch>::width;
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  alignas(64) float mx[32];
  for (std::ptrdiff_t i = 0; i < rows; ++i) {
    float* row = sc + i * ld;
    const std::ptrdiff_t vis = visible(i);
    if (mask) {
      const float* mrow = mask + i * mask_ld;
      for (std::ptrdiff_t j = 0; j < vis; ++j) row[j] += mask_in_base2(mrow[j]);
    }
    for (std::ptrdiff_t j = vis; j < kend; ++j) row[j] = neg_inf;
    V m0(neg_inf), m1(neg_inf);
    std::ptrdiff_t j = 0;
    for (; j + 2 * W <= kend; j += 2 * W) {
      m0 = maximum(m0, simd<Arch>::load(row + j));
      m1 = maximum(m1, simd<Arch>::load(row + j + W));
    }
    for (; j < kend; j += W) m0 = maximum(m0, simd<Arch>::load(row + j));
    mx[i] = simd<Arch>::reduce_max(maximum(m0, m1));
  }
  for (std::ptrdiff_t i = 0; i < rows; ++i) {
    float* row = sc + i * ld;
    if (mx[i] == neg_inf) {  // every key masked: P = 0, so O = 0 (unless a score is NaN)
      float fill = 0.0f;
      for (std::ptrdiff_t j = 0; j < kend; ++j) fill = std::isnan(row[j]) ? row[j] : fill;
      for (std::ptrdiff_t j = 0; j < kend; ++j) row[j] = fill;
      inv[i] = fill;
      continue;
    }
    const V shift(mx[i]);
    V s0(0.0f), s1(0.0f);
    std::ptrdiff_t j = 0;
    for (; j + 2 * W <= kend; j += 2 * W) {
      const V p0 = vexp2_nonpositive(simd<Arch>::load(row + j) - shift);
      const V p1 = vexp2_nonpositive(simd<Arch>::load(row + j + W) - shift);
      simd<Arch>::store(row + j, p0);
      simd<Arch>::store(row + j + W, p1);
      s0 = s0 + p0, s1 = s1 + p1;
    }
    for (; j < kend; j += W) {
      const V p = vexp2_nonpositive(simd<Arch>::load(row + j) - shift);
      simd<Arch>::store(row + j, p);
      s0 = s0 + p;
    }
    inv[i] = 1.0f / simd<Arch>::reduce_add(s0 + s1);
  }
}

template <class Arch, class Visible>
void softmax_whole_rows(float* sc, std::ptrdiff_t ld, std::ptrdiff_t rows, std::ptrdiff_t kend,
                        const Visible& visible, const float* mask, std::ptrdiff_t mask_ld,
                        float* inv) {
  softmax_whole_rows<Arch>(sc, ld, rows, kend, visible, mask, mask_ld, inv, no_score_mod{}, 0, 0);
}

// whole_rows path for queries [q0, q0 + rows) (rows <= mr) of head h, K^T and V already packed.
template <class Arch, class Mod>
void attention_whole_rows(const attention_shape& s, const attention_args& a, std::ptrdiff_t h,
                          std::ptrdiff_t q0, std::ptrdiff_t rows, const float* kt,
                          const float* vpack, float* sc, float* inv, const Mod& mod) {
  using mk = micro_kernel<Arch>;
  using V = vec_t<Arch>;
  constexpr int MR = mk::MR, NR = mk::NR, W = simd<Arch>::width;
  const std::ptrdiff_t d = s.head_dim, dp = round_up(d, NR),
                       kvh = h / (s.num_heads / s.num_kv_heads);
  const std::ptrdiff_t ld = round_up(s.seq_kv, NR);  // row stride of the score rows
  // Keys row i sees: all, or (causal) those up to i + seq_kv - seq_q.
  auto visible = [&](std::ptrdiff_t i) { return keys_seen(s, a, q0 + i); };
  const std::ptrdiff_t kend = round_up(visible(rows - 1), NR);  // causal: the last row sees most
  float* oh = a.o + h * a.o_head_stride;
  if (kend == 0) {  // no query of these rows sees a key
    for (std::ptrdiff_t i = 0; i < rows; ++i)
      for (std::ptrdiff_t x = 0; x < d; ++x) oh[(q0 + i) * a.o_row_stride + x] = 0.0f;
    return;
  }
  // S = Q (scale K)^T over the key panels any of these rows sees; Q is read in place.
  const float* qa = a.q + h * a.q_head_stride + q0 * a.q_row_stride;
  for (std::ptrdiff_t jp = 0; jp < kend / NR; ++jp) {
    auto store_scores = [&](typename mk::tile& acc) {
      mk::store_rows(acc, rows, sc + jp * NR, ld);
    };
    // K^T's panel (d x NR) sits in L1, as do V's rows at short lengths (and the hardware
    // prefetcher keeps up with them at 512 keys): no software prefetching in either product.
    mk::template compute<false>(rows, d, qa, a.q_row_stride, 1, kt + jp * d * NR, NR, store_scores);
  }
  const float* mask = a.mask ? a.mask + q0 * a.mask_row_stride : nullptr;
  softmax_whole_rows<Arch>(sc, ld, rows, kend, visible, mask, a.mask_row_stride, inv, mod, h, q0);
  // O = diag(inv) P V, V read in place when its rows hold whole nr-column panels.
  const float* vb = vpack;
  std::ptrdiff_t vstride = dp;
  if (d % NR == 0) vb = a.v + kvh * a.v_head_stride, vstride = a.v_row_stride;
  const std::ptrdiff_t kk = std::min(kend, s.seq_kv);
  for (std::ptrdiff_t x0 = 0; x0 < dp; x0 += NR) {
    const std::ptrdiff_t cols = std::min<std::ptrdiff_t>(NR, d - x0);
    auto store_output = [&](typename mk::tile& acc) {
      if (cols == NR) {
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          if (i >= rows) break;
          const V r(inv[i]);
#pragma GCC unroll 4
          for (int v = 0; v < mk::NV; ++v)
            simd<Arch>::store(oh + (q0 + i) * a.o_row_stride + x0 + v * W, acc[i][v] * r);
        }
      } else {
        alignas(64) float t[NR];
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {  // unrolled: acc[i] must name a register, not memory
          if (i >= rows) break;
#pragma GCC unroll 4
          for (int v = 0; v < mk::NV; ++v) simd<Arch>::store(t + v * W, acc[i][v]);
          for (std::ptrdiff_t x = 0; x < cols; ++x)
            oh[(q0 + i) * a.o_row_stride + x0 + x] = t[x] * inv[i];
        }
      }
    };
    mk::template compute<false>(rows, kk, sc, ld, 1, vb + x0, vstride, store_output);
  }
}

// ---- the decode path ----

// Floats one thread of the decode path uses: the scaled query, one chunk of scores, one partial.
template <class Arch>
constexpr std::ptrdiff_t decode_scratch_floats(std::ptrdiff_t head_dim) {
  const std::ptrdiff_t d = std::max<std::ptrdiff_t>(head_dim, 1);
  return round_up(d, gemm_tile<Arch>::nr) + decode_chunk + d + 64;
}

// Keys [k0, k1) of query qi of head h, in chunks of decode_chunk keys with an online softmax:
// partial = {m, l, o[0 .. d)}, the largest base-2 score, the sum of 2^(score - m) and the
// unnormalised sum of those weights times V's rows (m = -inf, l = 0, o = 0 for no key).
// KV: float, or bf16_bits (a.k_bf16 and a.v_bf16, widened as loaded).
template <class Arch, class KV, class Mod>
void attention_decode_split(const attention_shape& s, const attention_args& a, std::ptrdiff_t h,
                            std::ptrdiff_t qi, std::ptrdiff_t k0, std::ptrdiff_t k1, float* ws,
                            float* partial, const Mod& mod) {
  using V = vec_t<Arch>;
  constexpr int W = simd<Arch>::width;
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  const std::ptrdiff_t d = s.head_dim, dv = d / W * W;
  const std::ptrdiff_t kvh = h / (s.num_heads / s.num_kv_heads);
  float* qs = ws;                                     // the query, scaled by scale log2(e)
  float* sc = ws + round_up(d, gemm_tile<Arch>::nr);  // one chunk of scores, then weights
  float* o = partial + 2;
  const float qscale = float(double(a.scale) * log2e);
  const float* qrow = a.q + h * a.q_head_stride + qi * a.q_row_stride;
  for (std::ptrdiff_t x = 0; x < d; ++x) qs[x] = qscale * qrow[x], o[x] = 0.0f;
  float m = neg_inf, l = 0.0f;
  const KV* kbase;
  const KV* vbase;
  if constexpr (std::is_same_v<KV, bf16_bits>)
    kbase = a.k_bf16, vbase = a.v_bf16;
  else
    kbase = a.k, vbase = a.v;
  const KV* kh = kbase + kvh * a.k_head_stride;
  const KV* vh = vbase + kvh * a.v_head_stride;
  auto dot_tail = [&](const KV* row, float t) {
    for (std::ptrdiff_t x = dv; x < d; ++x) t = fmadd(qs[x], load_as_float(row + x), t);
    return t;
  };
  for (std::ptrdiff_t c0 = k0; c0 < k1; c0 += decode_chunk) {
    const std::ptrdiff_t n = std::min(decode_chunk, k1 - c0);
    // Scores, four keys at a time (four independent sums).
    std::ptrdiff_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const KV* r0 = kh + (c0 + j) * a.k_row_stride;
      const KV* r1 = r0 + a.k_row_stride;
      const KV* r2 = r1 + a.k_row_stride;
      const KV* r3 = r2 + a.k_row_stride;
      V s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
      for (std::ptrdiff_t x = 0; x < dv; x += W) {
        const V qv = simd<Arch>::load(qs + x);
        s0 = fmadd(qv, load_b<Arch>(r0 + x), s0);
        s1 = fmadd(qv, load_b<Arch>(r1 + x), s1);
        s2 = fmadd(qv, load_b<Arch>(r2 + x), s2);
        s3 = fmadd(qv, load_b<Arch>(r3 + x), s3);
      }
      sc[j] = dot_tail(r0, simd<Arch>::reduce_add(s0));
      sc[j + 1] = dot_tail(r1, simd<Arch>::reduce_add(s1));
      sc[j + 2] = dot_tail(r2, simd<Arch>::reduce_add(s2));
      sc[j + 3] = dot_tail(r3, simd<Arch>::reduce_add(s3));
    }
    for (; j < n; ++j) {
      const KV* r0 = kh + (c0 + j) * a.k_row_stride;
      V s0(0.0f);
      for (std::ptrdiff_t x = 0; x < dv; x += W)
        s0 = fmadd(simd<Arch>::load(qs + x), load_b<Arch>(r0 + x), s0);
      sc[j] = dot_tail(r0, simd<Arch>::reduce_add(s0));
    }
    if constexpr (Mod::active) mod.keys_by_queries(h, qi, 1, c0, n, sc, 1);
    if (a.mask) {
      const float* mrow = a.mask + qi * a.mask_row_stride + c0;
      for (j = 0; j < n; ++j) sc[j] += mask_in_base2(mrow[j]);
    }
    // The chunk's maximum (a NaN score is skipped here and makes its weight, so the output, NaN).
    float cm = neg_inf;
    for (j = 0; j < n; ++j) cm = sc[j] > cm ? sc[j] : cm;
    const float mnew = std::max(m, cm);
    const float shift = mnew == neg_inf ? 0.0f : mnew;  // every key so far masked: weights 0
    const float corr = std::exp2(m - shift);
    const std::ptrdiff_t np = round_up(n, W);
    for (j = n; j < np; ++j) sc[j] = neg_inf;
    V sum(0.0f);
    for (j = 0; j < np; j += W) {
      const V p = vexp2_nonpositive(simd<Arch>::load(sc + j) - V(shift));
      simd<Arch>::store(sc + j, p);
      sum = sum + p;
    }
    l = l * corr + simd<Arch>::reduce_add(sum);
    m = mnew;
    // o = o corr + P V, up to four vectors of o in registers.
    for (std::ptrdiff_t x0 = 0; x0 < dv; x0 += 4 * W) {
      const int nv = int(std::min<std::ptrdiff_t>(4, (dv - x0) / W));
      V acc[4] = {V(0.0f), V(0.0f), V(0.0f), V(0.0f)};
      for (int v = 0; v < nv; ++v) acc[v] = simd<Arch>::load(o + x0 + v * W) * V(corr);
      const KV* vr = vh + c0 * a.v_row_stride + x0;
      if (nv == 4) {
        for (j = 0; j < n; ++j, vr += a.v_row_stride) {
          const V pj(sc[j]);
          acc[0] = fmadd(pj, load_b<Arch>(vr), acc[0]);
          acc[1] = fmadd(pj, load_b<Arch>(vr + W), acc[1]);
          acc[2] = fmadd(pj, load_b<Arch>(vr + 2 * W), acc[2]);
          acc[3] = fmadd(pj, load_b<Arch>(vr + 3 * W), acc[3]);
        }
      } else {
        for (j = 0; j < n; ++j, vr += a.v_row_stride) {
          const V pj(sc[j]);
          for (int v = 0; v < nv; ++v) acc[v] = fmadd(pj, load_b<Arch>(vr + v * W), acc[v]);
        }
      }
      for (int v = 0; v < nv; ++v) simd<Arch>::store(o + x0 + v * W, acc[v]);
    }
    for (std::ptrdiff_t x = dv; x < d; ++x) {
      float t = o[x] * corr;
      for (j = 0; j < n; ++j)
        t = fmadd(sc[j], load_as_float(vh + (c0 + j) * a.v_row_stride + x), t);
      o[x] = t;
    }
  }
  partial[0] = m, partial[1] = l;
}

// Output row of query qi, head h, from `count` partials (stride floats apart), combined in order.
// No visible key (every weight 0) gives zeros; a NaN weight gives NaN.
inline void attention_decode_combine(const attention_shape& s, const attention_args& a,
                                     std::ptrdiff_t h, std::ptrdiff_t qi, const float* partials,
                                     std::ptrdiff_t count, std::ptrdiff_t stride) {
  const std::ptrdiff_t d = s.head_dim;
  float mx = -std::numeric_limits<float>::infinity();
  for (std::ptrdiff_t i = 0; i < count; ++i) mx = std::max(mx, partials[i * stride]);
  const float shift = std::isinf(mx) && mx < 0 ? 0.0f : mx;
  float* orow = a.o + h * a.o_head_stride + qi * a.o_row_stride;
  float lsum = 0.0f;
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    const float* p = partials + i * stride;
    const float c = std::exp2(p[0] - shift);
    lsum += p[1] * c;
    for (std::ptrdiff_t x = 0; x < d; ++x) orow[x] = (i == 0 ? 0.0f : orow[x]) + p[2 + x] * c;
  }
  const float inv = lsum > 0.0f || std::isnan(lsum) ? 1.0f / lsum : 0.0f;
  for (std::ptrdiff_t x = 0; x < d; ++x) orow[x] *= inv;
}

// The decode path over every head and query (seq_q <= decode_max_queries).
template <class Arch, class Mod>
void attention_decode(const attention_shape& s, const attention_args& a, float* workspace,
                      thread_pool* pool, const Mod& mod) {
  const std::ptrdiff_t d = s.head_dim, rows = s.num_heads * s.seq_q, part = d + 2;
  const std::ptrdiff_t per_thread = std::ptrdiff_t(attention_workspace_floats_per_thread<Arch>(d));
  const std::ptrdiff_t scratch = decode_scratch_floats<Arch>(d);
  // Splits of at least decode_split keys, as many as one thread's share of the workspace holds
  // the partials of (so the split, hence the result, does not depend on the thread count).
  const std::ptrdiff_t max_splits =
      std::max<std::ptrdiff_t>(1, (per_thread - scratch) / (rows * part));
  const std::ptrdiff_t split_len =
      round_up(std::max(decode_split, (s.seq_kv + max_splits - 1) / max_splits), decode_chunk);
  const std::ptrdiff_t splits = std::max<std::ptrdiff_t>(1, (s.seq_kv + split_len - 1) / split_len);
  const int threads = pool ? pool->size() : 1;
  float* partials = workspace + std::ptrdiff_t(threads) * scratch;  // splits > 1: every item's
  parallel_for(pool, rows * splits, [&](std::ptrdiff_t b, std::ptrdiff_t e, int t) {
    float* ws = workspace + std::ptrdiff_t(t) * scratch;
    float* own = ws + scratch - part;  // splits == 1: the item's partial, used at once
    for (std::ptrdiff_t item = b; item < e; ++item) {
      const std::ptrdiff_t r = item / splits, sp = item % splits;
      const std::ptrdiff_t h = r / s.seq_q, qi = r % s.seq_q;
      const std::ptrdiff_t vis = keys_seen(s, a, qi), k0 = std::min(vis, sp * split_len);
      const std::ptrdiff_t k1 = std::min(vis, k0 + split_len);
      float* partial = splits == 1 ? own : partials + item * part;
      if (a.k_bf16)
        attention_decode_split<Arch, bf16_bits>(s, a, h, qi, k0, k1, ws, partial, mod);
      else
        attention_decode_split<Arch, float>(s, a, h, qi, k0, k1, ws, partial, mod);
      if (splits == 1) attention_decode_combine(s, a, h, qi, partial, 1, part);
    }
  });
  if (splits > 1)
    parallel_for(pool, rows, [&](std::ptrdiff_t b, std::ptrdiff_t e, int) {
      for (std::ptrdiff_t r = b; r < e; ++r)
        attention_decode_combine(s, a, r / s.seq_q, r % s.seq_q, partials + r * splits * part,
                                 splits, part);
    });
}

}  // namespace detail

// Flash attention over all heads; `workspace` holds attention_workspace_floats<Arch>(head_dim,
// threads) floats (threads = pool->size(), 1 without a pool). Work items (head, query block) are
// split statically across threads; results do not depend on the thread count.
template <class Arch = native_arch, class Mod = no_score_mod,
          attention_paths Paths = attention_paths{}>
void flash_attention(const attention_shape& s, const attention_args& a, float* workspace,
                     thread_pool* pool = nullptr, attention_path path = attention_path::automatic,
                     const Mod& mod = {}) {
  detail::check_attention(s, a);
  if (s.seq_q == 0) return;
  if (workspace == nullptr) throw std::invalid_argument("flash_attention: workspace is null");
  [[maybe_unused]] const std::size_t per_thread =
      attention_workspace_floats_per_thread<Arch>(s.head_dim);
  if (path == attention_path::whole_rows && s.seq_kv > whole_rows_max_kv)
    throw std::invalid_argument("flash_attention: the whole_rows path takes seq_kv <= " +
                                std::to_string(whole_rows_max_kv) + ", got " +
                                std::to_string(s.seq_kv));
  if (path == attention_path::decode && s.seq_q > decode_max_queries)
    throw std::invalid_argument(
        "flash_attention: the decode path takes seq_q <= " + std::to_string(decode_max_queries) +
        ", got " + std::to_string(s.seq_q));
  if (a.k_bf16 && path != attention_path::automatic && path != attention_path::decode)
    throw std::invalid_argument("flash_attention: bf16 k and v are read by the decode path only");
  const auto missing = [](const char* which) {
    throw std::logic_error(std::string("flash_attention: this instantiation leaves out the ") +
                           which + " path (attention_paths)");
  };
  if (path == attention_path::decode ||
      (path == attention_path::automatic && s.seq_q <= decode_max_queries)) {
    if constexpr (Paths.decode)
      detail::attention_decode<Arch>(s, a, workspace, pool, mod);
    else
      missing("decode");
    return;
  }
  if (path != attention_path::flash && s.seq_kv <= whole_rows_max_kv) {
    if constexpr (!Paths.whole_rows) {
      missing("whole_rows");
      return;
    } else {
      using blk = attention_blocking<Arch>;
      constexpr int MR = blk::mr, chunk = 4;  // work item: 4 x mr queries of one head
      const std::ptrdiff_t panels = (s.seq_q + MR - 1) / MR, chunks = (panels + chunk - 1) / chunk;
      const std::ptrdiff_t d = std::max<std::ptrdiff_t>(s.head_dim, 1);
      const std::ptrdiff_t kv = round_up(whole_rows_max_kv, blk::nr);
      parallel_for(pool, s.num_heads * chunks, [&](std::ptrdiff_t b, std::ptrdiff_t e, int t) {
        float* kt = workspace + std::size_t(t) * per_thread;
        float* sc = kt + d * kv;
        float* vpack = sc + MR * kv;
        float* inv = vpack + kv * round_up(d, blk::nr);
        std::ptrdiff_t packed = -1;  // kv head whose K^T is in kt (consecutive items share it)
        for (std::ptrdiff_t item = b; item < e; ++item) {
          const std::ptrdiff_t h = item / chunks, kvh = h / (s.num_heads / s.num_kv_heads);
          if (kvh != packed) detail::pack_whole_rows_kv<Arch>(s, a, kvh, kt, vpack), packed = kvh;
          const std::ptrdiff_t p_end = std::min(panels, (item % chunks + 1) * chunk);
          for (std::ptrdiff_t p = (item % chunks) * chunk; p < p_end; ++p)
            detail::attention_whole_rows<Arch>(s, a, h, p * MR,
                                               std::min<std::ptrdiff_t>(MR, s.seq_q - p * MR), kt,
                                               vpack, sc, inv, mod);
        }
      });
      return;
    }
  }
  if constexpr (Paths.flash) {
    constexpr int BQ = attention_blocking<Arch>::bq;
    const std::ptrdiff_t q_blocks = (s.seq_q + BQ - 1) / BQ;
    parallel_for(pool, s.num_heads * q_blocks, [&](std::ptrdiff_t b, std::ptrdiff_t e, int t) {
      float* ws = workspace + std::size_t(t) * per_thread;
      for (std::ptrdiff_t item = b; item < e; ++item)
        detail::attention_block<Arch>(s, a, item / q_blocks, (item % q_blocks) * BQ, ws, mod);
    });
  } else {
    missing("flash");
  }
}

}  // namespace fusedsl::cpu::kernels
