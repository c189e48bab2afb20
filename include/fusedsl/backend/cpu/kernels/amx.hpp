#pragma once
// bf16 GEMM on Intel AMX tiles, with the fused epilogue of kernels::gemm:
//
//   C[m x n] = act(scale * bf16(A)[m x k] . B[k x n] + bias[n]) + residual[m x n]  (f32 or bf16 C)
//
// B is bf16 weights packed once (`pack_b_bf16`); A is f32, rounded to bf16 (round to nearest
// even) into the caller's workspace at each call; products of bf16 values are exact in f32 and
// accumulate in f32. So the result is the f32 GEMM of the bf16-rounded operands, up to the order
// of the f32 additions (and: AMX reads bf16 subnormals as zero and flushes subnormal sums).
//
// Hardware (Intel SDM, Vol. 1 "Programming with Intel AMX", Vol. 2 TDPBF16PS; the Optimization
// Reference Manual's Intel AMX chapter for the blocking): 8 tile registers of up to 16 rows x
// 64 bytes. TDPBF16PS C, A, B takes A as 16 rows x 32 bf16, B as 16 rows x 16 *pairs* of bf16,
// C as 16 x 16 f32, and does C[i][j] += A[i][2r] B[r][j].0 + A[i][2r+1] B[r][j].1 over r < 16:
// a 16 x 16 x 32 product (16 Ki FLOP). B's rows hold consecutive k values in pairs ("VNNI" order).
//
// Layouts (bf16 elements):
//   packed B  panels of 32 columns (two B tiles); panel p at data + p * kp * 32, kp = k rounded up
//             to 32. Inside a panel, row r (r < kp/2) holds columns 32p..32p+31 as pairs
//             (B(2r, j), B(2r+1, j)): 64 values, 128 bytes. The B tile for k step s and columns
//             16t..16t+15 starts at panel + s*1024 + t*32 with a row stride of 128 bytes. Zero
//             past k and past n.
//   A (work)  16-row blocks of the whole of A; block b at workspace + b * 16 * kp. Inside it, the
//             A tile of k step s is 16 rows x 32 values, contiguous (1 KiB, row stride 64 bytes),
//             at + s * 512. Zero past k and past m. Contiguous tiles: no 4 KiB aliasing of rows.
//
// Loop (per thread, rows of C split in 32-row blocks, so each element is computed by one thread
// in a fixed order, whatever the thread count):
//   for each block of B panels that fits in ~1 MiB of L2
//     for each 32-row block of A                       (2 A tiles a k step, from L1/L2)
//       for each 32-column panel of B in the block     (2 B tiles a k step, streamed)
//         2 x 2 C tiles (tmm0-3) zeroed; per k step: A0 (tmm4), B0 (tmm6) -> C00; B1 (tmm7)
//         -> C01; A1 (tmm5) -> C10, C11 (4 TDPBF16PS, each right after the loads it needs);
//         then the C tiles go to a 32 x 32 f32 buffer on the stack.
// Blocks of 16 or fewer rows or columns use one A or one B tile (the 2x1, 1x2, 1x1 variants).
// What keeps the tiles busy (each measured with cpu_amx_bench on a CPU with AMX-BF16):
//   - B tiles load with TILELOADDT1 (a streaming hint), so the A block stays in L1 (k = 512:
//     +25%); with k <= 256 the next B steps are also prefetched;
//   - both buffers are 64-byte aligned inside the caller's memory (unaligned tile rows: 2x slower);
//   - vector work runs while the tiles compute, placed after a block's products are issued and
//     before its tile stores: the epilogue of the block two back, a write prefetch of the next
//     block's C lines, and, in the first pass over B, the conversion of this thread's next A
//     block, a slice per panel (only the first A block is converted up front).
// Run time: `amx_available()` checks CPUID (leaf 7: AMX-BF16 = EDX bit 22, AMX-TILE = EDX bit 24)
// and asks Linux for the tile data state once per process (arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA); without it the first tile instruction raises SIGILL: Linux,
// Documentation/arch/x86/xstate.rst). When the build has no AMX (no -mamx-tile -mamx-bf16) or
// the machine or kernel lacks it, `gemm_amx` computes the same product with portable loops on the
// same packed operands (VDPBF16PS with AVX512_BF16, else f32 FMAs: correct, slower than the f32
// kernel): callers that want speed check `amx_available()` and otherwise run kernels::gemm.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "fusedsl/backend/cpu/kernels/bf16.hpp"
#include "fusedsl/backend/cpu/kernels/gemm.hpp"  // gemm_epilogue
#include "fusedsl/backend/cpu/kernels/simd.hpp"  // <immintrin.h> with the GCC 12 warning fix
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/backend/cpu/kernels/vmath.hpp"

// GCC spells the feature macros __AMX_TILE__ / __AMX_BF16__, clang 14 __AMXTILE__ / __AMXBF16__.
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) &&                         \
    (defined(__AMX_BF16__) || defined(__AMXBF16__)) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__linux__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
#define FUSEDSL_CPU_AMX 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define FUSEDSL_CPU_AMX 0
#endif

namespace fusedsl::cpu::kernels {

namespace detail {
#if FUSEDSL_CPU_AMX
inline bool request_amx_permission() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  constexpr unsigned amx_bf16 = 1u << 22, amx_tile = 1u << 24;
  if ((edx & amx_bf16) == 0 || (edx & amx_tile) == 0) return false;
  constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;  // asm/prctl.h
  return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
}
#endif
}  // namespace detail

// True when this build has the AMX path and the CPU and the OS let this process use it. The
// first call asks the kernel for the tile state (process-wide); the answer is cached (a
// function-local static: thread-safe initialisation).
inline bool amx_available() {
#if FUSEDSL_CPU_AMX
  static const bool ok = detail::request_amx_permission();
  return ok;
#else
  return false;
#endif
}

// Which code computes gemm_amx: the tiles when available, or the portable loops (for tests and
// comparisons; also what `automatic` runs where AMX is absent).
enum class amx_mode { automatic, portable };

// A view of B packed for the tiles (layout in the header comment). Storage belongs to the caller.
struct packed_b_bf16 {
  static constexpr int nr = 32;  // columns per panel: two B tiles
  static constexpr int kr = 32;  // k values per tile step
  const bf16_bits* data = nullptr;
  std::ptrdiff_t k = 0, n = 0;
  std::ptrdiff_t k_padded() const { return round_up(k, kr); }
  std::ptrdiff_t panels() const { return (n + nr - 1) / nr; }
  const bf16_bits* panel(std::ptrdiff_t p) const { return data + p * k_padded() * nr; }
};

// Tile rows are read fastest from 64-byte aligned memory (unaligned: each 64-byte row spans two
// cache lines; measured 2x slower), so both buffers below carry 64 bytes of slack and the kernels
// align inside them: callers need not align.
constexpr std::ptrdiff_t amx_alignment_slack = 32;  // bf16 elements

// bf16 elements pack_b_bf16 needs for a k x n B.
constexpr std::size_t packed_b_bf16_elements(std::ptrdiff_t k, std::ptrdiff_t n) {
  return std::size_t(round_up(k, packed_b_bf16::kr) * round_up(n, packed_b_bf16::nr) +
                     amx_alignment_slack);
}

// bf16 elements of workspace gemm_amx needs: the whole of A as bf16 tiles (any thread count).
constexpr std::size_t gemm_amx_workspace_elements(std::ptrdiff_t m, std::ptrdiff_t k) {
  return std::size_t(round_up(m, 16) * round_up(k, packed_b_bf16::kr) + amx_alignment_slack);
}

namespace detail {

inline bf16_bits* align_64(bf16_bits* p) {
  return reinterpret_cast<bf16_bits*>((reinterpret_cast<std::uintptr_t>(p) + 63) &
                                      ~std::uintptr_t(63));
}

inline void check_amx_size(const char* fn, const char* what, std::ptrdiff_t v) {
  if (v < 0)
    throw std::invalid_argument(std::string(fn) + ": " + what + " must be >= 0, got " +
                                std::to_string(v));
}

template <class T>
bf16_bits as_bf16(const T* p) {
  if constexpr (std::is_same_v<T, bf16_bits>)
    return *p;
  else
    return to_bf16(*p);
}

// Rows [r0, r1) of A (times `scale`) as bf16 tiles in `ws` (layout in the header comment); rows
// >= m are zeros. `for_tiles`: the tiles read bf16 subnormals as zero, so one VCVTNE2PS2BF16 per
// 32 values (which flushes f32 subnormals, and gives NaN some quiet NaN) yields the same products
// as to_bf16.
inline void convert_a_rows(std::ptrdiff_t r0, std::ptrdiff_t r1, std::ptrdiff_t m, std::ptrdiff_t k,
                           const float* a, std::ptrdiff_t lda, bool trans_a, bf16_bits* ws,
                           [[maybe_unused]] bool for_tiles, float scale = 1.0f) {
  const std::ptrdiff_t kp = round_up(k, packed_b_bf16::kr), steps = kp / packed_b_bf16::kr;
  const bool scaled = scale != 1.0f;
  for (std::ptrdiff_t i = r0; i < r1; ++i) {
    bf16_bits* base = ws + (i / 16) * 16 * kp + (i % 16) * 32;
    for (std::ptrdiff_t s = 0; s < steps; ++s) {
      bf16_bits* dst = base + s * 512;
      const std::ptrdiff_t p0 = s * 32, count = i < m ? std::min<std::ptrdiff_t>(32, k - p0) : 0;
      if (count > 0 && !trans_a) {
        const float* src = a + i * lda + p0;
#if FUSEDSL_CPU_AMX && defined(__AVX512BF16__)
        if (for_tiles) {
          const __mmask16 lo = __mmask16(count >= 16 ? 0xffff : (1u << count) - 1u);
          const __mmask16 hi = __mmask16(count >= 32  ? 0xffff
                                         : count > 16 ? (1u << (count - 16)) - 1u
                                                      : 0u);
          __m512 vlo = _mm512_maskz_loadu_ps(lo, src), vhi = _mm512_maskz_loadu_ps(hi, src + 16);
          if (scaled)
            vlo = _mm512_mul_ps(vlo, _mm512_set1_ps(scale)),
            vhi = _mm512_mul_ps(vhi, _mm512_set1_ps(scale));
          const __m512bh v = _mm512_cvtne2ps_pbh(vhi, vlo);
          _mm512_store_si512(dst, std::bit_cast<__m512i>(v));  // dst is 64-byte aligned
          continue;
        }
#endif
        if (scaled)
          for (std::ptrdiff_t q = 0; q < count; ++q) dst[q] = to_bf16(scale * src[q]);
        else
          to_bf16(src, dst, std::size_t(count));
      } else {
        for (std::ptrdiff_t q = 0; q < count; ++q)
          dst[q] = to_bf16(scale * a[(p0 + q) * lda + i]);
      }
      std::fill(dst + std::max<std::ptrdiff_t>(count, 0), dst + 32, bf16_bits(0));
    }
  }
}

template <class T>
void store_scalar_out(T* p, float x) {
  if constexpr (std::is_same_v<T, float>)
    *p = x;
  else
    *p = to_bf16(x);
}

// The epilogue functor (gemm.hpp's no_epilogue explains the form) on a 32 x 32 f32 block of
// accumulators (row stride 32): rows x cols of it go to C(i0, j0). Full 16-lane halves as AVX-512
// vectors, the right edge lane by lane.
template <class Ep, class OutT>
void store_block(const float* acc, std::ptrdiff_t rows, std::ptrdiff_t cols, std::ptrdiff_t i0,
                 std::ptrdiff_t j0, OutT* c, std::ptrdiff_t ldc, const Ep& ep) {
  for (std::ptrdiff_t i = 0; i < rows; ++i) {  // row by row: C's lines in address order
    std::ptrdiff_t j = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
    using V = xsimd::batch<float, xsimd::avx512f>;
    for (; j + 16 <= cols; j += 16) {
      const __m512 x = ep(V(_mm512_load_ps(acc + i * 32 + j)), i0 + i, j0 + j);
      OutT* out = c + (i0 + i) * ldc + j0 + j;
      if constexpr (std::is_same_v<OutT, float>)
        _mm512_storeu_ps(out, x);
      else
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), to_bf16_x16(x));
    }
#endif
    for (; j < cols; ++j)
      store_scalar_out(c + (i0 + i) * ldc + j0 + j, ep(acc[i * 32 + j], i0 + i, j0 + j));
  }
}

// Asks for the C lines (and residual lines) of a block ahead of its epilogue, for writing: with a
// power-of-two ldc the 32 rows of a block share few L1 sets, and their misses otherwise stall
// the epilogue's stores.
template <class OutT>
void prefetch_block(std::ptrdiff_t rows, std::ptrdiff_t cols, std::ptrdiff_t i0, std::ptrdiff_t j0,
                    OutT* c, std::ptrdiff_t ldc, const float* residual,
                    std::ptrdiff_t ld_residual) {
  for (std::ptrdiff_t i = 0; i < rows; ++i) {
    const OutT* row = c + (i0 + i) * ldc + j0;
    __builtin_prefetch(row, 1, 3);
    __builtin_prefetch(row + cols - 1, 1, 3);
    if (residual) {
      const float* r = residual + (i0 + i) * ld_residual + j0;
      __builtin_prefetch(r, 0, 3);
      __builtin_prefetch(r + cols - 1, 0, 3);
    }
  }
}

// The portable core: the same 32 x 32 block as the tiles compute, on the packed operands. With
// AVX512_BF16, VDPBF16PS does a row's pair products on 16 columns at once (the tiles' operation
// on one row, also reading bf16 subnormals as zero); else f32 FMAs (bf16 products are exact in
// f32, so either is the tiles' arithmetic up to sum order).
// `acc` has row stride acc_ld floats.
inline void block_portable(const bf16_bits* a, std::ptrdiff_t a_next_block, const bf16_bits* b,
                           std::ptrdiff_t steps, std::ptrdiff_t rows, float* acc,
                           std::ptrdiff_t acc_ld = 32) {
#if defined(__AVX512BF16__) && defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
  // R rows at a time: 2R independent accumulator chains hide VDPBF16PS's latency.
  const auto rows_from = [&]<int R>(std::ptrdiff_t i0) {
    const bf16_bits* arow[R];
    __m512 lo[R], hi[R];
    for (int q = 0; q < R; ++q) {
      const std::ptrdiff_t i = i0 + q;
      arow[q] = (i < 16 ? a : a + a_next_block) + (i % 16) * 32;
      lo[q] = hi[q] = _mm512_setzero_ps();
    }
    for (std::ptrdiff_t s = 0; s < steps; ++s)
      for (int r = 0; r < 16; ++r) {
        const bf16_bits* brow = b + s * 1024 + r * 64;
        const __m512bh b0 = std::bit_cast<__m512bh>(_mm512_loadu_si512(brow));
        const __m512bh b1 = std::bit_cast<__m512bh>(_mm512_loadu_si512(brow + 32));
        for (int q = 0; q < R; ++q) {
          std::uint32_t pair;  // A(i, 2r), A(i, 2r + 1) of this step, broadcast to every column
          std::memcpy(&pair, arow[q] + s * 512 + 2 * r, sizeof pair);
          const __m512bh av = std::bit_cast<__m512bh>(_mm512_set1_epi32(int(pair)));
          lo[q] = _mm512_dpbf16_ps(lo[q], av, b0);
          hi[q] = _mm512_dpbf16_ps(hi[q], av, b1);
        }
      }
    for (int q = 0; q < R; ++q) {
      _mm512_storeu_ps(acc + (i0 + q) * acc_ld, lo[q]);
      _mm512_storeu_ps(acc + (i0 + q) * acc_ld + 16, hi[q]);
    }
  };
  std::ptrdiff_t i = 0;
  for (; i + 4 <= rows; i += 4) rows_from.template operator()<4>(i);
  for (; i < rows; ++i) rows_from.template operator()<1>(i);
#else
  for (std::ptrdiff_t i = 0; i < rows; ++i) {
    const bf16_bits* arow = (i < 16 ? a : a + a_next_block) + (i % 16) * 32;
    float sum[32] = {};
    for (std::ptrdiff_t s = 0; s < steps; ++s)
      for (int r = 0; r < 16; ++r) {
        const float a0 = from_bf16(arow[s * 512 + 2 * r]),
                    a1 = from_bf16(arow[s * 512 + 2 * r + 1]);
        const bf16_bits* brow = b + s * 1024 + r * 64;
        for (int j = 0; j < 32; ++j) {
          sum[j] = std::fma(a0, from_bf16(brow[2 * j]), sum[j]);
          sum[j] = std::fma(a1, from_bf16(brow[2 * j + 1]), sum[j]);
        }
      }
    std::memcpy(acc + i * acc_ld, sum, sizeof sum);
  }
#endif
}

#if FUSEDSL_CPU_AMX
// Tile configuration, palette 1: all 8 tiles 16 rows x 64 bytes (the SDM's LDTILECFG format).
struct alignas(64) tile_config {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved0[14] = {};
  std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// MT x NT C tiles (1 or 2 each) over `steps` k steps; the result goes to acc (32 x 32 f32, row
// stride acc_ld floats).
// Tiles: C in tmm0-3, A in tmm4-5, B in tmm6-7 (tile numbers are immediates: one body each).
// `between` runs after the tile products are issued and before the C tiles are stored: the
// previous block's epilogue goes there, so its stores to C do not queue behind the tile stores
// (which wait for the products) and the vector units work while the tiles compute.
template <int MT, int NT, class F>
void block_amx(const bf16_bits* a, std::ptrdiff_t a_next_block, const bf16_bits* b,
               std::ptrdiff_t steps, float* acc, const F& between, std::ptrdiff_t acc_ld = 32) {
  const bool prefetch_b = steps <= 8;
  // GCC's TILELOADD asm does not say it reads memory: the A tiles just written must be stored.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  _tile_zero(0);
  if constexpr (NT == 2) _tile_zero(1);
  if constexpr (MT == 2) _tile_zero(2);
  if constexpr (MT == 2 && NT == 2) _tile_zero(3);
  for (std::ptrdiff_t s = 0; s < steps; ++s) {
    // Each product right after the loads it needs (3% faster than all four loads first at k = 128).
    // B streams past (TILELOADDT1: keep it from evicting the A block, which is reused from L1).
    _tile_loadd(4, a + s * 512, 64);
    _tile_stream_loadd(6, b + s * 1024, 128);
    if (prefetch_b) {  // short k: A and a B panel both fit in L1; fetch B two steps ahead
      const char* next = reinterpret_cast<const char*>(b + (s + 2) * 1024);
      for (int line = 0; line < 32; ++line) _mm_prefetch(next + line * 64, _MM_HINT_T0);
    }
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT == 2) {
      _tile_stream_loadd(7, b + s * 1024 + 32, 128);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (MT == 2) {
      _tile_loadd(5, a + a_next_block + s * 512, 64);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NT == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  between();
  const std::ptrdiff_t stride = acc_ld * std::ptrdiff_t(sizeof(float));
  _tile_stored(0, acc, stride);
  if constexpr (NT == 2) _tile_stored(1, acc + 16, stride);
  if constexpr (MT == 2) _tile_stored(2, acc + 16 * acc_ld, stride);
  if constexpr (MT == 2 && NT == 2) _tile_stored(3, acc + 16 * acc_ld + 16, stride);
}
#endif

// ep: an epilogue functor; residual: a [m, n] operand it reads (prefetched with C), or null.
template <class Ep, class OutT>
void gemm_amx_run(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
                  std::ptrdiff_t lda, bool trans_a, const packed_b_bf16& b, OutT* c,
                  std::ptrdiff_t ldc, const Ep& ep, const float* residual,
                  std::ptrdiff_t ld_residual, bf16_bits* ws, thread_pool* pool, bool tiles) {
  const std::ptrdiff_t kp = b.k_padded(), steps = kp / packed_b_bf16::kr;
  const std::ptrdiff_t m_blocks = (m + 31) / 32, n_panels = b.panels();
  // Keep the B panels one A block meets within ~1 MiB so they stay in L2 across A blocks.
  constexpr std::ptrdiff_t l2_budget = std::ptrdiff_t(1) << 20;
  const std::ptrdiff_t panel_bytes = std::max<std::ptrdiff_t>(kp, 32) * packed_b_bf16::nr * 2;
  const std::ptrdiff_t max_block = std::max<std::ptrdiff_t>(1, l2_budget / panel_bytes);
  const std::ptrdiff_t n_blocks = (n_panels + max_block - 1) / max_block;
  const std::ptrdiff_t block = (n_panels + n_blocks - 1) / n_blocks;
  const std::ptrdiff_t a_next = 16 * kp;  // elements from one 16-row A block to the next
  parallel_for(pool, m_blocks, [&](std::ptrdiff_t pb, std::ptrdiff_t pe, int) {
#if FUSEDSL_CPU_AMX
    if (tiles) {
      static constexpr tile_config cfg{};  // static: GCC's LDTILECFG asm names 8 of its 64 bytes
      _tile_loadconfig(&cfg);              // per thread: the configuration is thread state
    }
#else
    (void)tiles;
#endif
    // A ring of accumulator blocks: a block's epilogue runs `delay` blocks later, between the
    // tile products and the tile stores of that later block, when its own tile stores are done
    // (1, 2 and 3 blocks measured the same).
    constexpr int delay = 2, slots = delay + 1;
    alignas(64) float acc[slots][32 * 32];
    struct block_place {
      std::ptrdiff_t rows, cols, i0, j0;
    } placed[slots];
    std::ptrdiff_t count = 0;  // blocks computed so far by this thread
    const auto finish = [&](std::ptrdiff_t t) {
      const block_place& q = placed[t % slots];
      store_block(acc[t % slots], q.rows, q.cols, q.i0, q.j0, c, ldc, ep);
    };
    for (std::ptrdiff_t jb = 0; jb < n_panels; jb += block) {
      const std::ptrdiff_t je = std::min(n_panels, jb + block);
      for (std::ptrdiff_t ib = pb; ib < pe; ++ib) {
        const std::ptrdiff_t i0 = ib * 32, rows = std::min<std::ptrdiff_t>(32, m - i0);
        const bf16_bits* ap = ws + 2 * ib * a_next;
        // A is converted in the first pass over B: this thread's first block up front, each next
        // block in slices between the tile products of the current one (vector work that overlaps
        // the tiles), so a block's tiles are fresh in cache when it is used.
        const std::ptrdiff_t a_rows = round_up(m, 16);
        const auto a_block_rows = [&](std::ptrdiff_t blk, std::ptrdiff_t part,
                                      std::ptrdiff_t parts) {
          const std::ptrdiff_t r0 = std::min(a_rows, 32 * blk + 32 * part / parts);
          return std::pair{r0, std::min(a_rows, 32 * blk + 32 * (part + 1) / parts)};
        };
        if (jb == 0 && ib == pb) {
          const auto [r0, r1] = a_block_rows(ib, 0, 1);
          convert_a_rows(r0, r1, m, k, a, lda, trans_a, ws, tiles);
        }
        for (std::ptrdiff_t jp = jb; jp < je; ++jp, ++count) {
          const std::ptrdiff_t j0 = jp * 32, cols = std::min<std::ptrdiff_t>(32, n - j0);
          const bf16_bits* bp = b.panel(jp);
          float* out = acc[count % slots];
          placed[count % slots] = {rows, cols, i0, j0};
          const auto earlier = [&] {
            if (jb == 0 && ib + 1 < pe) {
              const auto [r0, r1] = a_block_rows(ib + 1, jp - jb, je - jb);
              convert_a_rows(r0, r1, m, k, a, lda, trans_a, ws, tiles);
            }
            if (count >= delay) finish(count - delay);
            if (count >= delay - 1) {  // the next block to finish
              const block_place& q = placed[(count - delay + 1) % slots];
              prefetch_block(q.rows, q.cols, q.i0, q.j0, c, ldc, residual, ld_residual);
            }
          };
#if FUSEDSL_CPU_AMX
          if (tiles) {
            if (rows > 16 && cols > 16)
              block_amx<2, 2>(ap, a_next, bp, steps, out, earlier);
            else if (rows > 16)
              block_amx<2, 1>(ap, a_next, bp, steps, out, earlier);
            else if (cols > 16)
              block_amx<1, 2>(ap, a_next, bp, steps, out, earlier);
            else
              block_amx<1, 1>(ap, a_next, bp, steps, out, earlier);
          } else
#endif
          {
            block_portable(ap, a_next, bp, steps, rows, out);
            earlier();
          }
        }
      }
    }
    for (std::ptrdiff_t t = std::max<std::ptrdiff_t>(0, count - delay); t < count; ++t) finish(t);
#if FUSEDSL_CPU_AMX
    if (tiles) _tile_release();
#endif
  });
}

}  // namespace detail

// Packs B (k x n; element (p, j) at b[p*ldb + j], or b[j*ldb + p] when trans_b; f32 rounded to
// bf16 here, bf16 copied) into `dst`, which must hold packed_b_bf16_elements(k, n) values.
template <class T>
packed_b_bf16 pack_b_bf16(std::ptrdiff_t k, std::ptrdiff_t n, const T* b, std::ptrdiff_t ldb,
                          bool trans_b, bf16_bits* dst) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16_bits>,
                "pack_b_bf16: B must be float or bf16 bits (std::uint16_t)");
  detail::check_amx_size("pack_b_bf16", "k", k);
  detail::check_amx_size("pack_b_bf16", "n", n);
  if (k * n > 0 && dst == nullptr) throw std::invalid_argument("pack_b_bf16: destination is null");
  if (k * n > 0 && b == nullptr) throw std::invalid_argument("pack_b_bf16: B is null");
  if (k * n > 0 && ldb < (trans_b ? k : n))
    throw std::invalid_argument(
        "pack_b_bf16: ldb " + std::to_string(ldb) + " is less than " +
        (trans_b ? "k = " + std::to_string(k) : "n = " + std::to_string(n)));
  if (k * n == 0) return packed_b_bf16{dst, k, n};
  dst = detail::align_64(dst);
  const packed_b_bf16 out{dst, k, n};
  const std::ptrdiff_t kp = out.k_padded();
  for (std::ptrdiff_t p = 0; p < out.panels(); ++p) {
    bf16_bits* panel = dst + p * kp * packed_b_bf16::nr;
    const std::ptrdiff_t j0 = p * packed_b_bf16::nr;
    for (std::ptrdiff_t kk = 0; kk < kp; ++kk)
      for (std::ptrdiff_t jj = 0; jj < packed_b_bf16::nr; ++jj) {
        const std::ptrdiff_t j = j0 + jj;
        bf16_bits v = 0;
        if (kk < k && j < n) v = detail::as_bf16(trans_b ? b + j * ldb + kk : b + kk * ldb + j);
        panel[(kk / 2) * 64 + jj * 2 + kk % 2] = v;
      }
  }
  return out;
}

namespace detail {
template <class OutT>
void check_gemm_amx(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
                    std::ptrdiff_t lda, bool trans_a, const packed_b_bf16& b, OutT* c,
                    std::ptrdiff_t ldc, const bf16_bits* workspace) {
  static_assert(std::is_same_v<OutT, float> || std::is_same_v<OutT, bf16_bits>,
                "gemm_amx: C must be float or bf16 bits (std::uint16_t)");
  check_amx_size("gemm_amx", "m", m);
  check_amx_size("gemm_amx", "n", n);
  check_amx_size("gemm_amx", "k", k);
  if (b.k != k || b.n != n)
    throw std::invalid_argument("gemm_amx: packed B is " + std::to_string(b.k) + "x" +
                                std::to_string(b.n) + ", the product needs " + std::to_string(k) +
                                "x" + std::to_string(n));
  if (m == 0 || n == 0) return;
  if (c == nullptr) throw std::invalid_argument("gemm_amx: C is null");
  if (k > 0 && workspace == nullptr) throw std::invalid_argument("gemm_amx: workspace is null");
  if (k > 0 && b.data == nullptr) throw std::invalid_argument("gemm_amx: packed B is null");
  if (k > 0 && a == nullptr) throw std::invalid_argument("gemm_amx: A is null");
  if (k > 0 && lda < (trans_a ? m : k))
    throw std::invalid_argument(
        "gemm_amx: lda " + std::to_string(lda) + " is less than " +
        (trans_a ? "m = " + std::to_string(m) : "k = " + std::to_string(k)));
  if (ldc < n)
    throw std::invalid_argument("gemm_amx: ldc " + std::to_string(ldc) +
                                " is less than n = " + std::to_string(n));
}
}  // namespace detail

// C = ep(bf16(A).B) on AMX tiles (the portable loops where AMX is absent, or with
// amx_mode::portable), with any epilogue functor (gemm.hpp's no_epilogue explains the form); a
// [m, n] operand the epilogue reads may be named as `residual` so it is prefetched with C. C is
// f32 (float) or bf16 (bf16_bits), row-major with leading dimension ldc; A(i, p) is a[i*lda + p],
// or a[p*lda + i] when trans_a. `workspace` holds gemm_amx_workspace_elements(m, k) bf16 values,
// for any thread count. Rows of C are split across the pool's threads in 32-row blocks; results
// do not depend on the thread count.
template <class OutT, class Ep>
void gemm_amx_with(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
                   std::ptrdiff_t lda, bool trans_a, const packed_b_bf16& b, OutT* c,
                   std::ptrdiff_t ldc, const Ep& ep, bf16_bits* workspace,
                   thread_pool* pool = nullptr, amx_mode mode = amx_mode::automatic,
                   const float* residual = nullptr, std::ptrdiff_t ld_residual = 0) {
  detail::check_gemm_amx(m, n, k, a, lda, trans_a, b, c, ldc, workspace);
  if (m == 0 || n == 0) return;
  const bool tiles = mode == amx_mode::automatic && amx_available();
  if (k > 0) workspace = detail::align_64(workspace);
  detail::gemm_amx_run(m, n, k, a, lda, trans_a, b, c, ldc, ep, residual, ld_residual, workspace,
                       pool, tiles);
}

// C = act(scale * bf16(A).B + bias) + residual (gemm_epilogue), otherwise as gemm_amx_with.
template <class OutT>
void gemm_amx(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const float* a,
              std::ptrdiff_t lda, bool trans_a, const packed_b_bf16& b, OutT* c, std::ptrdiff_t ldc,
              const gemm_epilogue& ep, bf16_bits* workspace, thread_pool* pool = nullptr,
              amx_mode mode = amx_mode::automatic) {
  if (ep.residual != nullptr && ep.ld_residual < n && m > 0 && n > 0)
    throw std::invalid_argument("gemm_amx: residual leading dimension " +
                                std::to_string(ep.ld_residual) +
                                " is less than n = " + std::to_string(n));
  with_standard_epilogue(ep, [&](const auto& e) {
    gemm_amx_with(m, n, k, a, lda, trans_a, b, c, ldc, e, workspace, pool, mode, ep.residual,
                  ep.ld_residual);
  });
}

}  // namespace fusedsl::cpu::kernels
