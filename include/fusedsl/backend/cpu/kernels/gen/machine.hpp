#pragma once
// The register machine of the generated CPU kernels: a descriptor's code (plan/code.hpp), a
// compile-time value, unrolled over a range of its instructions into one straight-line body over
// xsimd batches (or one lane, a float), instantiated once per fusion group; loads and stores of
// every dtype at compile-time strides; the access lists and offsets the drivers (loop.hpp,
// reduce.hpp, row.hpp, epilogue.hpp beside this file) step through an iteration space.
#include <array>
#include <cstdint>
#include <limits>
#include <utility>

#include "fusedsl/backend/cpu/kernels/bf16.hpp"
#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/vec_math.hpp"
#include "fusedsl/core/dtype.hpp"
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
  } else if constexpr (T == dtype::i8) {
    return float(*static_cast<const std::int8_t*>(p));
  } else if constexpr (T == dtype::u8) {
    return float(*static_cast<const std::uint8_t*>(p));
  } else {
    static_assert(T == dtype::boolean, "element_to_f32: a dtype without a load");
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
  } else if constexpr (T == dtype::i8) {
    *static_cast<std::int8_t*>(p) = from_f32<std::int8_t>(x);
  } else if constexpr (T == dtype::u8) {
    *static_cast<std::uint8_t*>(p) = from_f32<std::uint8_t>(x);
  } else {
    static_assert(T == dtype::boolean, "element_from_f32: a dtype without a store");
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

// The carried value of dtype T: rounded (bf16, f16), truncated (i32), truncated and saturated
// with NaN as 0 (i8, u8: the value a store keeps), 0 or 1 (bool).
template <dtype T, class V>
V to_dtype(const V& x) {
  if constexpr (T == dtype::bf16) {
    return round_bf16(x);
  } else if constexpr (T == dtype::f16) {
    return round_f16(x);
  } else if constexpr (T == dtype::i32) {
    return vec_math::trunc(x);
  } else if constexpr (T == dtype::i8 || T == dtype::u8) {
    const V t =
        vec_math::min(vec_math::max(vec_math::trunc(x), V(integer_min(T))), V(integer_max(T)));
    return vec_math::select(vec_math::ne(x, x), V(0.0f), t);
  } else if constexpr (T == dtype::boolean) {
    return vec_math::ne(x, V(0.0f));
  } else {
    static_assert(T == dtype::f32, "to_dtype: a dtype without a rounding rule");
    return x;
  }
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
          return vec_math::trunc(y);  // (i8 and u8 truncate in to_dtype)
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

}  // namespace fusedsl::cpu::kernels::gen
