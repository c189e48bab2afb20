#pragma once
// Packed, register-blocked GEMM with a fused epilogue:
//
//   C[m x n] = act(scale * A[m x k] . B[k x n] + bias[n]) + residual[m x n]      (f32 or bf16 C)
//
// B is packed once into column panels of `nr` columns (`pack_b`, the `packed_b` view) and can be
// reused across calls (prepacked weights). A is read in place by the micro-kernel's broadcasts;
// only when its rows are a multiple of 4 KiB apart (or k is blocked) are `mr` rows of it copied,
// with a padded row stride, into the caller-provided workspace (`gemm_workspace_floats`). The
// kernels never allocate.
//
// Loop order (after the BLIS family of algorithms, Van Zee & van de Geijn, TOMS 2015, with the
// k loop kept whole so the epilogue runs on accumulators still in registers):
//   for each block of B panels that fits in L2          (n_block)
//     for each mr-row panel of A (split across threads) (read in place; rows copied when
//                                                         they alias in L1)
//       for each nr-column panel of B in the block
//         micro-kernel: mr x nr accumulators, k rank-1 updates, then the epilogue and the store
// When one B panel (k x nr) fits in L1 the two inner loops swap: the B panel stays in L1 and the
// A rows stream from L2.
// Operands may be transposed: A(i, p) is a[i*lda + p], or a[p*lda + i] when trans_a; B(p, j) is
// b[p*ldb + j], or b[j*ldb + p] when trans_b. Packing reads both forms.
//
// A pair of products over the same A (SwiGLU's gate and up: C = ep(A.B1, A.B2)) runs as one GEMM
// over both weights (`gemm_pair_with`): each nr-column panel holds nr/2 columns of B1 and the same
// nr/2 columns of B2 (`pack_b_pair_half`), so one micro-kernel tile has both accumulators of
// nr/2 output columns in registers and the epilogue combines them; the second product is never
// stored.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "fusedsl/backend/cpu/kernels/bf16.hpp"
#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/backend/cpu/kernels/vec_math.hpp"
#include "fusedsl/backend/cpu/kernels/vmath.hpp"

namespace fusedsl::cpu::kernels {

// Register tile of the micro-kernel: mr rows x nr columns of C held in vector registers.
template <class Arch>
struct gemm_tile;
template <>
struct gemm_tile<xsimd::avx512f> {
  static constexpr int mr = 12, nr = 32;  // 24 zmm accumulators, 2 loads + 12 broadcasts per k
};
template <>
struct gemm_tile<xsimd::fma3<xsimd::avx2>> {
  static constexpr int mr = 6, nr = 16;  // 12 ymm accumulators
};
template <>
struct gemm_tile<xsimd::sse2> {
  static constexpr int mr = 4, nr = 8;  // 8 xmm accumulators (6 x 8 measured no faster)
};
template <>
struct gemm_tile<xsimd::neon64> {
  static constexpr int mr = 8, nr = 8;  // 16 of the 32 q registers as accumulators
};
template <>
struct gemm_tile<scalar_arch> {
  static constexpr int mr = 4, nr = 4;
};

// The fused epilogue of the plain entry point: y = act(scale * acc + bias[j]) + residual(i, j).
// act is an elementwise unary op of the op table (graph/ops.hpp), or none.
struct gemm_epilogue {
  float scale = 1.0f;
  const float* bias = nullptr;  // n values, one per column; null for none
  std::optional<graph::op_kind> act{};
  const float* residual = nullptr;  // m x n, row-major with leading dimension ld_residual
  std::ptrdiff_t ld_residual = 0;
};

// An epilogue is any object with `V operator()(V sum, i, j) const` for V a vector of the arch and
// float (the one-lane tail): the value stored at C(i, j .. j + lanes) given the finished sum of
// products there; `heavy` says it needs many registers (a transcendental op), so the kernel
// stages the tile in L1 before applying it instead of spilling its accumulators.
struct no_epilogue {
  static constexpr bool heavy = false;
  template <class V>
  V operator()(const V& x, std::ptrdiff_t, std::ptrdiff_t) const {
    return x;
  }
};

// A pair epilogue (gemm_pair_with) says `static constexpr bool paired = true` and has
// `V operator()(V sum1, V sum2, i, j) const`: the value stored at C(i, j .. j + lanes) given both
// products' sums there.
template <class Ep>
inline constexpr bool is_pair_epilogue = requires { requires Ep::paired; };

// V lanes from p (a float when V is one lane).
template <class V>
V load_lanes(const float* p) {
  if constexpr (std::is_same_v<V, float>)
    return *p;
  else
    return V::load_unaligned(p);
}

// gemm_epilogue with its activation fixed at compile time (Act: a unary op, or void for none).
template <class Act>
struct standard_epilogue;
template <graph::op_kind K>
struct standard_epilogue<std::integral_constant<graph::op_kind, K>> {
  const gemm_epilogue& ep;
  static constexpr bool heavy = is_transcendental(K);
  template <class V>
  V operator()(const V& sum, std::ptrdiff_t i, std::ptrdiff_t j) const {
    V x = apply_unary<K>(fmadd(sum, V(ep.scale), ep.bias ? load_lanes<V>(ep.bias + j) : V(0.0f)));
    if (ep.residual) x = x + load_lanes<V>(ep.residual + i * ep.ld_residual + j);
    return x;
  }
};
template <>
struct standard_epilogue<void> {
  const gemm_epilogue& ep;
  static constexpr bool heavy = false;
  template <class V>
  V operator()(const V& sum, std::ptrdiff_t i, std::ptrdiff_t j) const {
    V x = fmadd(sum, V(ep.scale), ep.bias ? load_lanes<V>(ep.bias + j) : V(0.0f));
    if (ep.residual) x = x + load_lanes<V>(ep.residual + i * ep.ld_residual + j);
    return x;
  }
};

// The activations with_standard_epilogue takes: the op table's (graph/ops.hpp) `activation` rows.
inline std::string gemm_activation_names() {
  std::string names;
  for (const graph::op_info& o : graph::op_infos)
    if (o.epilogue == graph::op_epilogue::activation)
      names += (names.empty() ? "" : ", ") + std::string(o.name);
  return names;
}

// Calls f(standard_epilogue<...>{ep}) with ep's activation made a compile-time one: one
// instantiation per `activation` row of the op table.
template <class F>
void with_standard_epilogue(const gemm_epilogue& ep, F&& f) {
  using graph::op_kind;
  if (!ep.act) return f(standard_epilogue<void>{ep});
  switch (*ep.act) {
#define FUSEDSL_X(id, cat, arity, hlo, epi)                                          \
  case op_kind::id:                                                                  \
    if constexpr (graph::op_epilogue::epi == graph::op_epilogue::activation)         \
      return f(standard_epilogue<std::integral_constant<op_kind, op_kind::id>>{ep}); \
    break;
    FUSEDSL_OPS(FUSEDSL_X)
#undef FUSEDSL_X
  }
  throw std::invalid_argument("gemm: activation " + std::string(graph::name_of(*ep.act)) +
                              " is not one of " + gemm_activation_names());
}

// Floats needed to pack a k x n B operand (columns padded to a multiple of nr).
template <class Arch = native_arch>
constexpr std::size_t packed_b_floats(std::ptrdiff_t k, std::ptrdiff_t n) {
  return std::size_t(k * round_up(n, gemm_tile<Arch>::nr));
}

// Row stride of a copied A panel: k plus one cache line, so the mr rows never share L1 sets.
constexpr std::ptrdiff_t a_copy_stride(std::ptrdiff_t k) {
  return (k > 0 ? k : 1) + 16;
}

// Floats of workspace gemm() needs: one copied mr x k panel of A per thread.
template <class Arch = native_arch>
constexpr std::size_t gemm_workspace_floats(std::ptrdiff_t k, int threads = 1) {
  return std::size_t(threads) * std::size_t(gemm_tile<Arch>::mr) * std::size_t(a_copy_stride(k));
}

// A view of B packed in nr-column panels: panel p holds columns [p*nr, p*nr + nr) as k rows of nr
// elements (zero past column n), at data + p*k*nr. The storage belongs to the caller. The
// elements are f32, or (T = bf16_bits, pack_b_bf16_panels; T = std::int8_t, pack_b_s8_panels)
// bf16 or int8 widened by the micro-kernel as it loads them: half or a quarter of the bytes, for
// products with few rows of A (a decode step's GEMV), whose time is the time to read B; with many
// rows the widening costs more than the bytes it saves.
template <class Arch = native_arch, class T = float>
struct packed_b {
  const T* data = nullptr;
  std::ptrdiff_t k = 0, n = 0;
  static constexpr int nr = gemm_tile<Arch>::nr;
  std::ptrdiff_t panels() const { return (n + nr - 1) / nr; }
  const T* panel(std::ptrdiff_t p) const { return data + p * k * nr; }
};

// The arches whose load_b widens bf16 and int8 in vector registers; elsewhere it goes through a
// scalar copy (cpu::executor keeps bf16 or int8 weight panels only where this holds).
template <class Arch>
inline constexpr bool widens_bf16_in_registers =
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
    std::is_same_v<Arch, xsimd::avx512f> ||
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
    std::is_same_v<Arch, xsimd::fma3<xsimd::avx2>> ||
#endif
    false;

namespace detail {

inline void check_gemm_size(const char* what, std::ptrdiff_t v) {
  if (v < 0)
    throw std::invalid_argument(std::string("gemm: ") + what + " must be >= 0, got " +
                                std::to_string(v));
}

template <class T>
float load_as_float(const T* p) {
  if constexpr (std::is_same_v<T, bf16_bits>)
    return from_bf16(*p);
  else
    return float(*p);  // f32, or an int8 weight (exact)
}

// Packs B (k x n, either element type) into nr-column panels at dst.
template <int NR, class T>
void pack_b_panels(std::ptrdiff_t k, std::ptrdiff_t n, const T* b, std::ptrdiff_t ldb, bool trans_b,
                   float* dst) {
  const std::ptrdiff_t panels = (n + NR - 1) / NR;
  for (std::ptrdiff_t p = 0; p < panels; ++p) {
    float* out = dst + p * k * NR;
    const std::ptrdiff_t j0 = p * NR, cols = std::min<std::ptrdiff_t>(NR, n - j0);
    if (!trans_b) {
      for (std::ptrdiff_t kk = 0; kk < k; ++kk) {
        const T* row = b + kk * ldb + j0;
        float* o = out + kk * NR;
        std::ptrdiff_t jj = 0;
        if constexpr (std::is_same_v<T, float>) {
          std::memcpy(o, row, std::size_t(cols) * sizeof(float));
          jj = cols;
        }
        for (; jj < cols; ++jj) o[jj] = load_as_float(row + jj);
        for (; jj < NR; ++jj) o[jj] = 0.0f;
      }
    } else {
      for (std::ptrdiff_t jj = 0; jj < NR; ++jj) {
        if (jj < cols) {
          const T* col = b + (j0 + jj) * ldb;
          for (std::ptrdiff_t kk = 0; kk < k; ++kk) out[kk * NR + jj] = load_as_float(col + kk);
        } else {
          for (std::ptrdiff_t kk = 0; kk < k; ++kk) out[kk * NR + jj] = 0.0f;
        }
      }
    }
  }
}

// Copies rows [i0, i0 + rows) x columns [0, k) of row-major A to dst, row stride a_copy_stride(k)
// (a plain copy per row; the micro-kernel's broadcasts need no transposed layout).
inline void copy_a_rows(std::ptrdiff_t rows, std::ptrdiff_t k, const float* a, std::ptrdiff_t lda,
                        std::ptrdiff_t i0, float* dst) {
  if (k == 0) return;  // K = 0: nothing to copy, and `a` may be null (memcpy's arguments may not)
  for (std::ptrdiff_t i = 0; i < rows; ++i)
    std::memcpy(dst + i * a_copy_stride(k), a + (i0 + i) * lda, std::size_t(k) * sizeof(float));
}

// W lanes of a B row: f32 as they are, bf16 widened (exactly: the bits shifted into the top half).
template <class Arch>
[[gnu::always_inline]] inline vec_t<Arch> load_b(const float* p) {
  return simd<Arch>::load(p);
}
template <class Arch>
[[gnu::always_inline]] inline vec_t<Arch> load_b(const bf16_bits* p) {
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  if constexpr (std::is_same_v<Arch, xsimd::avx512f>)
    return from_bf16_x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  if constexpr (std::is_same_v<Arch, xsimd::fma3<xsimd::avx2>>)  // zero-extend, shift up 16
    return vec_t<Arch>(_mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
#endif
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    return from_bf16(*p);
  } else {
    alignas(64) float t[simd<Arch>::width];
    for (int l = 0; l < simd<Arch>::width; ++l) t[l] = from_bf16(p[l]);
    return simd<Arch>::load(t);
  }
}
template <class Arch>
[[gnu::always_inline]] inline vec_t<Arch> load_b(const std::int8_t* p) {
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  if constexpr (std::is_same_v<Arch, xsimd::avx512f>)
    return vec_t<Arch>(_mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  if constexpr (std::is_same_v<Arch, xsimd::fma3<xsimd::avx2>>)  // sign-extend 8 bytes, convert
    return vec_t<Arch>(_mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
#endif
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    return float(*p);
  } else {
    alignas(64) float t[simd<Arch>::width];
    for (int l = 0; l < simd<Arch>::width; ++l) t[l] = float(p[l]);
    return simd<Arch>::load(t);
  }
}

// The register-blocked core: acc[i][v] = sum_p a[i*a_istride + p*a_kstride] * b[p*b_kstride + v*W
// + lane]. `a` is A in place or a packed panel; `b` is a packed B panel (b_kstride = NR) or any
// matrix whose rows hold nr contiguous floats (or a bf16 panel, widened as loaded). PrefetchB: B
// streams from L2, so each rank-1 update prefetches the B row a few updates ahead; a caller whose B
// panel already sits in L1 turns it off (a prefetch per cache line of each B row, which would only
// take load slots). `next` (StreamNext): each rank-1 update also prefetches one cache line at
// next + p * next_step into L2, the share of the next B panel this tile brings in while it
// computes (gemm_run's streaming order), never past next + next_last.
template <class Arch>
struct micro_kernel {
  static constexpr int MR = gemm_tile<Arch>::mr, NR = gemm_tile<Arch>::nr;
  static constexpr int W = simd<Arch>::width, NV = NR / W;
  using V = vec_t<Arch>;
  using tile = V[MR][NV];

  // Rows [0, R) of the tile: R == MR in the body, fewer for the last panel of A.
  template <int R, bool PrefetchB = true, class TB = float, bool StreamNext = false>
  [[gnu::always_inline]] static inline void compute_rows(std::ptrdiff_t k, const float* a,
                                                         std::ptrdiff_t a_istride,
                                                         std::ptrdiff_t a_kstride, const TB* b,
                                                         std::ptrdiff_t b_kstride, tile& out,
                                                         const TB* next = nullptr,
                                                         std::ptrdiff_t next_step = 0,
                                                         std::ptrdiff_t next_last = 0) {
    V acc[R][NV];  // local, so it stays in registers (vector types may alias any memory)
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = V(0.0f);
    // Row i of A is read from row_base[i / 4] at (i % 4) * a_istride: three bases and three
    // strides for twelve rows. With twelve row pointers GCC runs out of general registers and
    // keeps some in vector registers, moved back on every update.
    const float* row_base[(R + 3) / 4];
#pragma GCC unroll 4
    for (int g = 0; g < (R + 3) / 4; ++g) row_base[g] = a + 4 * g * a_istride;
#pragma GCC unroll 2
    for (std::ptrdiff_t p = 0; p < k; ++p) {
      V bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = load_b<Arch>(b + p * b_kstride + v * W);
      if constexpr (PrefetchB) {
#pragma GCC unroll 4
        for (int v = 0; v < NR; v += int(64 / sizeof(TB)))  // one per cache line
          __builtin_prefetch(b + (p + prefetch_distance<R, TB>) * b_kstride + v, 0, 3);
      }
      if constexpr (StreamNext) __builtin_prefetch(next + std::min(p * next_step, next_last), 0, 2);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const V ai = V(row_base[i / 4][p * a_kstride + (i % 4) * a_istride]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = fmadd(ai, bv[v], acc[i][v]);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) out[i][v] = acc[i][v];
  }

  // The tile of `rows` (<= MR) rows, handed to `use(tile&)`: for a full panel the inlined body,
  // whose accumulators stay in registers through `use`; otherwise the out-of-line tail, whose
  // tile lives in memory. (One call site taking either path would put the full panel's tile in
  // memory too: 24 extra stores per tile, ~6% of a k = 32 tile.)
  template <bool PrefetchB = true, class TB, class Use, bool StreamNext = false>
  [[gnu::always_inline]] static inline void compute(std::ptrdiff_t rows, std::ptrdiff_t k,
                                                    const float* a, std::ptrdiff_t a_istride,
                                                    std::ptrdiff_t a_kstride, const TB* b,
                                                    std::ptrdiff_t b_kstride, Use&& use,
                                                    std::bool_constant<StreamNext> = {},
                                                    const TB* next = nullptr,
                                                    std::ptrdiff_t next_step = 0,
                                                    std::ptrdiff_t next_last = 0) {
    if (rows == MR) {
      tile acc;
      compute_rows<MR, PrefetchB, TB, StreamNext>(k, a, a_istride, a_kstride, b, b_kstride, acc,
                                                  next, next_step, next_last);
      use(acc);
    } else {
      tile acc;
      compute_tail<PrefetchB, TB, StreamNext>(rows, k, a, a_istride, a_kstride, b, b_kstride, acc,
                                              next, next_step, next_last);
      use(acc);
    }
  }

  // Stores rows [0, rows) of a tile, NR floats each, at dst + i * ld (f32, no epilogue).
  [[gnu::always_inline]] static inline void store_rows(const tile& acc, std::ptrdiff_t rows,
                                                       float* dst, std::ptrdiff_t ld) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {  // unrolled: acc[i] must name a register, not memory
      if (i >= rows) break;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) simd<Arch>::store(dst + i * ld + v * W, acc[i][v]);
    }
  }

  // Fewer than MR rows (the last panel of A), out of line.
  template <bool PrefetchB = true, class TB = float, bool StreamNext = false>
  [[gnu::noinline]] static void compute_tail(std::ptrdiff_t rows, std::ptrdiff_t k, const float* a,
                                             std::ptrdiff_t a_istride, std::ptrdiff_t a_kstride,
                                             const TB* b, std::ptrdiff_t b_kstride, tile& acc,
                                             const TB* next = nullptr,
                                             std::ptrdiff_t next_step = 0,
                                             std::ptrdiff_t next_last = 0) {
    tail_table<PrefetchB, TB, StreamNext>(std::make_integer_sequence<int, MR>{})[rows](
        k, a, a_istride, a_kstride, b, b_kstride, acc, next, next_step, next_last);
  }

 private:
  template <class TB>
  using tail_fn = void (*)(std::ptrdiff_t, const float*, std::ptrdiff_t, std::ptrdiff_t, const TB*,
                           std::ptrdiff_t, tile&, const TB*, std::ptrdiff_t, std::ptrdiff_t);
  template <bool PrefetchB, class TB, bool StreamNext, int... R>
  static const tail_fn<TB>* tail_table(std::integer_sequence<int, R...>) {
    static constexpr tail_fn<TB> table[] = {
        &compute_rows < R == 0 ? 1 : R, PrefetchB, TB, StreamNext > ...};
    return table;
  }
  // How many rank-1 updates ahead B is prefetched: 4 for a full tile; 4 KiB of the panel ahead
  // for a tile of fewer rows (decode steps, small batches), whose updates take a few cycles each,
  // so that 4 updates ahead left the stream short of memory-level parallelism (docs/design.md,
  // "Kernel choices"); a one-row product on f32 panels gained nothing and keeps 4.
  template <int R, class TB>
  static constexpr int prefetch_distance =
      R >= MR || (R == 1 && std::is_same_v<TB, float>) ? 4 : 4096 / int(NR * sizeof(TB));
};

// Stores one vector of output (W lanes) as f32 or bf16.
template <class Arch, class OutT>
[[gnu::always_inline]] inline void store_out(OutT* p, vec_t<Arch> v) {
  if constexpr (std::is_same_v<OutT, float>) {
    simd<Arch>::store(p, v);
  } else if constexpr (std::is_same_v<Arch, scalar_arch>) {
    *p = to_bf16(v);
  } else {
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
    if constexpr (std::is_same_v<Arch, xsimd::avx512f>) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16_x16(v));
      return;
    }
#endif
    alignas(64) float t[simd<Arch>::width];
    simd<Arch>::store(t, v);
    for (int l = 0; l < simd<Arch>::width; ++l) p[l] = to_bf16(t[l]);
  }
}

template <class T>
[[gnu::always_inline]] inline void store_one(T* p, float x) {
  if constexpr (std::is_same_v<T, float>)
    *p = x;
  else
    *p = to_bf16(x);
}

// The right edge of store_tile (cols < nr), out of line: through a small buffer, one element at a
// time.
template <class Arch, class Ep, class OutT>
[[gnu::noinline]] void store_tile_edge(const typename micro_kernel<Arch>::tile& acc,
                                       std::ptrdiff_t rows, std::ptrdiff_t cols, std::ptrdiff_t i0,
                                       std::ptrdiff_t j0, OutT* c, std::ptrdiff_t ldc, const Ep& ep,
                                       const float* prior) {
  using mk = micro_kernel<Arch>;
  constexpr int W = mk::W;
  alignas(64) float t[mk::MR][mk::NR];
  for (int i = 0; i < mk::MR; ++i)
    for (int v = 0; v < mk::NV; ++v) simd<Arch>::store(&t[i][v * W], acc[i][v]);
  for (std::ptrdiff_t i = 0; i < rows; ++i) {
    for (std::ptrdiff_t j = 0; j < cols; ++j) {
      const float sum = prior ? t[i][j] + prior[(i0 + i) * ldc + j0 + j] : t[i][j];
      store_one(c + (i0 + i) * ldc + j0 + j, ep(sum, i0 + i, j0 + j));
    }
  }
}

// Applies the epilogue to an accumulator tile and writes rows x cols of it at C(i0, j0). With
// `prior` (f32 C only), the partial sums already in C from earlier k blocks are added first.
template <class Arch, class Ep, class OutT>
[[gnu::always_inline]] inline void store_tile(typename micro_kernel<Arch>::tile& acc,
                                              std::ptrdiff_t rows, std::ptrdiff_t cols,
                                              std::ptrdiff_t i0, std::ptrdiff_t j0, OutT* c,
                                              std::ptrdiff_t ldc, const Ep& ep,
                                              const float* prior = nullptr) {
  using mk = micro_kernel<Arch>;
  using V = typename mk::V;
  constexpr int W = mk::W;
  if (cols == mk::NR) {
    if constexpr (Ep::heavy) {
      // A transcendental epilogue needs ~15 registers of constants and temporaries; evaluated
      // while the 24 accumulators are live it spills. Stage the sums in L1 first.
      alignas(64) float staged[mk::MR][mk::NR];
#pragma GCC unroll 16
      for (int i = 0; i < mk::MR; ++i) {
        if (i >= rows) break;
        const float* prow = prior ? prior + (i0 + i) * ldc + j0 : nullptr;
#pragma GCC unroll 4
        for (int v = 0; v < mk::NV; ++v) {
          V sum = acc[i][v];
          if (prow) sum = sum + simd<Arch>::load(prow + v * W);
          simd<Arch>::store(&staged[i][v * W], sum);
        }
      }
      for (std::ptrdiff_t i = 0; i < rows; ++i) {
        OutT* crow = c + (i0 + i) * ldc + j0;
#pragma GCC unroll 4
        for (int v = 0; v < mk::NV; ++v)
          store_out<Arch>(crow + v * W,
                          ep(simd<Arch>::load(&staged[i][v * W]), i0 + i, j0 + v * W));
      }
      return;
    } else {
#pragma GCC unroll 16
      for (int i = 0; i < mk::MR; ++i) {  // unrolled: acc[i] must name a register, not memory
        if (i >= rows) break;
        OutT* crow = c + (i0 + i) * ldc + j0;
        const float* prow = prior ? prior + (i0 + i) * ldc + j0 : nullptr;
#pragma GCC unroll 4
        for (int v = 0; v < mk::NV; ++v) {
          V sum = acc[i][v];
          if (prow) sum = sum + simd<Arch>::load(prow + v * W);
          store_out<Arch>(crow + v * W, ep(sum, i0 + i, j0 + v * W));
        }
      }
      return;
    }
  }
  store_tile_edge<Arch>(acc, rows, cols, i0, j0, c, ldc, ep, prior);
}

// The right edge of store_pair_tile, out of line: one element at a time from a small buffer.
template <class Arch, class Ep, class OutT>
[[gnu::noinline]] void store_pair_tile_edge(const typename micro_kernel<Arch>::tile& acc,
                                            std::ptrdiff_t rows, std::ptrdiff_t cols,
                                            std::ptrdiff_t i0, std::ptrdiff_t j0, OutT* c,
                                            std::ptrdiff_t ldc, const Ep& ep) {
  using mk = micro_kernel<Arch>;
  constexpr int W = mk::W, H = mk::NR / 2;
  alignas(64) float t[mk::MR][mk::NR];
  for (int i = 0; i < mk::MR; ++i)
    for (int v = 0; v < mk::NV; ++v) simd<Arch>::store(&t[i][v * W], acc[i][v]);
  for (std::ptrdiff_t i = 0; i < rows; ++i)
    for (std::ptrdiff_t j = 0; j < cols; ++j)
      store_one(c + (i0 + i) * ldc + j0 + j, ep(t[i][j], t[i][H + j], i0 + i, j0 + j));
}

// store_tile for a pair tile (gemm_pair_with): vectors [0, NV/2) of each row are the first
// product's sums for output columns [j0, j0 + nr/2), vectors [NV/2, NV) the second's; `cols`
// (<= nr/2) output columns are written.
template <class Arch, class Ep, class OutT>
[[gnu::always_inline]] inline void store_pair_tile(typename micro_kernel<Arch>::tile& acc,
                                                   std::ptrdiff_t rows, std::ptrdiff_t cols,
                                                   std::ptrdiff_t i0, std::ptrdiff_t j0, OutT* c,
                                                   std::ptrdiff_t ldc, const Ep& ep) {
  using mk = micro_kernel<Arch>;
  constexpr int W = mk::W, NH = mk::NV / 2, H = mk::NR / 2;
  static_assert(mk::NV % 2 == 0, "gemm_pair_with: a tile of an even number of vectors per row");
  if (cols == H) {
    if constexpr (Ep::heavy) {  // staged in L1 first, as in store_tile
      alignas(64) float staged[mk::MR][mk::NR];
#pragma GCC unroll 16
      for (int i = 0; i < mk::MR; ++i) {
        if (i >= rows) break;
#pragma GCC unroll 4
        for (int v = 0; v < mk::NV; ++v) simd<Arch>::store(&staged[i][v * W], acc[i][v]);
      }
      for (std::ptrdiff_t i = 0; i < rows; ++i) {
        OutT* crow = c + (i0 + i) * ldc + j0;
#pragma GCC unroll 4
        for (int v = 0; v < NH; ++v)
          store_out<Arch>(crow + v * W, ep(simd<Arch>::load(&staged[i][v * W]),
                                           simd<Arch>::load(&staged[i][H + v * W]), i0 + i,
                                           j0 + v * W));
      }
    } else {
#pragma GCC unroll 16
      for (int i = 0; i < mk::MR; ++i) {  // unrolled: acc[i] must name a register, not memory
        if (i >= rows) break;
        OutT* crow = c + (i0 + i) * ldc + j0;
#pragma GCC unroll 4
        for (int v = 0; v < NH; ++v)
          store_out<Arch>(crow + v * W, ep(acc[i][v], acc[i][NH + v], i0 + i, j0 + v * W));
      }
    }
    return;
  }
  store_pair_tile_edge<Arch>(acc, rows, cols, i0, j0, c, ldc, ep);
}

// ---- The drivers and the epilogue ----
// The drivers below (blocking, packing of A, the streaming order, threading) are instantiated per
// arch, C type, B type and pairing only. What depends on the epilogue is `run_strip`: the
// micro-kernel and the store of a run of tiles (a strip), one out-of-line function per epilogue,
// reached through a `tile_sink`. The accumulators stay in registers from the last rank-1 update
// through the epilogue; a strip holds many tiles, so the call is paid once per strip.

// A run of tiles of one product. along_n: the tiles of rows [i0, i1) (one tile of rows) across
// panels [p0, p1), B streamed from L2 (prefetching). along_m: for each panel of [p0, p1), its tiles
// down rows [i0, i1): the first brings the panel from L2 (prefetching), the rest find it in L1.
// along_m_streaming: as along_m, each tile of a panel also bringing its share of the next panel
// into L2 (gemm_run_streaming), where the panel has more than one tile and is not the strip's last.
// A(i, p) is at a[(i - a_row0) * a_is + p * a_ks]; panel q of B at b + q * panel_stride (k rows of
// nr elements); k is the strip's depth (a k block's). `prior` (along_n, f32 C only): partial sums
// already in C, added before the epilogue.
template <class TB>
struct tile_strip {
  enum class order : unsigned char { along_n, along_m, along_m_streaming };
  order kind = order::along_n;
  std::ptrdiff_t n = 0, k = 0;
  const float* a = nullptr;
  std::ptrdiff_t a_row0 = 0, a_is = 0, a_ks = 0;
  std::ptrdiff_t i0 = 0, i1 = 0, p0 = 0, p1 = 0;
  const TB* b = nullptr;
  std::ptrdiff_t panel_stride = 0;
  const float* prior = nullptr;
  std::ptrdiff_t next_step = 0;
};

// The store of one tile of a strip (store_tile or store_pair_tile): inlined where the micro-kernel
// hands over a full tile's accumulators, so that they stay in registers; out of line (`tail`) for
// a tile of fewer rows, whose accumulators the out-of-line tail kernel left in memory.
template <class Arch, class Ep, class OutT>
struct strip_store {
  using tile = typename micro_kernel<Arch>::tile;
  const Ep& ep;
  OutT* c;
  std::ptrdiff_t ldc, rows, cols, i0, j0;
  const float* prior;  // f32 C, unpaired: partial sums to add, or null
  [[gnu::always_inline]] void operator()(tile& acc) const {
    if constexpr (is_pair_epilogue<Ep>)
      store_pair_tile<Arch>(acc, rows, cols, i0, j0, c, ldc, ep);
    else
      store_tile<Arch>(acc, rows, cols, i0, j0, c, ldc, ep, prior);
  }
  [[gnu::noinline]] void tail(tile& acc) const { (*this)(acc); }
};

// Computes and stores the tiles of strip s into C (c, ldc) through the epilogue *ep (an Ep).
template <class Arch, class Ep, class OutT, class TB>
[[gnu::noinline]] void run_strip(const void* ep_ptr, OutT* c, std::ptrdiff_t ldc,
                                 const tile_strip<TB>& s) {
  using mk = micro_kernel<Arch>;
  using order = typename tile_strip<TB>::order;
  constexpr int MR = mk::MR, NR = mk::NR;
  constexpr std::ptrdiff_t cols_per_panel = is_pair_epilogue<Ep> ? NR / 2 : NR;
  const Ep& ep = *static_cast<const Ep*>(ep_ptr);
  // One tile: rows [i0, i0 + rows), panel jp; PrefetchB and StreamNext as micro_kernel::compute.
  auto tile = [&](auto prefetch_b, auto stream_next, std::ptrdiff_t i0, std::ptrdiff_t rows,
                  std::ptrdiff_t jp, const TB* next, std::ptrdiff_t next_last) {
    const std::ptrdiff_t j0 = jp * cols_per_panel,
                         cols = std::min<std::ptrdiff_t>(cols_per_panel, s.n - j0);
    constexpr bool pf = decltype(prefetch_b)::value, sn = decltype(stream_next)::value;
    const strip_store<Arch, Ep, OutT> store{ep, c, ldc, rows, cols, i0, j0, s.prior};
    const float* ap = s.a + (i0 - s.a_row0) * s.a_is;
    const TB* bp = s.b + jp * s.panel_stride;
    typename mk::tile acc;
    if (rows == MR) {
      mk::template compute_rows<MR, pf, TB, sn>(s.k, ap, s.a_is, s.a_ks, bp, NR, acc, next,
                                                 s.next_step, next_last);
      store(acc);
    } else {
      mk::template compute_tail<pf, TB, sn>(rows, s.k, ap, s.a_is, s.a_ks, bp, NR, acc, next,
                                             s.next_step, next_last);
      store.tail(acc);
    }
  };
  if (s.kind == order::along_n) {
    for (std::ptrdiff_t jp = s.p0; jp < s.p1; ++jp)
      tile(std::true_type{}, std::false_type{}, s.i0, s.i1 - s.i0, jp, nullptr, 0);
  } else if (s.kind == order::along_m) {
    for (std::ptrdiff_t jp = s.p0; jp < s.p1; ++jp)
      for (std::ptrdiff_t i0 = s.i0; i0 < s.i1; i0 += MR) {
        const std::ptrdiff_t rows = std::min<std::ptrdiff_t>(MR, s.i1 - i0);
        if (i0 == s.i0)
          tile(std::true_type{}, std::false_type{}, i0, rows, jp, nullptr, 0);
        else
          tile(std::false_type{}, std::false_type{}, i0, rows, jp, nullptr, 0);
      }
  } else {
    // Each tile prefetches one line per update, next_step elements apart: the tiles of a panel
    // together cover the next panel (k * NR elements), except in the strip's last panel and when
    // the panel has one tile.
    const std::ptrdiff_t panel_size = s.k * NR;
    const bool streams = s.i1 - s.i0 > MR;
    for (std::ptrdiff_t jp = s.p0; jp < s.p1; ++jp) {
      const TB* next = s.b + (jp + 1) * s.panel_stride;
      for (std::ptrdiff_t i0 = s.i0; i0 < s.i1; i0 += MR) {
        const std::ptrdiff_t rows = std::min<std::ptrdiff_t>(MR, s.i1 - i0);
        const std::ptrdiff_t share = (i0 - s.i0) / MR * s.k * s.next_step;
        if (!streams || jp + 1 == s.p1 || share >= panel_size)
          tile(std::true_type{}, std::false_type{}, i0, rows, jp, nullptr, 0);
        else
          tile(std::false_type{}, std::true_type{}, i0, rows, jp, next + share,
               panel_size - 1 - share);
      }
    }
  }
}

// Where a driver's tiles go: run(ep, c, ldc, strip) is run_strip for the epilogue's type.
template <class OutT, class TB>
struct tile_sink {
  void (*run)(const void*, OutT*, std::ptrdiff_t, const tile_strip<TB>&) = nullptr;
  const void* ep = nullptr;
  OutT* c = nullptr;
  std::ptrdiff_t ldc = 0;
  void operator()(const tile_strip<TB>& s) const { run(ep, c, ldc, s); }
};

template <class Arch, class Ep, class OutT, class TB>
tile_sink<OutT, TB> sink_for(const Ep& ep, OutT* c, std::ptrdiff_t ldc) {
  return {&run_strip<Arch, Ep, OutT, TB>, &ep, c, ldc};
}

// Long k (f32 C only): k is cut into blocks of <= 256 so one copied mr x kc A panel (12 KiB) stays
// in L1 and the kc x n slice of B in L2; partial sums go through C, and the epilogue runs with
// the last block. Each element still sums its k blocks in the same order on any thread count.
constexpr std::ptrdiff_t k_block_threshold = 512, k_block = 256;

template <class Arch, class TB>
void gemm_run_k_blocked(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
                        std::ptrdiff_t lda, bool trans_a, const packed_b<Arch, TB>& b,
                        const tile_sink<float, TB>& out, float* workspace, thread_pool* pool) {
  using mk = micro_kernel<Arch>;
  constexpr int MR = mk::MR, NR = mk::NR;
  static constexpr no_epilogue raw_sums{};
  const tile_sink<float, TB> raw = sink_for<Arch, no_epilogue, float, TB>(raw_sums, out.c, out.ldc);
  const std::ptrdiff_t n_panels = b.panels();
  const std::ptrdiff_t k_blocks = (k + k_block - 1) / k_block, kc = (k + k_blocks - 1) / k_blocks;
  constexpr std::ptrdiff_t l2_budget = std::ptrdiff_t(1) << 20;
  const std::ptrdiff_t max_block = std::max<std::ptrdiff_t>(1, l2_budget / (kc * NR * 4));
  const std::ptrdiff_t blocks = (n_panels + max_block - 1) / max_block;
  const std::ptrdiff_t block = (n_panels + blocks - 1) / blocks;
  for (std::ptrdiff_t pc = 0; pc < k; pc += kc) {
    const std::ptrdiff_t kb = std::min(kc, k - pc);
    const bool first = pc == 0, last = pc + kb == k;
    const float* a_block = trans_a ? a + pc * lda : a + pc;
    // Equal ranges of rows per thread, as in gemm_run.
    parallel_for(pool, m, [&](std::ptrdiff_t r0, std::ptrdiff_t r1, int t) {
      float* a_panel = workspace + std::ptrdiff_t(t) * MR * a_copy_stride(k);
      tile_strip<TB> s;
      s.n = n, s.k = kb, s.b = b.data + pc * NR, s.panel_stride = b.k * NR;
      s.prior = first ? nullptr : out.c;  // earlier k blocks: raw sums, added in
      for (std::ptrdiff_t jb = 0; jb < n_panels; jb += block) {
        s.p0 = jb, s.p1 = std::min(n_panels, jb + block);
        for (std::ptrdiff_t i0 = r0; i0 < r1; i0 += MR) {
          s.i0 = s.a_row0 = i0, s.i1 = std::min(r1, i0 + MR);
          // A^T is read in place (MR contiguous floats per update); A's rows are copied so they
          // sit in L1 without set conflicts.
          s.a = a_block + i0, s.a_is = 1, s.a_ks = lda;
          if (!trans_a) {
            copy_a_rows(s.i1 - i0, kb, a_block, lda, i0, a_panel);
            s.a = a_panel, s.a_is = a_copy_stride(kb), s.a_ks = 1;
          }
          (last ? out : raw)(s);
        }
      }
    });
  }
}

// The streaming order, for products of few rows whose B is large (at most stream_tiles panels of
// mr rows, A read in place and within 1 MiB so that it stays in L2, B of 512 KiB or more): each B
// panel meets every row before the next panel, so B is read once, and each of the panel's tiles
// brings its share of the next panel into L2 as it computes. A product of few rows does 2 * m
// FLOPs per element of B (64 for 32 rows), too few to hide B coming from memory in bursts, as the
// row order fetches it (a batch-1 encoder's weights do not stay in the caches: 43 MB for
// all-MiniLM-L6-v2); here the stream runs all the time, at the rate the tiles consume it. Threads
// take equal ranges of panels rather than of rows, so each reads only its part of B. A single tile
// of rows (a decode step) keeps the prefetch a few updates ahead into L1. k is never cut into
// blocks here (A stays in L2 whole). The 512 KiB count bf16 panels as if widened to f32. A smaller
// B stays in the caches from one call to the next, where the row order measured a few percent
// faster.
constexpr std::ptrdiff_t stream_tiles = 12, stream_min_b_bytes = std::ptrdiff_t(1) << 19;

template <class Arch, class OutT, class TB>
void gemm_run_streaming(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
                        std::ptrdiff_t lda, bool trans_a, const packed_b<Arch, TB>& b,
                        const tile_sink<OutT, TB>& out, thread_pool* pool) {
  using mk = micro_kernel<Arch>;
  constexpr int MR = mk::MR, NR = mk::NR;
  const std::ptrdiff_t m_tiles = (m + MR - 1) / MR;
  tile_strip<TB> base;
  base.kind = tile_strip<TB>::order::along_m_streaming;
  base.n = n, base.k = k, base.a = a, base.a_row0 = 0;
  base.a_is = trans_a ? 1 : lda, base.a_ks = trans_a ? lda : 1;
  base.i0 = 0, base.i1 = m, base.b = b.data, base.panel_stride = k * NR;
  base.next_step = (NR + m_tiles - 1) / m_tiles;
  parallel_for(pool, b.panels(), [&](std::ptrdiff_t p0, std::ptrdiff_t p1, int) {
    tile_strip<TB> s = base;
    s.p0 = p0, s.p1 = p1;
    out(s);
  });
}

template <class Arch, bool Paired, class OutT, class TB>
void gemm_drive(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
                std::ptrdiff_t lda, bool trans_a, const packed_b<Arch, TB>& b,
                const tile_sink<OutT, TB>& out, float* workspace, thread_pool* pool) {
  using mk = micro_kernel<Arch>;
  constexpr int MR = mk::MR, NR = mk::NR;
  const std::ptrdiff_t n_panels = b.panels();
  // Keep the B panels one A panel meets within ~1 MiB so they stay in L2 across A panels.
  constexpr std::ptrdiff_t l2_budget = std::ptrdiff_t(1) << 20;
  const std::ptrdiff_t panel_bytes =
      std::max<std::ptrdiff_t>(k, 1) * NR * std::ptrdiff_t(sizeof(TB));
  const std::ptrdiff_t max_block = std::max<std::ptrdiff_t>(1, l2_budget / panel_bytes);
  const std::ptrdiff_t blocks = (n_panels + max_block - 1) / max_block;
  const std::ptrdiff_t block = blocks > 0 ? (n_panels + blocks - 1) / blocks : 1;
  // A pair (gemm_pair_with): n output columns, each panel nr/2 of them; k is never blocked (the
  // partial sums would need both products' columns in C).
  // A is read in place (broadcasts need no layout; packing cost up to 20% at n = 128); its rows
  // are copied only when rows 4 KiB apart would fight for the same L1 sets.
  const bool pack_a = !trans_a && (lda * 4) % 4096 == 0;
  // B's size as f32 panels decides, so that bf16 panels take the order the same B widened to f32
  // takes, and give the same sums.
  if (!pack_a && (m + MR - 1) / MR <= stream_tiles &&
      m * k * std::ptrdiff_t(sizeof(float)) <= l2_budget &&
      n_panels * std::max<std::ptrdiff_t>(k, 1) * NR * std::ptrdiff_t(sizeof(float)) >=
          stream_min_b_bytes) {
    gemm_run_streaming<Arch>(m, n, k, a, lda, trans_a, b, out, pool);
    return;
  }
  if constexpr (std::is_same_v<OutT, float> && !Paired) {
    if (k > k_block_threshold) {
      gemm_run_k_blocked<Arch>(m, n, k, a, lda, trans_a, b, out, workspace, pool);
      return;
    }
  }
  // When one B panel fits in L1, hold it there and stream the A panels (12 floats per rank-1
  // update) from L2, instead of streaming B (32 floats per update).
  const bool b_outer = !pack_a && std::ptrdiff_t(k) * NR * std::ptrdiff_t(sizeof(TB)) <= (32 << 10);
  tile_strip<TB> base;
  base.n = n, base.k = k, base.b = b.data, base.panel_stride = k * NR;
  // A read in place: row i at a + i * a_is.
  base.a = a, base.a_row0 = 0;
  base.a_is = trans_a ? 1 : lda, base.a_ks = trans_a ? lda : 1;
  // Threads take equal ranges of rows (not of whole panels: 128 rows on two threads are 64 each,
  // five panels and a 4-row tail, where whole panels would be 6 against 5), each cut into MR-row
  // panels from its first row. A thread keeps the same rows from one product to the next, so
  // it reads the rows of A it wrote itself.
  parallel_for(pool, m, [&](std::ptrdiff_t r0, std::ptrdiff_t r1, int t) {
    tile_strip<TB> s = base;
    if (b_outer) {
      s.kind = tile_strip<TB>::order::along_m;
      s.i0 = r0, s.i1 = r1, s.p0 = 0, s.p1 = n_panels;
      out(s);
      return;
    }
    float* a_panel = workspace + std::ptrdiff_t(t) * MR * a_copy_stride(k);
    for (std::ptrdiff_t jb = 0; jb < n_panels; jb += block) {
      s.p0 = jb, s.p1 = std::min(n_panels, jb + block);
      for (std::ptrdiff_t i0 = r0; i0 < r1; i0 += MR) {
        s.i0 = i0, s.i1 = std::min(r1, i0 + MR);
        if (pack_a) {
          copy_a_rows(s.i1 - i0, k, a, lda, i0, a_panel);
          s.a = a_panel, s.a_row0 = i0, s.a_is = a_copy_stride(k), s.a_ks = 1;
        }
        out(s);
      }
    }
  });
}

// The driver for epilogue ep: its strips run in run_strip<Arch, Ep, OutT, TB>.
template <class Arch, class Ep, class OutT, class TB>
void gemm_run(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
              std::ptrdiff_t lda, bool trans_a, const packed_b<Arch, TB>& b, OutT* c,
              std::ptrdiff_t ldc, const Ep& ep, float* workspace, thread_pool* pool) {
  gemm_drive<Arch, is_pair_epilogue<Ep>>(m, n, k, a, lda, trans_a, b,
                                         sink_for<Arch, Ep, OutT, TB>(ep, c, ldc), workspace, pool);
}

}  // namespace detail

// Packs B (k x n; element (p, j) at b[p*ldb + j], or b[j*ldb + p] when trans_b) into `dst`, which
// must hold packed_b_floats<Arch>(k, n) floats. bf16 and int8 weights are widened to f32 here,
// once.
template <class Arch = native_arch, class T>
packed_b<Arch> pack_b(std::ptrdiff_t k, std::ptrdiff_t n, const T* b, std::ptrdiff_t ldb,
                      bool trans_b, float* dst) {
  static_assert(
      std::is_same_v<T, float> || std::is_same_v<T, bf16_bits> || std::is_same_v<T, std::int8_t>,
      "pack_b: B must be float, bf16 bits (std::uint16_t) or int8");
  detail::check_gemm_size("k", k);
  detail::check_gemm_size("n", n);
  if (dst == nullptr && k * n > 0) throw std::invalid_argument("pack_b: destination is null");
  if (b == nullptr && k * n > 0) throw std::invalid_argument("pack_b: B is null");

  detail::pack_b_panels<gemm_tile<Arch>::nr>(k, n, b, ldb, trans_b, dst);
  return packed_b<Arch>{dst, k, n};
}

// pack_b for B read with any strides: B(p, j) at b[p*s_k + j*s_n].
template <class Arch = native_arch, class T>
packed_b<Arch> pack_b_strided(std::ptrdiff_t k, std::ptrdiff_t n, const T* b, std::ptrdiff_t s_k,
                              std::ptrdiff_t s_n, float* dst) {
  if (s_n == 1 || n == 1) return pack_b<Arch>(k, n, b, s_k, false, dst);
  if (s_k == 1 || k == 1) return pack_b<Arch>(k, n, b, s_n, true, dst);
  detail::check_gemm_size("k", k);
  detail::check_gemm_size("n", n);
  constexpr int NR = gemm_tile<Arch>::nr;
  for (std::ptrdiff_t p0 = 0; p0 < (n + NR - 1) / NR; ++p0)
    for (std::ptrdiff_t p = 0; p < k; ++p)
      for (std::ptrdiff_t jj = 0; jj < NR; ++jj) {
        const std::ptrdiff_t j = p0 * NR + jj;
        dst[(p0 * k + p) * NR + jj] = j < n ? detail::load_as_float(b + p * s_k + j * s_n) : 0.0f;
      }
  return packed_b<Arch>{dst, k, n};
}

namespace detail {
// B (T: bf16 bits or int8) read with any strides, B(p, j) at b[p*s_k + j*s_n], copied into
// nr-column panels of T (zero past column n) at dst.
template <int NR, class T>
void pack_narrow_panels(const char* who, std::ptrdiff_t k, std::ptrdiff_t n, const T* b,
                        std::ptrdiff_t s_k, std::ptrdiff_t s_n, T* dst) {
  check_gemm_size("k", k);
  check_gemm_size("n", n);
  if (k * n > 0 && (dst == nullptr || b == nullptr))
    throw std::invalid_argument(std::string(who) + ": B or the destination is null");
  for (std::ptrdiff_t p0 = 0; p0 < (n + NR - 1) / NR; ++p0)
    for (std::ptrdiff_t p = 0; p < k; ++p) {
      T* out = dst + (p0 * k + p) * NR;
      const std::ptrdiff_t j0 = p0 * NR, cols = std::min<std::ptrdiff_t>(NR, n - j0);
      if (s_n == 1) {
        std::memcpy(out, b + p * s_k + j0, std::size_t(cols) * sizeof(T));
      } else {
        for (std::ptrdiff_t jj = 0; jj < cols; ++jj) out[jj] = b[p * s_k + (j0 + jj) * s_n];
      }
      for (std::ptrdiff_t jj = cols; jj < NR; ++jj) out[jj] = T(0);
    }
}
}  // namespace detail

// B (bf16, read with any strides: B(p, j) at b[p*s_k + j*s_n]) packed in nr-column panels of bf16
// (the bits copied, zero past column n) into `dst`, which holds packed_b_floats<Arch>(k, n)
// elements: the packed_b<Arch, bf16_bits> the micro-kernel widens as it loads.
template <class Arch = native_arch>
packed_b<Arch, bf16_bits> pack_b_bf16_panels(std::ptrdiff_t k, std::ptrdiff_t n, const bf16_bits* b,
                                             std::ptrdiff_t s_k, std::ptrdiff_t s_n,
                                             bf16_bits* dst) {
  detail::pack_narrow_panels<gemm_tile<Arch>::nr>("pack_b_bf16_panels", k, n, b, s_k, s_n, dst);
  return packed_b<Arch, bf16_bits>{dst, k, n};
}

// The same for an int8 weight (the values copied, widened exactly by the micro-kernel as it loads
// them; a per-column scale is the caller's epilogue): `dst` holds packed_b_floats<Arch>(k, n)
// bytes.
template <class Arch = native_arch>
packed_b<Arch, std::int8_t> pack_b_s8_panels(std::ptrdiff_t k, std::ptrdiff_t n,
                                             const std::int8_t* b, std::ptrdiff_t s_k,
                                             std::ptrdiff_t s_n, std::int8_t* dst) {
  detail::pack_narrow_panels<gemm_tile<Arch>::nr>("pack_b_s8_panels", k, n, b, s_k, s_n, dst);
  return packed_b<Arch, std::int8_t>{dst, k, n};
}

// One of the two weights of a GEMM pair (gemm_pair_with) packed into its half of the pair's
// panels at dst: B (k x n, B(p, j) at b[p*s_k + j*s_n]) goes to columns [half * nr/2, half * nr/2
// + nr/2) of each panel, panel q taking columns [q * nr/2, q * nr/2 + nr/2) of B (zero past n).
// dst holds packed_b_floats<Arch>(k, 2 * n) elements: f32 (B widened), or bf16 bits (B bf16,
// copied: the panels the micro-kernel widens as it loads). The pair's packed_b is
// {dst, k, 2 * n} once both halves are written.
template <class Arch = native_arch, class T, class D>
void pack_b_pair_half(std::ptrdiff_t k, std::ptrdiff_t n, const T* b, std::ptrdiff_t s_k,
                      std::ptrdiff_t s_n, int half, D* dst) {
  static_assert(std::is_same_v<D, float> || std::is_same_v<T, D>,
                "pack_b_pair_half: bf16 panels take a bf16 weight");
  detail::check_gemm_size("k", k);
  detail::check_gemm_size("n", n);
  if (half != 0 && half != 1)
    throw std::invalid_argument("pack_b_pair_half: half must be 0 or 1, got " +
                                std::to_string(half));
  if (k * n > 0 && (dst == nullptr || b == nullptr))
    throw std::invalid_argument("pack_b_pair_half: B or the destination is null");
  constexpr int NR = gemm_tile<Arch>::nr, H = NR / 2;
  for (std::ptrdiff_t q = 0; q < (n + H - 1) / H; ++q)
    for (std::ptrdiff_t p = 0; p < k; ++p) {
      D* out = dst + (q * k + p) * NR + half * H;
      for (std::ptrdiff_t jj = 0; jj < H; ++jj) {
        const std::ptrdiff_t j = q * H + jj;
        if constexpr (std::is_same_v<D, float>)
          out[jj] = j < n ? detail::load_as_float(b + p * s_k + j * s_n) : 0.0f;
        else
          out[jj] = j < n ? b[p * s_k + j * s_n] : D(0);
      }
    }
}

namespace detail {
template <class Arch, class OutT, class TB>
void check_gemm_call(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
                     const packed_b<Arch, TB>& b, std::ptrdiff_t ldc, const float* workspace) {
  static_assert(std::is_same_v<OutT, float> || std::is_same_v<OutT, bf16_bits>,
                "gemm: C must be float or bf16 bits (std::uint16_t)");
  check_gemm_size("m", m);
  check_gemm_size("n", n);
  check_gemm_size("k", k);
  if (b.k != k || b.n != n)
    throw std::invalid_argument("gemm: packed B is " + std::to_string(b.k) + "x" +
                                std::to_string(b.n) + ", the product needs " + std::to_string(k) +
                                "x" + std::to_string(n));
  if (m == 0 || n == 0) return;
  if (workspace == nullptr) throw std::invalid_argument("gemm: workspace is null");
  if (ldc < n)
    throw std::invalid_argument("gemm: ldc " + std::to_string(ldc) +
                                " is less than n = " + std::to_string(n));
  if (k > 0 && a == nullptr) throw std::invalid_argument("gemm: A is null");
}
}  // namespace detail

// C = ep(A.B) with any epilogue functor (see no_epilogue), C f32 (float) or bf16 (bf16_bits),
// row-major with leading dimension ldc. `workspace` holds gemm_workspace_floats<Arch>(k, threads)
// floats, where threads is pool->size() (1 without a pool). Rows of C are split across the pool's
// threads; each element is computed by one thread in a fixed order, so results do not depend on
// the pool.
template <class Arch = native_arch, class OutT, class Ep, class TB>
void gemm_with(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
               std::ptrdiff_t lda, bool trans_a, const packed_b<Arch, TB>& b, OutT* c,
               std::ptrdiff_t ldc, const Ep& ep, float* workspace, thread_pool* pool = nullptr) {
  detail::check_gemm_call<Arch, OutT>(m, n, k, a, b, ldc, workspace);
  if (m == 0 || n == 0) return;
  detail::gemm_run<Arch>(m, n, k, a, lda, trans_a, b, c, ldc, ep, workspace, pool);
}

// C = ep(A.B1, A.B2) for a pair epilogue (is_pair_epilogue): both products in one pass over
// `b`, the two weights packed side by side by pack_b_pair_half (b.k == k, b.n == 2 * n); C has
// n columns. Otherwise as gemm_with, except that a long k is not cut into blocks.
template <class Arch = native_arch, class OutT, class Ep, class TB>
void gemm_pair_with(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
                    std::ptrdiff_t lda, bool trans_a, const packed_b<Arch, TB>& b, OutT* c,
                    std::ptrdiff_t ldc, const Ep& ep, float* workspace,
                    thread_pool* pool = nullptr) {
  static_assert(is_pair_epilogue<Ep>, "gemm_pair_with: the epilogue takes both products' sums");
  detail::check_gemm_size("n", n);
  if (b.k != k || b.n != 2 * n)
    throw std::invalid_argument("gemm_pair_with: packed B is " + std::to_string(b.k) + "x" +
                                std::to_string(b.n) + ", the pair needs " + std::to_string(k) +
                                "x" + std::to_string(2 * n));
  detail::check_gemm_call<Arch, OutT>(m, n, k, a, packed_b<Arch, TB>{b.data, k, n}, ldc,
                                      workspace);
  if (m == 0 || n == 0) return;
  detail::gemm_run<Arch>(m, n, k, a, lda, trans_a, b, c, ldc, ep, workspace, pool);
}

// C = act(scale * A.B + bias) + residual (gemm_epilogue), otherwise as gemm_with.
template <class Arch = native_arch, class OutT, class TB>
void gemm(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a, std::ptrdiff_t lda,
          bool trans_a, const packed_b<Arch, TB>& b, OutT* c, std::ptrdiff_t ldc,
          const gemm_epilogue& ep, float* workspace, thread_pool* pool = nullptr) {
  detail::check_gemm_call<Arch, OutT>(m, n, k, a, b, ldc, workspace);
  if (m == 0 || n == 0) return;
  if (ep.residual != nullptr && ep.ld_residual < n)
    throw std::invalid_argument("gemm: residual leading dimension " +
                                std::to_string(ep.ld_residual) +
                                " is less than n = " + std::to_string(n));
  with_standard_epilogue(ep, [&](const auto& e) {
    detail::gemm_run<Arch>(m, n, k, a, lda, trans_a, b, c, ldc, e, workspace, pool);
  });
}

}  // namespace fusedsl::cpu::kernels
