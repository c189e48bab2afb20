#pragma once
// Kernels generated from the lowering's descriptors (plan/lower.hpp). A descriptor's code (plan/
// code.hpp) is a compile-time value; `machine` unrolls a range of it into one straight-line body
// over xsimd batches (registers), instantiated once per fusion group, and the drivers below run
// that body over the group's iteration space:
//
//   run_loop        loop groups: per segment, the outer axes in rows, the last axis in vectors
//   run_reduce      reduce groups: vectors along the reduced axis (then across lanes) or along
//                   an output axis (each lane its own sum)
//   run_row         row groups: the prologue into a per-thread tile (or the operand in place),
//                   the row kernel (row.hpp), the epilogue on the way out
//   gemm_epilogue   a GEMM epilogue functor (gemm.hpp's form) over the output tile
//   score_mod       attention's score modifier (attention.hpp's form)
//
// A Desc type names its descriptor as `static constexpr const plan::kernel_desc& value` (and the
// program's node table as `nodes`). Values
// are carried in f32 registers; a load converts from the buffer's dtype, an op's result is
// rounded to its dtype (bf16, f16; integer division truncates), a store converts to the
// destination's. Integers are exact below 2^24.
// Every element is computed by one thread in a fixed order, so results do not depend on the
// thread count.
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "fusedsl/backend/cpu/kernels/bf16.hpp"
#include "fusedsl/backend/cpu/kernels/row.hpp"
#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/backend/cpu/kernels/vec_math.hpp"
#include "fusedsl/core/dtype.hpp"
#include "fusedsl/plan/loop_space.hpp"
#include "fusedsl/plan/lower.hpp"

namespace fusedsl::cpu::kernels::gen {

using plan::ins_kind;
using plan::kernel_desc;

// ---- lanes ----

template <class V>
inline constexpr int lanes_of = 1;
template <class A>
inline constexpr int lanes_of<xsimd::batch<float, A>> = int(xsimd::batch<float, A>::size);

template <class V>
V lane_index() {
  if constexpr (std::is_same_v<V, float>) {
    return 0.0f;
  } else {
    alignas(64) float t[lanes_of<V>];
    for (int l = 0; l < lanes_of<V>; ++l) t[l] = float(l);
    return V::load_aligned(t);
  }
}

// One element of dtype T as f32.
template <dtype T>
inline float element_to_f32(const void* p) {
  if constexpr (T == dtype::f32) {
    return *static_cast<const float*>(p);
  } else if constexpr (T == dtype::bf16) {
    return from_bf16(*static_cast<const std::uint16_t*>(p));
  } else if constexpr (T == dtype::f16) {
    return f16::to_float(*static_cast<const std::uint16_t*>(p));
  } else if constexpr (T == dtype::i32) {
    return float(*static_cast<const std::int32_t*>(p));
  } else {
    return *static_cast<const unsigned char*>(p) != 0 ? 1.0f : 0.0f;
  }
}

// f32 to an integer: toward zero, saturating, NaN to 0.
inline std::int32_t to_i32(float x) {
  if (!(x == x)) return 0;
  if (x >= 2147483520.0f) return std::numeric_limits<std::int32_t>::max();
  if (x <= -2147483648.0f) return std::numeric_limits<std::int32_t>::min();
  return std::int32_t(x);
}

template <dtype T>
inline void element_from_f32(void* p, float x) {
  if constexpr (T == dtype::f32) {
    *static_cast<float*>(p) = x;
  } else if constexpr (T == dtype::bf16) {
    *static_cast<std::uint16_t*>(p) = to_bf16(x);
  } else if constexpr (T == dtype::f16) {
    *static_cast<std::uint16_t*>(p) = f16::from_float(x);
  } else if constexpr (T == dtype::i32) {
    *static_cast<std::int32_t*>(p) = to_i32(x);
  } else {
    *static_cast<unsigned char*>(p) = x != 0.0f ? 1 : 0;
  }
}

template <dtype T>
inline constexpr std::int64_t element_bytes = size_of(T);

// Lanes of dtype T at element offsets off + l * S (S compile-time: 1 contiguous, 0 broadcast,
// 2 one half of interleaved pairs).
template <class V, dtype T, std::int64_t S>
[[gnu::always_inline]] inline V load_lanes(const void* base, std::int64_t off) {
  const char* p = static_cast<const char*>(base) + off * element_bytes<T>;
  if constexpr (std::is_same_v<V, float>) {
    return element_to_f32<T>(p);
  } else {
    constexpr int W = lanes_of<V>;
    if constexpr (S == 0) {
      return V(element_to_f32<T>(p));
    } else if constexpr (T == dtype::f32 && S == 1) {
      return V::load_unaligned(reinterpret_cast<const float*>(p));
    } else if constexpr (T == dtype::i32 && S == 1) {
      using I = xsimd::batch<std::int32_t, typename V::arch_type>;
      return xsimd::to_float(I::load_unaligned(reinterpret_cast<const std::int32_t*>(p)));
    } else {
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
      if constexpr (T == dtype::bf16 && S == 1 && W == 16)
        return V(from_bf16_x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
      if constexpr (T == dtype::f32 && S == 2 && W == 16) {  // p[0, 2, ..., 30]
        const float* f = reinterpret_cast<const float*>(p);
        const __m512i pick = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14,        // a's even lanes
                                               17, 19, 21, 23, 25, 27, 29, 31);  // b's odd lanes
        return V(_mm512_permutex2var_ps(_mm512_loadu_ps(f), pick, _mm512_loadu_ps(f + 15)));
      }
#endif
#if defined(__AVX2__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
      // Stride 2 (one of an interleaved pair): two loads that end at the last element read,
      // the even lanes of the first and the odd lanes of the second, in order.
      if constexpr (T == dtype::f32 && S == 2 && W == 8) {  // p[0, 2, ..., 14]
        const float* f = reinterpret_cast<const float*>(p);
        const __m256 e =
            _mm256_shuffle_ps(_mm256_loadu_ps(f), _mm256_loadu_ps(f + 7),
                              _MM_SHUFFLE(3, 1, 2, 0));  // p0 p2 p8 p10 | p4 p6 p12 p14
        return V(
            _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
      }
#endif
      alignas(64) float t[W];
      for (int l = 0; l < W; ++l) t[l] = element_to_f32<T>(p + l * S * element_bytes<T>);
      return V::load_aligned(t);
    }
  }
}

template <class V, dtype T, std::int64_t S>
[[gnu::always_inline]] inline void store_lanes(void* base, std::int64_t off, const V& v) {
  char* p = static_cast<char*>(base) + off * element_bytes<T>;
  if constexpr (std::is_same_v<V, float>) {
    element_from_f32<T>(p, v);
  } else {
    constexpr int W = lanes_of<V>;
    if constexpr (T == dtype::f32 && S == 1) {
      v.store_unaligned(reinterpret_cast<float*>(p));
    } else {
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
      if constexpr (T == dtype::bf16 && S == 1 && W == 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16_x16(v));
        return;
      }
#endif
      alignas(64) float t[W];
      v.store_aligned(t);
      for (int l = 0; l < W; ++l) element_from_f32<T>(p + l * S * element_bytes<T>, t[l]);
    }
  }
}

// x rounded to bf16 (round to nearest even), kept in f32.
inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }
template <class A>
xsimd::batch<float, A> round_bf16(const xsimd::batch<float, A>& x) {
  using I = xsimd::batch<std::int32_t, A>;
  const I u = xsimd::bitwise_cast<I>(x);
  const I r = (u + I(0x7fff) + ((u >> 16) & I(1))) & I(std::int32_t(0xffff0000u));
  return xsimd::select(xsimd::isnan(x), x, xsimd::bitwise_cast<xsimd::batch<float, A>>(r));
}
template <class V>
V round_f16(const V& x) {
  if constexpr (std::is_same_v<V, float>) {
    return f16::to_float(f16::from_float(x));
  } else {
    alignas(64) float t[lanes_of<V>];
    x.store_aligned(t);
    for (float& e : t) e = f16::to_float(f16::from_float(e));
    return V::load_aligned(t);
  }
}

// The carried value of dtype T: rounded (bf16, f16), truncated (i32), 0 or 1 (bool).
template <dtype T, class V>
V to_dtype(const V& x) {
  if constexpr (T == dtype::bf16)
    return round_bf16(x);
  else if constexpr (T == dtype::f16)
    return round_f16(x);
  else if constexpr (T == dtype::i32)
    return vec_math::trunc(x);
  else if constexpr (T == dtype::boolean)
    return vec_math::ne(x, V(0.0f));
  else
    return x;
}

// ---- the register machine ----

// The accesses a range of the code reads, and the store, as a compile-time list.
struct access_list {
  int n = 0;
  std::array<int, plan::max_accesses> at{};
};
constexpr access_list accesses_of(const kernel_desc& d, int begin, int end, int extra = -1) {
  access_list r;
  std::array<bool, plan::max_accesses> used{};
  for (int i = begin; i < end; ++i) {
    const plan::ins& in = d.c.instr[std::size_t(i)];
    if (in.kind == ins_kind::load || in.kind == ins_kind::iota || in.kind == ins_kind::gather)
      used[std::size_t(in.ref)] = true;
  }
  if (extra >= 0) used[std::size_t(extra)] = true;
  for (int a = 0; a < plan::max_accesses; ++a)
    if (used[std::size_t(a)]) r.at[std::size_t(r.n++)] = a;
  return r;
}

// Offsets (or iota values) of every access at a point, computed from scratch.
template <class Desc, const access_list& L>
[[gnu::always_inline]] inline void offsets_at(const std::int64_t* idx, int rank,
                                              std::int64_t* off) {
  constexpr const kernel_desc& D = Desc::value;
  for (int k = 0; k < L.n; ++k) {
    const plan::affine_row& a = D.c.acc[std::size_t(L.at[std::size_t(k)])].at;
    std::int64_t o = a.base;
    for (int t = 0; t < rank; ++t) o += a.coef[std::size_t(t)] * idx[t];
    off[L.at[std::size_t(k)]] = o;
  }
}
template <class Desc, const access_list& L>
[[gnu::always_inline]] inline void offsets_step(int axis, std::int64_t steps, std::int64_t* off) {
  constexpr const kernel_desc& D = Desc::value;
  for (int k = 0; k < L.n; ++k)
    off[L.at[std::size_t(k)]] +=
        D.c.acc[std::size_t(L.at[std::size_t(k)])].at.coef[std::size_t(axis)] * steps;
}

// Register r holds the same value in every lane when lanes run along iteration axis `lane`.
constexpr bool lane_uniform(const kernel_desc& d, int r, int lane) {
  if (lane < 0) return true;
  const plan::ins& x = d.c.instr[std::size_t(r)];
  switch (x.kind) {
    case ins_kind::input: return false;
    case ins_kind::constant: return true;
    case ins_kind::load:
    case ins_kind::iota: return d.c.acc[std::size_t(x.ref)].at.coef[std::size_t(lane)] == 0;
    case ins_kind::gather:
      return d.c.acc[std::size_t(x.ref)].at.coef[std::size_t(lane)] == 0 &&
             lane_uniform(d, x.arg[0], lane);
    case ins_kind::op:
      for (int k = 0; k < 3; ++k)
        if (x.arg[std::size_t(k)] >= 0 && !lane_uniform(d, x.arg[std::size_t(k)], lane))
          return false;
      return true;
  }
  return false;
}

template <class V>
float first_lane(const V& v) {
  if constexpr (std::is_same_v<V, float>) {
    return v;
  } else {
    alignas(64) float t[lanes_of<V>];
    v.store_aligned(t);
    return t[0];
  }
}

// Instructions [Begin, End) with lanes along iteration axis Lane (-1: one lane).
template <class Desc, int Lane>
struct machine {
  static constexpr const kernel_desc& D = Desc::value;

  template <int I, class V>
  [[gnu::always_inline]] static V gather(const V& index, void* const* val,
                                         const std::int64_t* off) {
    constexpr plan::ins x = D.c.instr[std::size_t(I)];
    constexpr plan::access a = D.c.acc[std::size_t(x.ref)];
    constexpr std::int64_t S = Lane >= 0 ? a.at.coef[std::size_t(Lane)] : 0;
    constexpr std::int64_t hi = a.dyn_max, step = a.dyn_stride;
    auto clamped = [](float i) {
      const std::int64_t k = i == i ? std::int64_t(i) : 0;
      return (k < 0 ? 0 : k > hi ? hi : k) * step;
    };
    if constexpr (std::is_same_v<V, float> || lane_uniform(D, x.arg[0], Lane)) {
      return load_lanes<V, a.type, S>(val[a.node], off[x.ref] + clamped(first_lane(index)));
    } else {  // a different row per lane
      constexpr int W = lanes_of<V>;
      alignas(64) float ix[W], t[W];
      index.store_aligned(ix);
      const char* base = static_cast<const char*>(val[a.node]);
      for (int l = 0; l < W; ++l)
        t[l] = element_to_f32<a.type>(base + (off[x.ref] + l * S + clamped(ix[l])) *
                                                 element_bytes<a.type>);
      return V::load_aligned(t);
    }
  }

  template <int I, int Begin, class V, std::size_t R>
  [[gnu::always_inline]] static V step(const std::array<V, R>& r, void* const* val,
                                       const std::int64_t* off, const V* in) {
    constexpr plan::ins x = D.c.instr[std::size_t(I)];
    if constexpr (x.kind == ins_kind::input) {
      return in[x.ref];
    } else if constexpr (x.kind == ins_kind::load) {
      constexpr plan::access a = D.c.acc[std::size_t(x.ref)];
      constexpr std::int64_t S = Lane >= 0 ? a.at.coef[std::size_t(Lane)] : 0;
      return load_lanes<V, a.type, S>(val[a.node], off[x.ref]);
    } else if constexpr (x.kind == ins_kind::gather) {
      return gather<I>(r[std::size_t(x.arg[0] - Begin)], val, off);
    } else if constexpr (x.kind == ins_kind::constant) {
      return V(float(D.c.constant[std::size_t(x.ref)]));
    } else if constexpr (x.kind == ins_kind::iota) {
      constexpr plan::access a = D.c.acc[std::size_t(x.ref)];
      constexpr std::int64_t S = Lane >= 0 ? a.at.coef[std::size_t(Lane)] : 0;
      if constexpr (S == 0 || std::is_same_v<V, float>)
        return V(float(off[x.ref]));
      else
        return V(float(off[x.ref])) + lane_index<V>() * V(float(S));
    } else {
      constexpr graph::op_kind K = x.op;
      using T = graph::op_traits<K>;
      constexpr int a0 = x.arg[0] - Begin, a1 = x.arg[1] - Begin, a2 = x.arg[2] - Begin;
      if constexpr (K == graph::op_kind::cast) {
        return to_dtype<x.type>(r[std::size_t(a0)]);
      } else if constexpr (graph::is_unary(K)) {
        return to_dtype<x.type>(T::template apply<vec_math>(r[std::size_t(a0)]));
      } else if constexpr (graph::is_binary(K)) {
        const V y = T::template apply<vec_math>(r[std::size_t(a0)], r[std::size_t(a1)]);
        if constexpr (x.type == dtype::i32 &&
                      (K == graph::op_kind::div || K == graph::op_kind::pow))
          return vec_math::trunc(y);
        else
          return to_dtype<x.type>(y);
      } else if constexpr (graph::is_compare(K)) {
        return T::template apply<vec_math>(r[std::size_t(a0)], r[std::size_t(a1)]);
      } else {
        static_assert(K == graph::op_kind::select,
                      "codegen: an op the register machine does not compute");
        return to_dtype<x.type>(T::template apply<vec_math>(r[std::size_t(a0)], r[std::size_t(a1)],
                                                            r[std::size_t(a2)]));
      }
    }
  }

  template <int Begin, int End, int Result, class V>
  [[gnu::always_inline]] static V run(void* const* val, const std::int64_t* off, const V* in) {
    if constexpr (End == Begin) {
      return in[0];  // an empty program passes its input through
    } else {
      std::array<V, std::size_t(End - Begin)> r;
      [&]<int... I>(std::integer_sequence<int, I...>) {
        ((r[std::size_t(I)] = step<Begin + I, Begin>(r, val, off, in)), ...);
      }(std::make_integer_sequence<int, End - Begin>{});
      return r[std::size_t(Result - Begin)];
    }
  }
};

constexpr bool range_is_heavy(const kernel_desc& d, int begin, int end) {
  for (int i = begin; i < end; ++i)
    if (d.c.instr[std::size_t(i)].kind == ins_kind::op &&
        is_transcendental(d.c.instr[std::size_t(i)].op))
      return true;
  return false;
}

// ---- loop groups ----

// Desc with loop segment S's iteration space simplified for Lanes-wide vectors (plan/
// loop_space.hpp: no axes of extent 1, contiguous axes merged, the vector axis chosen by the
// strides), or Desc itself where that changes nothing.
template <class Desc, int S, int Lanes>
struct simplified_loop {
  static constexpr kernel_desc value = plan::simplify_loop_segment(Desc::value, S, Lanes);
};
template <class Desc, int S, int Lanes>
using loop_space_t = std::conditional_t<plan::loop_segment_simplifies(Desc::value, S, Lanes),
                                        simplified_loop<Desc, S, Lanes>, Desc>;

template <class Desc, class Arch, int S>
struct loop_segment {
  using DS = loop_space_t<Desc, S, simd<Arch>::width>;
  static constexpr const kernel_desc& D = DS::value;
  static constexpr plan::segment seg = D.seg[std::size_t(S)];
  static constexpr int R = D.rank, L = R - 1;
  static constexpr access_list used = accesses_of(D, seg.begin, seg.end, D.store);
  static constexpr plan::access st = D.c.acc[std::size_t(D.store)];
  static constexpr std::int64_t inner =
      R > 0 ? seg.hi[std::size_t(R - 1)] - seg.lo[std::size_t(R - 1)] : 1;
  static constexpr std::int64_t outer = [] {
    std::int64_t o = 1;
    for (int t = 0; t < R - 1; ++t) o *= seg.hi[std::size_t(t)] - seg.lo[std::size_t(t)];
    return o;
  }();
  using M = machine<DS, L>;
  using V = vec_t<Arch>;
  static constexpr int W = simd<Arch>::width;

  // rows [r0, r1) of the outer axes, lanes [c0, c1) of the last
  static void rows(void* const* val, std::int64_t r0, std::int64_t r1, std::int64_t c0,
                   std::int64_t c1) {
    std::int64_t off[plan::max_accesses];
    std::int64_t idx[plan::max_iter_rank]{};
    void* out = val[st.node];
    constexpr std::int64_t ss = R > 0 ? st.at.coef[std::size_t(R - 1)] : 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t rest = r;
      for (int t = R - 2; t >= 0; --t) {
        const std::int64_t e = seg.hi[std::size_t(t)] - seg.lo[std::size_t(t)];
        idx[t] = seg.lo[std::size_t(t)] + rest % e;
        rest /= e;
      }
      if constexpr (R > 0) idx[R - 1] = seg.lo[std::size_t(R - 1)] + c0;
      offsets_at<DS, used>(idx, R, off);
      std::int64_t j = c0;
      if constexpr (R > 0) {
        for (; j + W <= c1; j += W) {
          const V v = M::template run<seg.begin, seg.end, seg.result, V>(val, off, nullptr);
          store_lanes<V, st.type, ss>(out, off[D.store], v);
          offsets_step<DS, used>(R - 1, W, off);
        }
      }
      for (int q = 0, tail = int(c1 - j); q < tail; ++q) {
        const float v = M::template run<seg.begin, seg.end, seg.result, float>(val, off, nullptr);
        store_lanes<float, st.type, ss>(out, off[D.store], v);
        if constexpr (R > 0) offsets_step<DS, used>(R - 1, 1, off);
      }
    }
  }

  static void run(void* const* val, thread_pool* pool) {
    const int threads = pool ? pool->size() : 1;
    if (outer >= threads || inner < 2 * W * threads) {
      parallel_for(pool, outer,
                   [&](std::ptrdiff_t b, std::ptrdiff_t e, int) { rows(val, b, e, 0, inner); });
    } else {  // few long rows: split the lanes, in whole vectors
      const std::int64_t chunks = (inner + W - 1) / W;
      parallel_for(pool, chunks, [&](std::ptrdiff_t b, std::ptrdiff_t e, int) {
        rows(val, 0, outer, b * W, std::min<std::int64_t>(inner, e * W));
      });
    }
  }
};

template <class Desc, class Arch>
void run_loop(void* const* val, thread_pool* pool) {
  [&]<int... S>(std::integer_sequence<int, S...>) {
    (loop_segment<Desc, Arch, S>::run(val, pool), ...);
  }(std::make_integer_sequence<int, Desc::value.n_seg>{});
}

// ---- reduce groups ----

// Desc with its reduce space simplified (plan/loop_space.hpp), or Desc itself where that changes
// nothing.
template <class Desc>
struct simplified_reduce {
  static constexpr kernel_desc value = plan::simplify_reduce(Desc::value);
};
template <class Desc>
using reduce_space_t =
    std::conditional_t<plan::reduce_simplifies(Desc::value), simplified_reduce<Desc>, Desc>;

template <class Desc, class Arch>
struct reduce_kernel {
  using DS = reduce_space_t<Desc>;
  static constexpr const kernel_desc& D = DS::value;
  static constexpr plan::segment seg = D.seg[0];
  static constexpr int R = D.rank, L = R - 1;
  static constexpr int rf = D.reduce_first, rc = D.reduce_count;
  static constexpr bool lane_reduced = L >= rf && L < rf + rc;
  static constexpr access_list used_pro = accesses_of(D, seg.begin, seg.end);
  static constexpr access_list used_epi = accesses_of(D, D.epilogue.begin, D.epilogue.end, D.store);
  static constexpr plan::access st = D.c.acc[std::size_t(D.store)];
  static constexpr graph::op_kind K = D.reduce_op;
  using T = graph::op_traits<K>;
  using M = machine<DS, L>;
  using V = vec_t<Arch>;
  static constexpr int W = simd<Arch>::width;
  static constexpr bool is_reduced(int t) { return t >= rf && t < rf + rc; }
  // output axes (not reduced), without the lane axis when lanes run along an output axis
  static constexpr std::int64_t out_points = [] {
    std::int64_t o = 1;
    for (int t = 0; t < R; ++t)
      if (!is_reduced(t) && (lane_reduced || t != L)) o *= D.extent[std::size_t(t)];
    return o;
  }();
  static constexpr std::int64_t red_points = [] {  // reduced points, without the lane axis
    std::int64_t o = 1;
    for (int t = rf; t < rf + rc; ++t)
      if (!lane_reduced || t != L) o *= D.extent[std::size_t(t)];
    return o;
  }();

  // Decompose `flat` over the axes selected by `pick` into idx (others untouched).
  template <class Pick>
  static void decompose(std::int64_t flat, std::int64_t* idx, Pick pick) {
    for (int t = R - 1; t >= 0; --t)
      if (pick(t)) {
        idx[t] = flat % D.extent[std::size_t(t)];
        flat /= D.extent[std::size_t(t)];
      }
  }

  // The position along the reduced axis of the point idx (its reduced iteration axes as digits).
  static std::int64_t position(const std::int64_t* idx) {
    std::int64_t p = 0;
    for (int t = rf; t < rf + rc; ++t) p = p * D.extent[std::size_t(t)] + idx[t];
    return p;
  }
  static constexpr std::int64_t lane_step() {  // positions one lane-axis step covers
    std::int64_t s = 1;
    for (int t = L + 1; t < rf + rc; ++t) s *= D.extent[std::size_t(t)];
    return s;
  }

  // The reduction of one accumulator state: acc (and, for argmax, the position of the best).
  template <class VV>
  struct state {
    VV acc = start();
    static VV start() {
      if constexpr (K == graph::op_kind::argmax)
        return VV(-std::numeric_limits<float>::infinity());
      else
        return T::template identity<vec_math, VV>();
    }
    VV pos = VV(-1.0f);
    void add(const VV& x, const VV& at) {
      if constexpr (K == graph::op_kind::argmax) {
        const VV take = T::template take<vec_math>(x, acc);
        acc = vec_math::select(take, x, acc);
        pos = vec_math::select(take, at, pos);
      } else {
        (void)at;
        acc = T::template combine<vec_math>(acc, x);
      }
    }
    VV result() const {
      if constexpr (K == graph::op_kind::argmax)
        return vmax0(pos);
      else
        return T::template finish<vec_math>(acc, D.reduce_length);
    }
    static VV vmax0(const VV& p) { return vec_math::max(p, VV(0.0f)); }  // an all -inf row: index 0
  };

  static void points(void* const* val, std::int64_t p0, std::int64_t p1) {
    std::int64_t off[plan::max_accesses];
    std::int64_t idx[plan::max_iter_rank]{};
    void* out = val[st.node];
    constexpr std::int64_t ss = st.at.coef[std::size_t(L)];
    for (std::int64_t p = p0; p < p1; ++p) {
      decompose(p, idx, [](int t) { return !is_reduced(t) && (lane_reduced || t != L); });
      if constexpr (lane_reduced) {
        state<V> vs;
        state<float> tail;
        const std::int64_t n = D.extent[std::size_t(L)];
        const V lane_pos = lane_index<V>() * V(float(lane_step()));
        for (std::int64_t q = 0; q < red_points; ++q) {
          decompose(q, idx, [](int t) { return is_reduced(t) && t != L; });
          idx[L] = 0;
          offsets_at<DS, used_pro>(idx, R, off);
          std::int64_t j = 0;
          for (; j + W <= n; j += W) {
            idx[L] = j;
            const V at = V(float(position(idx))) + lane_pos;
            vs.add(M::template run<seg.begin, seg.end, seg.result, V>(val, off, nullptr), at);
            offsets_step<DS, used_pro>(L, W, off);
          }
          for (int q2 = 0, left = int(n - j); q2 < left; ++q2, ++j) {
            idx[L] = j;
            tail.add(M::template run<seg.begin, seg.end, seg.result, float>(val, off, nullptr),
                     float(position(idx)));
            offsets_step<DS, used_pro>(L, 1, off);
          }
        }
        // Across the lanes, in lane order, then the tail: the same order on every run.
        alignas(64) float acc_l[W], pos_l[W];
        if constexpr (W == 1) {
          acc_l[0] = vs.acc, pos_l[0] = vs.pos;
        } else {
          vs.acc.store_aligned(acc_l);
          vs.pos.store_aligned(pos_l);
        }
        state<float> h;
        if constexpr (K == graph::op_kind::argmax) {
          // the first position among the lanes' bests: lanes hold interleaved positions
          for (int l = 0; l < W; ++l) {
            const float x = acc_l[l], at = pos_l[l];
            if (at < 0.0f) continue;
            const bool better = T::template take<vec_math>(x, h.acc) != 0.0f;
            const bool tie = x == h.acc || (x != x && h.acc != h.acc);
            if (h.pos < 0.0f || better || (tie && at < h.pos)) h.acc = x, h.pos = at;
          }
          if (tail.pos >= 0.0f) {
            const bool better = T::template take<vec_math>(tail.acc, h.acc) != 0.0f;
            const bool tie = tail.acc == h.acc || (tail.acc != tail.acc && h.acc != h.acc);
            if (h.pos < 0.0f || better || (tie && tail.pos < h.pos))
              h.acc = tail.acc, h.pos = tail.pos;
          }
        } else {
          for (int l = 0; l < W; ++l) h.acc = T::template combine<vec_math>(h.acc, acc_l[l]);
          h.acc = T::template combine<vec_math>(h.acc, tail.acc);
        }
        const float r = h.result();
        for (int t = rf; t < rf + rc; ++t) idx[t] = 0;
        offsets_at<DS, used_epi>(idx, R, off);
        const float y = M::template run<D.epilogue.begin, D.epilogue.end, D.epilogue.result, float>(
            val, off, &r);
        store_lanes<float, st.type, 0>(out, off[D.store], y);
      } else {
        constexpr std::int64_t n = D.extent[std::size_t(L)];
        auto lanes = [&]<class VV>(std::int64_t j0) {
          state<VV> acc;
          for (std::int64_t q = 0; q < red_points; ++q) {
            decompose(q, idx, [](int t) { return is_reduced(t); });
            idx[L] = j0;
            offsets_at<DS, used_pro>(idx, R, off);
            acc.add(M::template run<seg.begin, seg.end, seg.result, VV>(val, off, nullptr),
                    VV(float(position(idx))));
          }
          const VV r = acc.result();
          for (int t = rf; t < rf + rc; ++t) idx[t] = 0;
          offsets_at<DS, used_epi>(idx, R, off);
          const VV y = M::template run<D.epilogue.begin, D.epilogue.end, D.epilogue.result, VV>(
              val, off, &r);
          store_lanes<VV, st.type, ss>(out, off[D.store], y);
        };
        std::int64_t j = 0;
        for (; j + W <= n; j += W) lanes.template operator()<V>(j);
        if constexpr (n % W != 0)  // no tail loop when the lanes fill the axis
          for (; j < n; ++j) lanes.template operator()<float>(j);
      }
    }
  }

  static void run(void* const* val, thread_pool* pool) {
    parallel_for(pool, out_points,
                 [&](std::ptrdiff_t b, std::ptrdiff_t e, int) { points(val, b, e); });
  }
};

template <class Desc, class Arch>
void run_reduce(void* const* val, thread_pool* pool) {
  reduce_kernel<Desc, Arch>::run(val, pool);
}

// ---- row groups ----

template <class Desc, class Arch>
struct row_kernel {
  static constexpr const kernel_desc& D = Desc::value;
  static constexpr plan::segment seg = D.seg[0];
  static constexpr int R = D.rank, L = R - 1;
  static constexpr std::int64_t cols = D.extent[std::size_t(L)];
  static constexpr std::int64_t rows_total = [] {
    std::int64_t o = 1;
    for (int t = 0; t < R - 1; ++t) o *= D.extent[std::size_t(t)];
    return o;
  }();
  static constexpr access_list used_pro = accesses_of(D, seg.begin, seg.end);
  static constexpr access_list used_epi = accesses_of(D, D.epilogue.begin, D.epilogue.end, D.store);
  static constexpr plan::access st = D.c.acc[std::size_t(D.store)];
  using M = machine<Desc, L>;
  using V = vec_t<Arch>;
  static constexpr int W = simd<Arch>::width;

  // Rows are one outer axis apart by a fixed stride (the outer axes collapse) for access a.
  static constexpr bool uniform_rows(const plan::affine_row& a) {
    std::int64_t expect = a.coef[std::size_t(R > 1 ? R - 2 : 0)];
    for (int t = R - 2; t >= 0; --t) {
      if (a.coef[std::size_t(t)] != expect && D.extent[std::size_t(t)] != 1) return false;
      expect *= D.extent[std::size_t(t)];
    }
    return true;
  }
  static constexpr bool param_ok(int ref) {
    if (ref < 0) return true;
    const plan::access& a = D.c.acc[std::size_t(ref)];
    if (a.type != dtype::f32 || a.at.coef[std::size_t(L)] != 1) return false;
    for (int t = 0; t < R - 1; ++t)
      if (a.at.coef[std::size_t(t)] != 0) return false;
    return true;
  }
  // The input is one f32 load, contiguous along the row, rows a fixed stride apart.
  static constexpr bool direct_in = [] {
    if (seg.end - seg.begin != 1) return false;
    const plan::ins& x = D.c.instr[std::size_t(seg.begin)];
    if (x.kind != ins_kind::load) return false;
    const plan::access& a = D.c.acc[std::size_t(x.ref)];
    return a.type == dtype::f32 && a.at.coef[std::size_t(L)] == 1 && uniform_rows(a.at);
  }();
  static constexpr bool direct_out = st.type == dtype::f32 && st.at.coef[std::size_t(L)] == 1 &&
                                     uniform_rows(st.at) && D.epilogue.empty();
  static constexpr bool params_ok = param_ok(D.gamma) && param_ok(D.beta);
  static constexpr std::int64_t row_stride(const plan::affine_row& a) {
    return R > 1 ? a.coef[std::size_t(R - 2)] : cols;
  }
  // rows per block: what layernorm's row groups take, within ~64 KiB of tile
  static constexpr std::int64_t block = cols <= 256 ? 8 : cols <= 512 ? 4 : cols <= 4096 ? 2 : 1;

  static constexpr std::size_t tile_floats() { return std::size_t(block * (cols + 16)); }

  static const float* param(void* const* val, int ref) {
    if (ref < 0) return nullptr;
    const plan::access& a = D.c.acc[std::size_t(ref)];
    return static_cast<const float*>(val[a.node]) + a.at.base;
  }

  static void row_op(std::int64_t n, const float* x, std::int64_t ldx, const float* gamma,
                     const float* beta, float* y, std::int64_t ldy) {
    if constexpr (D.row_op == graph::op_kind::softmax)
      softmax_rows<Arch>(n, cols, x, ldx, y, ldy);
    else if constexpr (D.row_op == graph::op_kind::log_softmax)
      log_softmax_rows<Arch>(n, cols, x, ldx, y, ldy);
    else if constexpr (D.row_op == graph::op_kind::layernorm)
      layernorm_rows<Arch>(n, cols, x, ldx, gamma, beta, D.eps, y, ldy);
    else
      rmsnorm_rows<Arch>(n, cols, x, ldx, gamma, D.eps, y, ldy);
  }

  static void index_of_row(std::int64_t r, std::int64_t* idx) {
    for (int t = R - 2; t >= 0; --t) {
      idx[t] = r % D.extent[std::size_t(t)];
      r /= D.extent[std::size_t(t)];
    }
    idx[L] = 0;
  }

  // rows [r0, r1); tile: this thread's tile_floats() floats (unused on the direct path)
  static void rows(void* const* val, std::int64_t r0, std::int64_t r1, float* tile, float* gtile) {
    std::int64_t off[plan::max_accesses];
    std::int64_t idx[plan::max_iter_rank]{};
    const float *gamma = param(val, D.gamma), *beta = param(val, D.beta);
    if constexpr (!params_ok) {  // gamma, beta through their loads, into the tile's tail
      float* g = gtile;
      index_of_row(0, idx);
      for (const int ref : {D.gamma, D.beta}) {
        if (ref < 0) continue;
        const plan::access& a = D.c.acc[std::size_t(ref)];
        for (std::int64_t j = 0; j < cols; ++j) {
          std::int64_t o = a.at.base + a.at.coef[std::size_t(L)] * j;
          g[j] = visit_load(a.type, val[a.node], o);
        }
        (ref == D.gamma ? gamma : beta) = g;
        g += cols;
      }
    }
    if constexpr (direct_in && direct_out) {
      const plan::access& a = D.c.acc[std::size_t(D.c.instr[std::size_t(seg.begin)].ref)];
      index_of_row(r0, idx);
      std::int64_t xo = a.at.base, yo = st.at.base;
      for (int t = 0; t < R - 1; ++t)
        xo += a.at.coef[std::size_t(t)] * idx[t], yo += st.at.coef[std::size_t(t)] * idx[t];
      row_op(r1 - r0, static_cast<const float*>(val[a.node]) + xo, row_stride(a.at), gamma, beta,
             static_cast<float*>(val[st.node]) + yo, row_stride(st.at));
      return;
    }
    for (std::int64_t b = r0; b < r1; b += block) {
      const std::int64_t n = std::min<std::int64_t>(block, r1 - b);
      const float* x = tile;
      std::int64_t ldx = cols + 16;
      if constexpr (direct_in) {
        const plan::access& a = D.c.acc[std::size_t(D.c.instr[std::size_t(seg.begin)].ref)];
        index_of_row(b, idx);
        std::int64_t xo = a.at.base;
        for (int t = 0; t < R - 1; ++t) xo += a.at.coef[std::size_t(t)] * idx[t];
        x = static_cast<const float*>(val[a.node]) + xo;
        ldx = row_stride(a.at);
      } else {
        for (std::int64_t i = 0; i < n; ++i) {  // the prologue, row by row into the tile
          index_of_row(b + i, idx);
          offsets_at<Desc, used_pro>(idx, R, off);
          float* tr = tile + i * (cols + 16);
          // Both bounds are constants (GCC otherwise cannot bound a tail that never runs).
          constexpr std::int64_t vec_end = cols - cols % W;
          for (std::int64_t j = 0; j < vec_end; j += W) {
            simd<Arch>::store(
                tr + j, M::template run<seg.begin, seg.end, seg.result, V>(val, off, nullptr));
            offsets_step<Desc, used_pro>(L, W, off);
          }
          for (std::int64_t j = vec_end; j < cols; ++j) {
            tr[j] = M::template run<seg.begin, seg.end, seg.result, float>(val, off, nullptr);
            offsets_step<Desc, used_pro>(L, 1, off);
          }
        }
      }
      row_op(n, x, ldx, gamma, beta, tile, cols + 16);
      for (std::int64_t i = 0; i < n; ++i) {  // the epilogue and the store
        index_of_row(b + i, idx);
        offsets_at<Desc, used_epi>(idx, R, off);
        const float* tr = tile + i * (cols + 16);
        constexpr std::int64_t ss = st.at.coef[std::size_t(L)];
        constexpr std::int64_t vec_end = cols - cols % W;
        for (std::int64_t j = 0; j < vec_end; j += W) {
          const V in = simd<Arch>::load(tr + j);
          const V y = M::template run<D.epilogue.begin, D.epilogue.end, D.epilogue.result, V>(
              val, off, &in);
          store_lanes<V, st.type, ss>(val[st.node], off[D.store], y);
          offsets_step<Desc, used_epi>(L, W, off);
        }
        for (std::int64_t j = vec_end; j < cols; ++j) {
          const float in = tr[j];
          const float y =
              M::template run<D.epilogue.begin, D.epilogue.end, D.epilogue.result, float>(val, off,
                                                                                          &in);
          store_lanes<float, st.type, ss>(val[st.node], off[D.store], y);
          offsets_step<Desc, used_epi>(L, 1, off);
        }
      }
    }
  }

  static float visit_load(dtype t, const void* p, std::int64_t o) {
    switch (t) {
      case dtype::f32: return element_to_f32<dtype::f32>(static_cast<const float*>(p) + o);
      case dtype::bf16:
        return element_to_f32<dtype::bf16>(static_cast<const std::uint16_t*>(p) + o);
      case dtype::f16: return element_to_f32<dtype::f16>(static_cast<const std::uint16_t*>(p) + o);
      case dtype::i32: return element_to_f32<dtype::i32>(static_cast<const std::int32_t*>(p) + o);
      case dtype::boolean:
        return element_to_f32<dtype::boolean>(static_cast<const unsigned char*>(p) + o);
    }
    return 0.0f;
  }

  // Floats of workspace per thread.
  static constexpr std::size_t workspace_floats() {
    return tile_floats() + std::size_t(2 * cols + 16);
  }

  static void run(void* const* val, float* workspace, thread_pool* pool) {
    parallel_for(pool, rows_total, [&](std::ptrdiff_t b, std::ptrdiff_t e, int t) {
      float* tile = workspace + std::size_t(t) * workspace_floats();
      rows(val, b, e, tile, tile + tile_floats());
    });
  }
};

template <class Desc, class Arch>
void run_row(void* const* val, float* workspace, thread_pool* pool) {
  row_kernel<Desc, Arch>::run(val, workspace, pool);
}

// ---- dynamic update slices ----

// result = x with update at [start, start + len) along the axis; x is copied only when the result
// does not take its buffer.
template <class Desc>
void run_update(void* const* val) {
  static constexpr const kernel_desc& D = Desc::value;
  const auto& nodes = Desc::nodes;  // the program's node table
  const graph::node &x = nodes[std::size_t(D.update_x)], &u = nodes[std::size_t(D.update_value)];
  const std::size_t es = std::size_t(size_of(x.type));
  char* out = static_cast<char*>(val[D.root]);
  const char* src = static_cast<const char*>(val[D.update_x]);
  if (out != src) std::memcpy(out, src, std::size_t(x.shape.size()) * es);
  std::int64_t start = D.start_constant;
  if (!D.start_is_constant)
    start = std::int64_t(*static_cast<const std::int32_t*>(val[D.update_start]));
  const int axis = D.update_axis;
  const std::int64_t len = u.shape[axis];
  start = start < 0 ? 0 : start > x.shape[axis] - len ? x.shape[axis] - len : start;
  std::int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape[i];
  const std::int64_t chunk = len * u.shape.stride(axis), row = x.shape[axis] * x.shape.stride(axis);
  const char* up = static_cast<const char*>(val[D.update_value]);
  for (std::int64_t p = 0; p < outer; ++p)
    std::memcpy(out + std::size_t(p * row + start * x.shape.stride(axis)) * es,
                up + std::size_t(p * chunk) * es, std::size_t(chunk) * es);
}

// ---- GEMM epilogues ----

// The epilogue program of part P of a gemm descriptor at output element (row i of a call whose
// batch index is `batch`, column j), with input registers `in` (the accumulator, and a pair's).
template <class Desc, int P>
struct gemm_epilogue_program {
  static constexpr const kernel_desc& D = Desc::value;
  static constexpr plan::gemm_part part = D.gemm[std::size_t(P)];
  static constexpr int R = part.batch_rank + 2;
  static constexpr access_list used = accesses_of(D, part.epilogue.begin, part.epilogue.end);
  static constexpr bool heavy = range_is_heavy(D, part.epilogue.begin, part.epilogue.end);
  using M = machine<Desc, R - 1>;

  template <class V>
  [[gnu::always_inline]] static V run(void* const* val, std::int64_t batch, std::ptrdiff_t i,
                                      std::ptrdiff_t j, const V* in) {
    std::int64_t idx[plan::max_iter_rank]{};
    std::int64_t b = batch, row = i;
    if constexpr (part.folded) {
      b = i / part.rows_per_batch;
      row = i % part.rows_per_batch;
    }
    for (int t = R - 3; t >= 0; --t) {
      idx[t] = b % part.batch[t];
      b /= part.batch[t];
    }
    idx[R - 2] = row;
    idx[R - 1] = j;
    std::int64_t off[plan::max_accesses];
    offsets_at<Desc, used>(idx, R, off);
    return M::template run<part.epilogue.begin, part.epilogue.end, part.epilogue.result, V>(
        val, off, in);
  }
};

// The epilogue of part P of a gemm descriptor, as gemm.hpp's functor: the value at output element
// (row i of this call, column j), from the accumulator and the epilogue program's loads.
template <class Desc, int P>
struct gemm_epilogue {
  using E = gemm_epilogue_program<Desc, P>;
  static constexpr bool heavy = E::heavy;
  static constexpr bool identity = E::part.epilogue.empty();

  void* const* val;
  std::int64_t batch = 0;  // the batch index of this call (unfolded parts)

  template <class V>
  [[gnu::always_inline]] V operator()(const V& acc, std::ptrdiff_t i, std::ptrdiff_t j) const {
    if constexpr (identity)
      return acc;
    else
      return E::template run<V>(val, batch, i, j, &acc);
  }
};

// Desc with part P's load of its pair's product (plan::gemm_part::pair_access) read from input
// register 1 instead: the second accumulator of a GEMM pair.
template <class Desc, int P>
struct pair_desc {
  static constexpr kernel_desc value = [] {
    kernel_desc d = Desc::value;
    const plan::gemm_part& p = d.gemm[std::size_t(P)];
    for (int i = p.epilogue.begin; i < p.epilogue.end; ++i) {
      plan::ins& x = d.c.instr[std::size_t(i)];
      if (x.kind == ins_kind::load && x.ref == p.pair_access) {
        x.kind = ins_kind::input;
        x.ref = 1;
      }
    }
    return d;
  }();
  static constexpr const auto& nodes = Desc::nodes;
};

// The epilogue of part P run as a GEMM pair (gemm.hpp's gemm_pair_with): the part's sum and its
// pair's sum at the same element as input registers 0 and 1. A pair has no batch loop (its batch,
// if any, is folded into the rows: plan::detail::pairs_with).
template <class Desc, int P>
struct gemm_pair_epilogue {
  static_assert(Desc::value.gemm[std::size_t(P)].pair >= 0,
                "gemm_pair_epilogue: a part without a pair");
  using E = gemm_epilogue_program<pair_desc<Desc, P>, P>;
  static constexpr bool heavy = E::heavy;
  static constexpr bool paired = true;

  void* const* val;

  template <class V>
  [[gnu::always_inline]] V operator()(const V& acc, const V& acc2, std::ptrdiff_t i,
                                      std::ptrdiff_t j) const {
    const V in[2] = {acc, acc2};
    return E::template run<V>(val, 0, i, j, in);
  }
};

// ---- attention score programs ----

// att.score as attention.hpp's score modifier: base-2 scores in, base-2 scores out; the program
// sees natural units (scale q.k) and its result is converted back, finite where it is finite.
template <class Desc, class Arch>
struct score_mod {
  static constexpr const kernel_desc& D = Desc::value;
  static constexpr plan::attention_part att = D.att;
  static constexpr int R = att.batch_rank + 4, TQ = R - 2, TK = R - 1;
  static constexpr access_list used = accesses_of(D, att.score.begin, att.score.end);
  static constexpr bool active = !att.score.empty();
  static constexpr std::int64_t group = att.heads / att.kv_heads;
  using V = vec_t<Arch>;
  static constexpr int W = simd<Arch>::width;

  void* const* val;
  std::int64_t batch = 0;

  template <int Lane, class VV>
  [[gnu::always_inline]] static VV apply(void* const* val, const std::int64_t* off, const VV& s2) {
    const VV s = s2 * VV(float(1.0 / log2e));
    const VV t =
        machine<Desc, Lane>::template run<att.score.begin, att.score.end, att.score.result, VV>(
            val, off, &s);
    const VV t2 = t * VV(float(log2e));
    // -FLT_MAX and other finite masks stay finite in base 2 (see attention.hpp's mask_in_base2).
    const VV big(std::numeric_limits<float>::max());
    return where((absolute(t2) == VV(std::numeric_limits<float>::infinity())) &
                     (absolute(t) < VV(std::numeric_limits<float>::infinity())),
                 where(t2 < VV(0.0f), -big, big), t2);
  }

  void point(std::int64_t h, std::int64_t i, std::int64_t j, std::int64_t* idx) const {
    std::int64_t b = batch;
    for (int t = R - 5; t >= 0; --t) {
      idx[t] = b % att.batch[t];
      b /= att.batch[t];
    }
    idx[R - 4] = h / group;
    idx[R - 3] = h % group;
    idx[TQ] = i;
    idx[TK] = j;
  }

  void keys_by_queries(std::ptrdiff_t h, std::ptrdiff_t q0, std::ptrdiff_t bq, std::ptrdiff_t k0,
                       std::ptrdiff_t bk, float* st, std::ptrdiff_t ld) const {
    std::int64_t idx[plan::max_iter_rank]{};
    std::int64_t off[plan::max_accesses];
    for (std::ptrdiff_t r = 0; r < bk; ++r) {
      point(h, q0, k0 + r, idx);
      offsets_at<Desc, used>(idx, R, off);
      float* row = st + r * ld;
      std::ptrdiff_t j = 0;
      for (; j + W <= bq; j += W) {
        simd<Arch>::store(row + j, apply<TQ>(val, off, simd<Arch>::load(row + j)));
        offsets_step<Desc, used>(TQ, W, off);
      }
      for (int q = 0, tail = int(bq - j); q < tail; ++q, ++j) {
        row[j] = apply<TQ>(val, off, row[j]);
        offsets_step<Desc, used>(TQ, 1, off);
      }
    }
  }

  template <class Visible>
  void queries_by_keys(std::ptrdiff_t h, std::ptrdiff_t q0, std::ptrdiff_t rows, float* sc,
                       std::ptrdiff_t ld, const Visible& visible) const {
    std::int64_t idx[plan::max_iter_rank]{};
    std::int64_t off[plan::max_accesses];
    for (std::ptrdiff_t i = 0; i < rows; ++i) {
      point(h, q0 + i, 0, idx);
      offsets_at<Desc, used>(idx, R, off);
      float* row = sc + i * ld;
      const std::ptrdiff_t vis = visible(i);
      std::ptrdiff_t j = 0;
      for (; j + W <= vis; j += W) {
        simd<Arch>::store(row + j, apply<TK>(val, off, simd<Arch>::load(row + j)));
        offsets_step<Desc, used>(TK, W, off);
      }
      for (int q = 0, tail = int(vis - j); q < tail; ++q, ++j) {
        row[j] = apply<TK>(val, off, row[j]);
        offsets_step<Desc, used>(TK, 1, off);
      }
    }
  }
};

}  // namespace fusedsl::cpu::kernels::gen
