#pragma once
// int8 GEMM: unsigned 8-bit activations times signed 8-bit weights, summed exactly in 32 bits,
//
//   C[m x n] = A[m x k] . B[k x n]                                    (s32 C: gemm_u8s8_s32)
//   C[m x n] = a_scale[i] * b_scale[j] * (A . B - a_zero * colsum_B[j]) + bias[j]
//                                                                     (f32 C: gemm_u8s8_f32)
//   C[m x n] = ep(the same with A's f32 rows quantized as they are packed, i, j)
//                                                    (f32 A and C: gemm_dynamic_u8s8_f32)
//
// the form of dynamically quantized linear layers (ONNX Runtime's MatMulInteger, oneDNN's u8s8s32):
// A quantized per row with a zero point (asymmetric u8, `quantize_rows_u8`), B per output column
// (symmetric s8). The column sums of B that the zero points need are made once, when B is packed.
//
// B is packed once (`pack_b_s8`) into panels of 8 columns, k in groups of 4 consecutive values per
// column (32 bits: the operand layout of VNNI's vpdpbusd), zero past k and n. The micro-kernel
// keeps a 4 x 8 tile of s32 accumulators over the whole k and reads A four bytes of a row at a
// time:
//   AVX-VNNI / AVX512-VNNI (+VL)  vpdpbusd: four u8 x s8 products and their sum per 32-bit lane;
//   AVX2                          the bytes widened to 16 bits (A zero-extended once per block
//                                 of 4 rows, B sign-extended as loaded) and vpmaddwd: two exact
//                                 products summed per lane, the pairs added once at the end
//                                 (vpmaddubsw would saturate 255 * -128 * 2);
//   other targets                 plain loops.
// Every path gives the same, exact sums (no rounding, no saturation: |sum| <= 255 * 128 * k, which
// fits 32 bits for k < 65,793). Panels are split across threads; each C element is written once.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"

namespace fusedsl::cpu::kernels {

inline constexpr int s8_nr = 8;  // columns per packed panel
inline constexpr int s8_mr = 4;  // rows per micro-kernel tile
inline constexpr int s8_kq = 4;  // k values per 32-bit group

// Bytes of a packed k x n s8 operand.
constexpr std::size_t packed_b_s8_bytes(std::ptrdiff_t k, std::ptrdiff_t n) {
  return std::size_t(round_up(k, s8_kq) * round_up(n, s8_nr));
}

// A packed B (views the caller's storage): panel p holds columns [8p, 8p + 8) as kp/4 groups of
// 8 columns x 4 bytes; col_sum[j] = sum over k of B(k, j).
struct packed_b_s8 {
  const std::int8_t* data = nullptr;
  const std::int32_t* col_sum = nullptr;
  std::ptrdiff_t k = 0, n = 0, kp = 0;
};

// Packs B(p, j) = b[p * ldb + j] (or b[j * ldb + p] when trans_b) into `out`
// (packed_b_s8_bytes(k, n) bytes) and its column sums into `col_sum` (n values).
inline packed_b_s8 pack_b_s8(std::ptrdiff_t k, std::ptrdiff_t n, const std::int8_t* b,
                             std::ptrdiff_t ldb, bool trans_b, std::int8_t* out,
                             std::int32_t* col_sum) {
  if (k <= 0 || n <= 0)
    throw std::invalid_argument("pack_b_s8: k and n must be positive (got k = " +
                                std::to_string(k) + ", n = " + std::to_string(n) + ")");
  if (b == nullptr || out == nullptr || col_sum == nullptr)
    throw std::invalid_argument("pack_b_s8: B, the packed storage or the column sums is null");
  if (ldb < (trans_b ? k : n))
    throw std::invalid_argument(
        "pack_b_s8: ldb = " + std::to_string(ldb) + " is less than " +
        (trans_b ? "k = " + std::to_string(k) : "n = " + std::to_string(n)));
  const std::ptrdiff_t kp = round_up(k, s8_kq);
  std::memset(out, 0, packed_b_s8_bytes(k, n));
  for (std::ptrdiff_t j = 0; j < n; ++j) {
    std::int32_t sum = 0;
    std::int8_t* panel = out + (j / s8_nr) * kp * s8_nr;
    for (std::ptrdiff_t p = 0; p < k; ++p) {
      const std::int8_t v = trans_b ? b[j * ldb + p] : b[p * ldb + j];
      panel[((p / s8_kq) * s8_nr + j % s8_nr) * s8_kq + p % s8_kq] = v;
      sum += v;
    }
    col_sum[j] = sum;
  }
  return {out, col_sum, k, n, kp};
}

namespace detail {

// Four bytes of A at column p of a row of k (zero past k), as one 32-bit group.
inline std::uint32_t a_group(const std::uint8_t* row, std::ptrdiff_t p, std::ptrdiff_t k) {
  std::uint32_t g = 0;
  std::memcpy(&g, row + p, std::size_t(std::min<std::ptrdiff_t>(s8_kq, k - p)));
  return g;
}

// A's four bytes at column 4g of row r, the last group zero-padded past k.
template <int Rows>
struct a_rows {
  const std::uint8_t* row[Rows];
  std::ptrdiff_t full;  // groups with all four bytes inside k
  std::ptrdiff_t k;
  std::uint32_t at(int r, std::ptrdiff_t g) const {
    if (g < full) {
      std::uint32_t v;
      std::memcpy(&v, row[r] + g * s8_kq, sizeof v);
      return v;
    }
    return a_group(row[r], g * s8_kq, k);
  }
};

// acc[r][c] = sum over p of A(r, p) * panel(p, c), r < Rows (<= 4), c < 8. `wide`: A's rows
// already widened to 16 bits (widen_a; AVX2 only), or null.
template <class Arch, int Rows>
[[gnu::always_inline]] inline void s8_tile(const std::uint8_t* a, std::ptrdiff_t lda,
                                           std::ptrdiff_t k, const std::int16_t* wide,
                                           const std::int8_t* panel,
                                           std::int32_t (&acc)[s8_mr][s8_nr]) {
  const std::ptrdiff_t groups = (k + s8_kq - 1) / s8_kq;
  (void)wide;
  a_rows<Rows> rows{{}, k / s8_kq, k};
  for (int r = 0; r < Rows; ++r) rows.row[r] = a + r * lda;
#if (defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))) && \
    !defined(FUSEDSL_CPU_FORCE_SCALAR)
  if constexpr (!std::is_same_v<Arch, scalar_arch>) {
    __m256i c[Rows];
    for (int r = 0; r < Rows; ++r) c[r] = _mm256_setzero_si256();
    for (std::ptrdiff_t g = 0; g < groups; ++g) {
      const __m256i bq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + g * 32));
      for (int r = 0; r < Rows; ++r) {
        const __m256i av = _mm256_set1_epi32(int(rows.at(r, g)));
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        c[r] = _mm256_dpbusd_epi32(c[r], av, bq);
#else
        c[r] = _mm256_dpbusd_avx_epi32(c[r], av, bq);
#endif
      }
    }
    for (int r = 0; r < Rows; ++r) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc[r]), c[r]);
    return;
  }
#elif defined(__AVX2__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  if constexpr (!std::is_same_v<Arch, scalar_arch>) {
    // lo[r]: columns 0-3, hi[r]: columns 4-7, two partial sums per column (k pairs 0-1 and 2-3)
    __m256i lo[Rows], hi[Rows];
    for (int r = 0; r < Rows; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
    for (std::ptrdiff_t g = 0; g < groups; ++g) {
      const __m256i bq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + g * 32));
      const __m256i b_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(bq));
      const __m256i b_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(bq, 1));
      for (int r = 0; r < Rows; ++r) {
        std::int64_t a4;  // the four bytes as 16-bit values, repeated in each 64-bit lane
        if (wide != nullptr) {
          std::memcpy(&a4, wide + (g * Rows + r) * s8_kq, sizeof a4);
        } else {
          a4 = _mm_cvtsi128_si64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(int(rows.at(r, g)))));
        }
        const __m256i av = _mm256_set1_epi64x(a4);
        lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(av, b_lo));
        hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(av, b_hi));
      }
    }
    for (int r = 0; r < Rows; ++r) {
      // hadd: [c0 c1 c4 c5 | c2 c3 c6 c7]; the 64-bit lanes reordered to c0..c7
      const __m256i s = _mm256_hadd_epi32(lo[r], hi[r]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc[r]), _mm256_permute4x64_epi64(s, 0xD8));
    }
    return;
  }
#endif
  for (int r = 0; r < Rows; ++r)
    for (int c = 0; c < s8_nr; ++c) acc[r][c] = 0;
  for (std::ptrdiff_t g = 0; g < groups; ++g)
    for (int r = 0; r < Rows; ++r) {
      const std::uint32_t g4 = rows.at(r, g);
      for (int c = 0; c < s8_nr; ++c)
        for (int q = 0; q < s8_kq; ++q)
          acc[r][c] += std::int32_t((g4 >> (8 * q)) & 0xffu) *
                       std::int32_t(panel[(g * s8_nr + c) * s8_kq + q]);
    }
}

// The tile of `rows` (1-4) rows: one instantiation per row count, its accumulators in registers.
template <class Arch>
void s8_tile_rows(const std::uint8_t* a, std::ptrdiff_t lda, int rows, std::ptrdiff_t k,
                  const std::int16_t* wide, const std::int8_t* panel,
                  std::int32_t (&acc)[s8_mr][s8_nr]) {
  switch (rows) {
    case 4:
      return s8_tile<Arch, 4>(a, lda, k, wide, panel, acc);
    case 3:
      return s8_tile<Arch, 3>(a, lda, k, wide, panel, acc);
    case 2:
      return s8_tile<Arch, 2>(a, lda, k, wide, panel, acc);
    default:
      return s8_tile<Arch, 1>(a, lda, k, wide, panel, acc);
  }
}

// Groups of k A can be widened for on the stack (32 KiB for 4 rows); longer rows are read as
// bytes.
inline constexpr std::ptrdiff_t s8_wide_groups = 1024;

// Whether Arch's tile reads A widened to 16 bits (the AVX2 path).
template <class Arch>
constexpr bool s8_widens() {
#if (defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))) || \
    !defined(__AVX2__) || defined(FUSEDSL_CPU_FORCE_SCALAR)
  return false;
#else
  return !std::is_same_v<Arch, scalar_arch>;
#endif
}

// A's `rows` rows from `a` as 16-bit values in s8_tile's order: group g of row r at
// w[(g * rows + r) * 4], zero past k.
inline void widen_a(const std::uint8_t* a, std::ptrdiff_t lda, int rows, std::ptrdiff_t k,
                    std::int16_t* w) {
  const std::ptrdiff_t groups = (k + s8_kq - 1) / s8_kq;
  for (std::ptrdiff_t g = 0; g < groups; ++g)
    for (int r = 0; r < rows; ++r)
      for (int q = 0; q < s8_kq; ++q) {
        const std::ptrdiff_t p = g * s8_kq + q;
        w[(g * rows + r) * s8_kq + q] = p < k ? std::int16_t(a[r * lda + p]) : std::int16_t(0);
      }
}

// The checks every entry point makes; lda_name: A's stride as the entry point's caller names it.
inline void check_s8_args(const char* what, std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k,
                          const void* a, std::ptrdiff_t lda, const char* lda_name,
                          const packed_b_s8& b, const void* c, std::ptrdiff_t ldc) {
  const std::string w(what);
  if (m < 0 || n <= 0 || k <= 0)
    throw std::invalid_argument(
        w + ": m must be non-negative and n, k positive (got m = " + std::to_string(m) +
        ", n = " + std::to_string(n) + ", k = " + std::to_string(k) + ")");
  if (b.k != k || b.n != n)
    throw std::invalid_argument(w + ": the packed B is " + std::to_string(b.k) + "x" +
                                std::to_string(b.n) + ", not k x n = " + std::to_string(k) + "x" +
                                std::to_string(n));
  if (m > 0 && (a == nullptr || c == nullptr)) throw std::invalid_argument(w + ": A or C is null");
  if (lda < k)
    throw std::invalid_argument(w + ": " + lda_name + " = " + std::to_string(lda) + " < k");
  if (ldc < n) throw std::invalid_argument(w + ": ldc = " + std::to_string(ldc) + " < n");
}

// A given as u8 rows: each block of up to 4 rows is read where it lies.
struct u8_rows {
  const std::uint8_t* a;
  std::ptrdiff_t lda;
  const std::uint8_t* block(std::ptrdiff_t i, int) { return a + i * lda; }
  std::ptrdiff_t stride() const { return lda; }
};

// Runs the tiles, panels split across threads; rows.block(i, rows) gives A's rows [i, i + rows)
// as u8 (each thread works on its own copy of `rows`), store(rows, i0, n_rows, j0, cols, acc)
// writes one tile. Each thread takes its panels in blocks of about 256 KiB (kept in L2) and runs
// every row block of A over a block, widening the row block once where the tile reads it widened.
template <class Arch, class Rows, class Store>
void gemm_s8_run(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const Rows& a_rows,
                 const packed_b_s8& b, thread_pool* pool, Store&& store) {
  const std::ptrdiff_t panels = (n + s8_nr - 1) / s8_nr;
  const std::ptrdiff_t panel_bytes = b.kp * s8_nr;
  const std::ptrdiff_t block = std::max<std::ptrdiff_t>(1, (256 << 10) / panel_bytes);
  const bool widen = s8_widens<Arch>() && b.kp / s8_kq <= s8_wide_groups;
  parallel_for(pool, panels, [&](std::ptrdiff_t p0, std::ptrdiff_t p1, int) {
    Rows rows_of = a_rows;
    std::int32_t acc[s8_mr][s8_nr];
    alignas(64) std::int16_t wide[s8_wide_groups * s8_mr * s8_kq];
    for (std::ptrdiff_t q0 = p0; q0 < p1; q0 += block) {
      const std::ptrdiff_t q1 = std::min(p1, q0 + block);
      for (std::ptrdiff_t i = 0; i < m; i += s8_mr) {
        const int rows = int(std::min<std::ptrdiff_t>(s8_mr, m - i));
        const std::uint8_t* a = rows_of.block(i, rows);
        const std::ptrdiff_t lda = rows_of.stride();
        if (widen) widen_a(a, lda, rows, k, wide);
        for (std::ptrdiff_t p = q0; p < q1; ++p) {
          const int cols = int(std::min<std::ptrdiff_t>(s8_nr, n - p * s8_nr));
          s8_tile_rows<Arch>(a, lda, rows, k, widen ? wide : nullptr, b.data + p * panel_bytes,
                             acc);
          store(rows_of, i, rows, p * s8_nr, cols, acc);
        }
      }
    }
  });
}

}  // namespace detail

// C (s32, row stride ldc) = A . B exactly; A(i, p) = a[i * lda + p].
template <class Arch = native_arch>
void gemm_u8s8_s32(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const std::uint8_t* a,
                   std::ptrdiff_t lda, const packed_b_s8& b, std::int32_t* c, std::ptrdiff_t ldc,
                   thread_pool* pool = nullptr) {
  detail::check_s8_args("gemm_u8s8_s32", m, n, k, a, lda, "lda", b, c, ldc);
  detail::gemm_s8_run<Arch>(
      m, n, k, detail::u8_rows{a, lda}, b, pool,
      [&](const detail::u8_rows&, std::ptrdiff_t i0, int rows, std::ptrdiff_t j0, int cols,
          const std::int32_t(&acc)[s8_mr][s8_nr]) {
        for (int r = 0; r < rows; ++r)
          std::memcpy(c + (i0 + r) * ldc + j0, acc[r], std::size_t(cols) * sizeof(std::int32_t));
      });
}

// The epilogue that adds bias[j] (none when null). An f32 epilogue is any object with
// `V operator()(V x, i, j) const` for V a vector of 8 lanes (AVX2) and float: the value stored at
// C(i, j .. j + lanes) given the dequantized product x there (as the f32 GEMM's epilogues in
// kernels/gemm.hpp, which fit here too).
struct s8_bias {
  const float* bias = nullptr;
  template <class V>
  V operator()(const V& x, std::ptrdiff_t, std::ptrdiff_t j) const {
    if (bias == nullptr) return x;
    if constexpr (std::is_same_v<V, float>)
      return x + bias[j];
    else
      return x + V::load_unaligned(bias + j);
  }
};

// The dequantizing epilogue of a quantized linear layer: A's rows quantized with scales a_scale[i]
// and one zero point a_zero, B's columns with scales b_scale[j] (symmetric), bias optional.
struct s8_dequant {
  const float* a_scale = nullptr;  // m values
  std::uint8_t a_zero = 0;
  const float* b_scale = nullptr;         // n values
  const float* bias = nullptr;            // n values, or null
  const std::uint8_t* a_zeros = nullptr;  // m values, one zero point per row (quantize_rows_u8);
                                          // when given, a_zero is not read
};

namespace detail {

// One tile of f32 C: c[i0 + r][j0 + j] = ep(sa[r] * b_scale[j0 + j] * (acc[r][j] - zero[r] *
// colsum[j0 + j]), i0 + r, j0 + j). A whole row of the tile (8 columns) is one 8-lane vector where
// the build has AVX2 (the same operations as the lane-at-a-time tail: the difference taken in
// 32 bits, where it fits even when its terms wrap, then converted and scaled).
template <class Arch, class Ep>
void dequant_tile(float* c, std::ptrdiff_t ldc, const packed_b_s8& b, const float* b_scale,
                  std::ptrdiff_t i0, int rows, std::ptrdiff_t j0, int cols, const float* sa,
                  const std::uint8_t* zero, const std::int32_t (&acc)[s8_mr][s8_nr], const Ep& ep) {
  for (int r = 0; r < rows; ++r) {
    float* out = c + (i0 + r) * ldc + j0;
#if defined(__AVX2__) && defined(__FMA__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
    if constexpr (!std::is_same_v<Arch, scalar_arch>) {
      if (cols == s8_nr) {
        using V = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
        const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc[r]));
        const __m256i cs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.col_sum + j0));
        const __m256i v =
            _mm256_sub_epi32(sums, _mm256_mullo_epi32(_mm256_set1_epi32(int(zero[r])), cs));
        const V scaled = V(sa[r]) * V::load_unaligned(b_scale + j0);
        ep(scaled * V(_mm256_cvtepi32_ps(v)), i0 + r, j0).store_unaligned(out);
        continue;
      }
    }
#endif
    for (int j = 0; j < cols; ++j) {
      const std::int64_t v = acc[r][j] - std::int64_t(zero[r]) * b.col_sum[j0 + j];
      out[j] = ep(sa[r] * b_scale[j0 + j] * float(std::int32_t(v)), i0 + r, j0 + j);
    }
  }
}

// Stores the lanes of v (whole numbers in [0, 255]) as bytes.
inline void store_u8(std::uint8_t* out, float v) {
  *out = std::uint8_t(v);
}
template <class A>
void store_u8(std::uint8_t* out, const xsimd::batch<float, A>& v) {
  constexpr std::size_t w = xsimd::batch<float, A>::size;
  alignas(64) float t[w];
  v.store_aligned(t);
  for (std::size_t j = 0; j < w; ++j) out[j] = std::uint8_t(t[j]);
}
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
inline void store_u8(std::uint8_t* out, const xsimd::batch<float, xsimd::avx512f>& v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtusepi32_epi8(_mm512_cvttps_epi32(v)));
}
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
inline void store_u8(std::uint8_t* out, const xsimd::batch<float, xsimd::fma3<xsimd::avx2>>& v) {
  const __m256i i = _mm256_cvttps_epi32(v);
  const __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(i, i), _mm256_setzero_si256());
  // bytes 0-3 of each 128-bit lane hold lanes 0-3 and 4-7
  const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi32(lo, hi));
}
#endif

}  // namespace detail

// C (f32) = a_scale[i] * b_scale[j] * (A . B - a_zero_i * colsum_B[j]) + bias[j].
template <class Arch = native_arch>
void gemm_u8s8_f32(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const std::uint8_t* a,
                   std::ptrdiff_t lda, const packed_b_s8& b, const s8_dequant& q, float* c,
                   std::ptrdiff_t ldc, thread_pool* pool = nullptr) {
  detail::check_s8_args("gemm_u8s8_f32", m, n, k, a, lda, "lda", b, c, ldc);
  if (m > 0 && (q.a_scale == nullptr || q.b_scale == nullptr))
    throw std::invalid_argument("gemm_u8s8_f32: the row or column scales are null");
  std::uint8_t same[s8_mr];  // a_zero for every row of a tile, when a_zeros is not given
  std::fill_n(same, s8_mr, q.a_zero);
  detail::gemm_s8_run<Arch>(
      m, n, k, detail::u8_rows{a, lda}, b, pool,
      [&](const detail::u8_rows&, std::ptrdiff_t i0, int rows, std::ptrdiff_t j0, int cols,
          const std::int32_t(&acc)[s8_mr][s8_nr]) {
        detail::dequant_tile<Arch>(c, ldc, b, q.b_scale, i0, rows, j0, cols, q.a_scale + i0,
                                   q.a_zeros ? q.a_zeros + i0 : same, acc, s8_bias{q.bias});
      });
}

// Rows of x quantized to u8 as a dynamically quantized linear layer quantizes its input: row i's
// range [lo, hi] is widened to hold 0 (so 0 is exact), scale[i] = (hi - lo) / 255 (1 for a row of
// zeros), zero[i] = round(-lo / scale[i]), q = clamp(round(x / scale[i]) + zero[i], 0, 255),
// rounding half to even (a range wider than FLT_MAX is divided end by end). A row's values then
// come back as scale[i] * (q - zero[i]) within scale[i] / 2. The range ignores NaN and
// infinities: +inf quantizes to 255, -inf to 0 and NaN to the zero point (so it comes back as 0).
// Every Arch gives the same bytes: the same divisions, roundings and clamps, a lane at a time.
template <class Arch = native_arch>
void quantize_rows_u8(std::ptrdiff_t m, std::ptrdiff_t k, const float* x, std::ptrdiff_t ldx,
                      std::uint8_t* q, std::ptrdiff_t ldq, float* scale, std::uint8_t* zero) {
  if (m < 0 || k <= 0)
    throw std::invalid_argument("quantize_rows_u8: m must be non-negative and k positive");
  if (m > 0 && (x == nullptr || q == nullptr || scale == nullptr || zero == nullptr))
    throw std::invalid_argument("quantize_rows_u8: x, q, the scales or the zero points are null");
  if (ldx < k || ldq < k) throw std::invalid_argument("quantize_rows_u8: ldx or ldq < k");
  using S = simd<Arch>;
  using V = typename S::vec;
  constexpr int w = S::width;
  const std::ptrdiff_t kv = k / w * w;
  const V big = S::broadcast(std::numeric_limits<float>::max()), zero_v = S::broadcast(0.0f);
  for (std::ptrdiff_t i = 0; i < m; ++i) {
    const float* row = x + i * ldx;
    // The range of the finite values and 0: a non-finite value counts as 0.
    V lo_v = zero_v, hi_v = zero_v;
    for (std::ptrdiff_t p = 0; p < kv; p += w) {
      const V v = S::load(row + p);
      const V f = where(absolute(v) <= big, v, zero_v);
      lo_v = minimum(lo_v, f);
      hi_v = maximum(hi_v, f);
    }
    float lo = -S::reduce_max(zero_v - lo_v), hi = S::reduce_max(hi_v);
    for (std::ptrdiff_t p = kv; p < k; ++p)
      if (std::isfinite(row[p])) lo = std::min(lo, row[p]), hi = std::max(hi, row[p]);
    const float range = hi - lo;  // overflows only past FLT_MAX: then each end is divided
    const float s =
        hi > lo ? (std::isfinite(range) ? range / 255.0f : hi / 255.0f - lo / 255.0f) : 1.0f;
    const float z = std::clamp(std::nearbyint(-lo / s), 0.0f, 255.0f);
    scale[i] = s;
    zero[i] = std::uint8_t(z);
    std::uint8_t* out = q + i * ldq;
    const V s_v = S::broadcast(s), z_v = S::broadcast(z), top = S::broadcast(255.0f);
    for (std::ptrdiff_t p = 0; p < kv; p += w) {
      const V v = S::load(row + p);
      const V r = where(lane_nan(v), z_v, round_even(quotient(v, s_v)) + z_v);
      detail::store_u8(out + p, minimum(maximum(r, zero_v), top));  // inf clamped here
    }
    for (std::ptrdiff_t p = kv; p < k; ++p) {
      const float v = row[p];
      const float r = v != v ? z : std::nearbyint(v / s) + z;
      out[p] = std::uint8_t(std::clamp(r, 0.0f, 255.0f));
    }
  }
}

namespace detail {

// A given as f32 rows, quantized per row (quantize_rows_u8) when the thread first packs each block
// of up to 4 rows, and kept packed for the thread's later panel blocks (as a GEMM packs a block of
// A once and reuses it across the blocks of B): the u8 rows, scales and zero points live in the
// thread's own buffers (made when a thread copies this), read by the tiles and the epilogue.
template <class Arch>
struct quantizing_rows {
  const float* x;
  std::ptrdiff_t ldx, m, k;
  std::vector<std::uint8_t> buf;   // m rows of k bytes
  std::vector<float> scale;        // m
  std::vector<std::uint8_t> zero;  // m
  std::vector<bool> packed;        // per block of s8_mr rows

  quantizing_rows(const float* x_, std::ptrdiff_t ldx_, std::ptrdiff_t m_, std::ptrdiff_t k_)
      : x(x_), ldx(ldx_), m(m_), k(k_) {}
  quantizing_rows(const quantizing_rows& o)
      : x(o.x),
        ldx(o.ldx),
        m(o.m),
        k(o.k),
        buf(std::size_t(o.m * o.k)),
        scale(std::size_t(o.m)),
        zero(std::size_t(o.m)),
        packed(std::size_t((o.m + s8_mr - 1) / s8_mr), false) {}
  quantizing_rows& operator=(const quantizing_rows&) = delete;

  const std::uint8_t* block(std::ptrdiff_t i, int rows) {
    std::uint8_t* q = buf.data() + i * k;
    if (!packed[std::size_t(i / s8_mr)]) {
      quantize_rows_u8<Arch>(rows, k, x + i * ldx, ldx, q, k, scale.data() + i, zero.data() + i);
      packed[std::size_t(i / s8_mr)] = true;
    }
    return q;
  }
  std::ptrdiff_t stride() const { return k; }
};

}  // namespace detail

// A dynamically quantized linear layer in one pass: C (f32) = ep(the f32 rows of A quantized to u8
// per row (quantize_rows_u8) times the s8 B, dequantized with the rows' scales and zero points and
// b_scale[j], i, j): ep adds a bias (s8_bias), or is any f32 epilogue (bias, activation,
// residual). The rows are quantized as the GEMM packs each block of 4, in the thread that
// multiplies them (each thread packs what it multiplies: with several threads A is quantized once
// per thread, in parallel), so C equals quantize_rows_u8 followed by gemm_u8s8_f32 bit for bit
// with no separate pass over A. A is x[i * ldx + p].
template <class Arch = native_arch, class Ep = s8_bias>
void gemm_dynamic_u8s8_f32(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* x,
                           std::ptrdiff_t ldx, const packed_b_s8& b, const float* b_scale, float* c,
                           std::ptrdiff_t ldc, const Ep& ep = {}, thread_pool* pool = nullptr) {
  detail::check_s8_args("gemm_dynamic_u8s8_f32", m, n, k, x, ldx, "ldx", b, c, ldc);
  if (m > 0 && b_scale == nullptr)
    throw std::invalid_argument("gemm_dynamic_u8s8_f32: the column scales are null");
  using rows_t = detail::quantizing_rows<Arch>;
  detail::gemm_s8_run<Arch>(m, n, k, rows_t(x, ldx, m, k), b, pool,
                            [&](const rows_t& a, std::ptrdiff_t i0, int rows, std::ptrdiff_t j0,
                                int cols, const std::int32_t(&acc)[s8_mr][s8_nr]) {
                              detail::dequant_tile<Arch>(c, ldc, b, b_scale, i0, rows, j0, cols,
                                                         a.scale.data() + i0, a.zero.data() + i0,
                                                         acc, ep);
                            });
}

}  // namespace fusedsl::cpu::kernels
