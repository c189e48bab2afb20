#pragma once
// Element types. bf16 and f16 are storage types: arithmetic happens in f32 and results are
// rounded back with round-to-nearest-even (IEEE 754-2008, 4.3.1). The integer types (i32, i8, u8)
// are carried as f32 values too (exact below 2^24) and rounded to their type toward zero,
// saturating at its range, NaN to 0. i8 and u8 were added after bool, so the older values keep
// their numbers.
#include <bit>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "fusedsl/core/config.hpp"

namespace fusedsl {

enum class dtype : std::uint8_t { f32, bf16, f16, i32, boolean, i8, u8 };

constexpr std::string_view name_of(dtype t) {
  switch (t) {
    case dtype::f32: return "f32";
    case dtype::bf16: return "bf16";
    case dtype::f16: return "f16";
    case dtype::i32: return "i32";
    case dtype::boolean: return "pred";
    case dtype::i8:
      return "i8";
    case dtype::u8:
      return "u8";
  }
  return "?";
}

constexpr int size_of(dtype t) {
  switch (t) {
    case dtype::f32: case dtype::i32: return 4;
    case dtype::bf16: case dtype::f16: return 2;
    case dtype::boolean:
    case dtype::i8:
    case dtype::u8:
      return 1;
  }
  return 0;
}

constexpr bool is_integer(dtype t) {
  return t == dtype::i32 || t == dtype::i8 || t == dtype::u8;
}

// The range of an integer dtype, as the f32 values it saturates to.
constexpr float integer_min(dtype t) {
  return t == dtype::i8 ? -128.0f : t == dtype::u8 ? 0.0f : -2147483648.0f;
}
constexpr float integer_max(dtype t) {
  return t == dtype::i8 ? 127.0f : t == dtype::u8 ? 255.0f : 2147483520.0f;  // i32: below 2^31
}

constexpr bool is_floating(dtype t) {
  return t == dtype::f32 || t == dtype::bf16 || t == dtype::f16;
}

// bfloat16: the upper 16 bits of an IEEE binary32.
struct bf16 {
  std::uint16_t bits = 0;

  constexpr bf16() = default;
  constexpr explicit bf16(float f) : bits(from_float(f)) {}
  constexpr explicit operator float() const {
    return std::bit_cast<float>(std::uint32_t(bits) << 16);
  }
  static constexpr bf16 from_bits(std::uint16_t b) { bf16 r; r.bits = b; return r; }

  static constexpr std::uint16_t from_float(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    return std::uint16_t(u >> 16);
  }
  friend constexpr bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
};

// IEEE binary16.
struct f16 {
  std::uint16_t bits = 0;

  constexpr f16() = default;
  constexpr explicit f16(float f) : bits(from_float(f)) {}
  constexpr explicit operator float() const { return to_float(bits); }
  static constexpr f16 from_bits(std::uint16_t b) { f16 r; r.bits = b; return r; }

  static constexpr std::uint16_t from_float(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return std::uint16_t(sign | 0x7e00u);           // NaN
    if (a >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);          // overflow -> inf
    if (a < 0x38800000u) {                                               // subnormal or zero
      if (a < 0x33000000u) return std::uint16_t(sign);  // below half the min subnormal
      const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
      const int shift = 126 - int(a >> 23);                              // 14..24
      const std::uint32_t h = m >> shift;
      const std::uint32_t rem = m & ((1u << shift) - 1u);
      const std::uint32_t half = 1u << (shift - 1);
      const std::uint32_t r = h + ((rem > half || (rem == half && (h & 1u))) ? 1u : 0u);
      return std::uint16_t(sign | r);
    }
    std::uint32_t r = a - 0x38000000u;                                   // rebias 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);                                      // RNE on 13 dropped bits
    return std::uint16_t(sign | (r >> 13));
  }
  static constexpr float to_float(std::uint16_t h) {
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
      if (m == 0) return std::bit_cast<float>(sign);
      const float v = float(m) * (1.0f / 16777216.0f);  // m * 2^-24
      return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  }
  friend constexpr bool operator==(f16 a, f16 b) { return a.bits == b.bits; }
};

template <class T> struct dtype_of_t;
template <> struct dtype_of_t<float> { static constexpr dtype value = dtype::f32; };
template <> struct dtype_of_t<bf16> { static constexpr dtype value = dtype::bf16; };
template <> struct dtype_of_t<f16> { static constexpr dtype value = dtype::f16; };
template <> struct dtype_of_t<std::int32_t> { static constexpr dtype value = dtype::i32; };
template <> struct dtype_of_t<bool> { static constexpr dtype value = dtype::boolean; };
template <>
struct dtype_of_t<std::int8_t> {
  static constexpr dtype value = dtype::i8;
};
template <>
struct dtype_of_t<std::uint8_t> {
  static constexpr dtype value = dtype::u8;
};

template <class T>
concept element = requires { dtype_of_t<T>::value; };

template <element T>
inline constexpr dtype dtype_of = dtype_of_t<T>::value;

template <dtype D> struct storage_of;
template <> struct storage_of<dtype::f32> { using type = float; };
template <> struct storage_of<dtype::bf16> { using type = bf16; };
template <> struct storage_of<dtype::f16> { using type = f16; };
template <> struct storage_of<dtype::i32> { using type = std::int32_t; };
template <> struct storage_of<dtype::boolean> { using type = bool; };
template <>
struct storage_of<dtype::i8> {
  using type = std::int8_t;
};
template <>
struct storage_of<dtype::u8> {
  using type = std::uint8_t;
};
template <dtype D> using storage_t = typename storage_of<D>::type;

// Load any element as the f32 compute type, and store an f32 result rounded to the element.
template <class T> constexpr float to_f32(T v) { return static_cast<float>(v); }
template <class T> constexpr T from_f32(float v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0f;
  } else if constexpr (std::is_integral_v<T>) {  // toward zero, saturating, NaN to 0
    constexpr dtype d = dtype_of<T>;
    if (!(v == v)) return T(0);
    if (v <= integer_min(d)) return T(integer_min(d));
    if (v >= integer_max(d)) return d == dtype::i32 ? T(2147483647) : T(integer_max(d));
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace fusedsl
