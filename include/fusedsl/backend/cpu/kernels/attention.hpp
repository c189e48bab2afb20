#pragma once
// Flash attention on the CPU: O = softmax(scale * Q K^T + mask) V per head, computed block by
// block with an online softmax (Dao et al., "FlashAttention", 2022, Alg. 1; Milakov & Gimelshein
// 2018 for the running max/sum), so no seq_q x seq_kv matrix is ever stored.
//
// Per (head, block of BQ queries): Q^T is packed once (scaled); then for each block of BK keys
//   S^T = K_blk . Q^T             (GEMM micro-kernel, keys x queries, K read in place)
//   mask / causal on the block    (only blocks that cross the diagonal are masked element-wise)
//   m' = max(m, colmax S^T), P^T = exp(S^T - m'), l = l e^(m - m') + colsum P^T
//   O_acc = O_acc e^(m - m') + P V (GEMM micro-kernel, A = P read in place from S^T)
// Computing S transposed makes every softmax reduction a vertical (lane-wise) one.
// Causal blocks entirely above the diagonal are skipped. Grouped/multi-query heads: query head h
// reads key/value head h / (num_heads / num_kv_heads).
//
// Layout: element (t, h, d) of Q is q[t*q_row_stride + h*q_head_stride + d]; K, V, O likewise.
// Causal masking aligns the last query with the last key (query i sees keys j <= i + seq_kv -
// seq_q). The optional additive mask is seq_q x seq_kv (mask[i*mask_row_stride + j]), shared by
// all heads. A query whose keys are all masked gets an output row of zeros.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

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
};

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

// Floats of workspace one thread needs; flash_attention takes threads times this.
template <class Arch = native_arch>
constexpr std::size_t attention_workspace_floats_per_thread(std::ptrdiff_t head_dim) {
  using blk = attention_blocking<Arch>;
  const std::ptrdiff_t dp = round_up(std::max<std::ptrdiff_t>(head_dim, 1), blk::nr);
  return std::size_t(dp * blk::bq         // Q^T, packed and scaled
                     + blk::bk * blk::bq  // S^T / P^T block
                     + blk::bq * dp       // O accumulator
                     + blk::bk * dp       // V block, packed when head_dim is not a multiple of nr
                     + 3 * blk::bq);      // running max, running sum, correction
}
template <class Arch = native_arch>
constexpr std::size_t attention_workspace_floats(std::ptrdiff_t head_dim, int threads = 1) {
  return std::size_t(threads) * attention_workspace_floats_per_thread<Arch>(head_dim);
}

namespace detail {

inline void check_attention(const attention_shape& s, const attention_args& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("flash_attention: " + m); };
  if (s.seq_q < 0 || s.seq_kv < 0 || s.head_dim <= 0 || s.num_heads <= 0 || s.num_kv_heads <= 0)
    fail("sizes must be positive (seq_q " + std::to_string(s.seq_q) + ", seq_kv " +
         std::to_string(s.seq_kv) + ", heads " + std::to_string(s.num_heads) + ", kv heads " +
         std::to_string(s.num_kv_heads) + ", head_dim " + std::to_string(s.head_dim) + ")");
  if (s.num_heads % s.num_kv_heads != 0)
    fail("num_heads " + std::to_string(s.num_heads) + " is not a multiple of num_kv_heads " +
         std::to_string(s.num_kv_heads));
  if (!a.q || !a.k || !a.v || !a.o) fail("q, k, v and o must not be null");
}

template <class Arch>
void attention_block(const attention_shape& s, const attention_args& a, std::ptrdiff_t h,
                     std::ptrdiff_t q0, float* ws) {
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

  // Q^T block, scaled: qt[panel][dim][j] = scale * Q(q0 + panel*NR + j, h, dim).
  const float* qh = a.q + h * a.q_head_stride;
  for (std::ptrdiff_t pnl = 0; pnl < BQ / NR; ++pnl)
    for (std::ptrdiff_t dim = 0; dim < d; ++dim)
      for (std::ptrdiff_t j = 0; j < NR; ++j) {
        const std::ptrdiff_t qi = pnl * NR + j;
        qt[(pnl * d + dim) * NR + j] = qi < bq ? a.scale * qh[(q0 + qi) * a.q_row_stride + dim] : 0;
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
        typename mk::tile acc;
        if (rows == MR)
          mk::template compute_rows<MR>(d, ka, a.k_row_stride, 1, qt + pnl * d * NR, NR, acc);
        else
          mk::compute_tail(rows, d, ka, a.k_row_stride, 1, qt + pnl * d * NR, NR, acc);
        for (std::ptrdiff_t i = 0; i < rows; ++i)
          for (int v = 0; v < mk::NV; ++v)
            simd<Arch>::store(st + (r0 + i) * BQ + pnl * NR + v * W, acc[i][v]);
      }
    }
    // Mask: additive mask, then causal on blocks that cross the diagonal.
    if (a.mask)
      for (std::ptrdiff_t r = 0; r < bk; ++r)
        for (std::ptrdiff_t j = 0; j < bq; ++j)
          st[r * BQ + j] += a.mask[(q0 + j) * a.mask_row_stride + kb + r];
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
      const V c = vexp(simd<Arch>::load(m + j) - shift);
      V sum(0.0f);
      for (std::ptrdiff_t r = 0; r < bk; ++r) {
        const V p = vexp(simd<Arch>::load(st + r * BQ + j) - shift);
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
        typename mk::tile acc;
        if (rows == MR)
          mk::template compute_rows<MR>(bk, st + i0, 1, BQ, vb + x0, vstride, acc);
        else
          mk::compute_tail(rows, bk, st + i0, 1, BQ, vb + x0, vstride, acc);
        for (std::ptrdiff_t i = 0; i < rows; ++i)
          for (int v = 0; v < mk::NV; ++v) {
            float* o = oacc + (i0 + i) * dp + x0 + v * W;
            simd<Arch>::store(o, simd<Arch>::load(o) + acc[i][v]);
          }
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

}  // namespace detail

// Flash attention over all heads; `workspace` holds attention_workspace_floats<Arch>(head_dim,
// threads) floats (threads = pool->size(), 1 without a pool). Work items (head, query block) are
// split statically across threads; results do not depend on the thread count.
template <class Arch = native_arch>
void flash_attention(const attention_shape& s, const attention_args& a, float* workspace,
                     thread_pool* pool = nullptr) {
  detail::check_attention(s, a);
  if (s.seq_q == 0) return;
  if (workspace == nullptr) throw std::invalid_argument("flash_attention: workspace is null");
  constexpr int BQ = attention_blocking<Arch>::bq;
  const std::ptrdiff_t q_blocks = (s.seq_q + BQ - 1) / BQ;
  const std::size_t per_thread = attention_workspace_floats_per_thread<Arch>(s.head_dim);
  parallel_for(pool, s.num_heads * q_blocks, [&](std::ptrdiff_t b, std::ptrdiff_t e, int t) {
    float* ws = workspace + std::size_t(t) * per_thread;
    for (std::ptrdiff_t item = b; item < e; ++item)
      detail::attention_block<Arch>(s, a, item / q_blocks, (item % q_blocks) * BQ, ws);
  });
}

}  // namespace fusedsl::cpu::kernels
