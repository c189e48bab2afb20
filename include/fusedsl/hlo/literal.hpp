#pragma once
// Constant values of the runtime HLO IR (scalars and arrays, row-major).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fusedsl/hlo/shape.hpp"

namespace fusedsl::hlo {

// Rounds a double to the nearest value of a floating type (round to nearest even), so a literal
// only ever holds values its type can represent and print/parse round-trips exactly.
// Doubles beyond float's range round to +-inf (or to +-FLT_MAX below the halfway point), as
// IEEE rounding does; a plain cast would be undefined behaviour there.
inline float to_float(double v) {
  constexpr double max = std::numeric_limits<float>::max();
  constexpr double halfway = max + 0x1p103;  // FLT_MAX + half an ulp (2^104 / 2)
  if (v >= halfway) return std::numeric_limits<float>::infinity();
  if (v <= -halfway) return -std::numeric_limits<float>::infinity();
  if (v > max) return std::numeric_limits<float>::max();
  if (v < -max) return -std::numeric_limits<float>::max();
  return static_cast<float>(v);
}

inline double round_to(element_type t, double v) {
  if (std::isnan(v))  // an s8 or u8 value stores NaN as 0, as fusedsl does
    return t == element_type::s8 || t == element_type::u8
               ? 0.0
               : std::numeric_limits<double>::quiet_NaN();
  switch (t) {
    case element_type::f64:
      return v;
    case element_type::f32:
      return static_cast<double>(to_float(v));
    case element_type::bf16: {
      float f = to_float(v);
      std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
      if (std::isinf(f)) return f;
      bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even on the dropped 16 bits
      bits &= 0xffff0000u;
      return static_cast<double>(std::bit_cast<float>(bits));
    }
    case element_type::f16: {
      // IEEE binary16: 10 fraction bits, exponent range [-14, 15]; subnormals step 2^-24.
      double a = std::fabs(v);
      if (std::isinf(v)) return v;
      if (a >= 65520.0) return std::copysign(std::numeric_limits<double>::infinity(), v);
      int exp = 0;
      std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1)
      int e = std::max(exp - 1, -14);
      double quantum = std::ldexp(1.0, e - 10);
      return std::copysign(std::nearbyint(a / quantum) * quantum, v);
    }
    case element_type::pred:
      return v != 0.0 ? 1.0 : 0.0;
    case element_type::s32:
    case element_type::s64:
      return std::trunc(v);
    case element_type::s8:  // toward zero, saturating (as fusedsl stores i8 and u8)
      return std::trunc(std::clamp(v, -128.0, 127.0));
    case element_type::u8:
      return std::trunc(std::clamp(v, 0.0, 255.0));
  }
  return v;
}

// A constant: `shape` is an array shape; floating and pred values live in `values`, integer
// values in `ints` (so s64 stays exact). Values are row-major. NaNs compare equal to NaNs.
struct literal {
  hlo::shape shape;
  std::vector<double> values;
  std::vector<std::int64_t> ints;

  static literal scalar(element_type t, double v) { return array(hlo::shape::scalar(t), {v}); }
  static literal scalar_int(element_type t, std::int64_t v) {
    return array_int(hlo::shape::scalar(t), {v});
  }
  static literal array(hlo::shape s, std::vector<double> v) {
    if (s.is_tuple()) throw ir_error("literal: tuple-shaped constants are not supported");
    if (static_cast<std::int64_t>(v.size()) != s.element_count())
      throw ir_error("literal: " + std::to_string(v.size()) + " values for shape " +
                     to_short_string(s));
    literal l;
    if (is_integral(s.type)) {
      for (double x : v) {
        if (!(x >= -0x1p63 && x < 0x1p63))
          throw ir_error("literal: " + std::to_string(x) + " is not an s64 value");
        l.ints.push_back(static_cast<std::int64_t>(x));
      }
      check_int_range(s.type, l.ints);
    } else {
      for (double& x : v) x = round_to(s.type, x);
      l.values = std::move(v);
    }
    l.shape = std::move(s);
    return l;
  }
  static literal array_int(hlo::shape s, std::vector<std::int64_t> v) {
    if (!is_integral(s.type)) {
      std::vector<double> d(v.begin(), v.end());
      return array(std::move(s), std::move(d));
    }
    if (static_cast<std::int64_t>(v.size()) != s.element_count())
      throw ir_error("literal: " + std::to_string(v.size()) + " values for shape " +
                     to_short_string(s));
    check_int_range(s.type, v);
    literal l;
    l.shape = std::move(s);
    l.ints = std::move(v);
    return l;
  }
  // s8 and u8 values must lie in their range (XLA's parser rejects the others too).
  static void check_int_range(element_type t, const std::vector<std::int64_t>& v) {
    if (t != element_type::s8 && t != element_type::u8) return;
    const std::int64_t lo = t == element_type::s8 ? -128 : 0,
                       hi = t == element_type::s8 ? 127 : 255;
    for (std::int64_t x : v)
      if (x < lo || x > hi)
        throw ir_error("literal: " + std::to_string(x) +
                       (t == element_type::s8 ? " is not an s8 value" : " is not a u8 value"));
  }

  std::int64_t element_count() const { return shape.element_count(); }
  // Element i as a double, whatever the type.
  double get(std::size_t i) const {
    return is_integral(shape.type) ? static_cast<double>(ints.at(i)) : values.at(i);
  }

  friend bool operator==(const literal& a, const literal& b) {
    if (!(a.shape == b.shape) || a.ints != b.ints || a.values.size() != b.values.size())
      return false;
    for (std::size_t i = 0; i < a.values.size(); ++i) {
      double x = a.values[i], y = b.values[i];
      if (std::isnan(x) && std::isnan(y)) continue;
      if (std::bit_cast<std::uint64_t>(x) != std::bit_cast<std::uint64_t>(y)) return false;
    }
    return true;
  }
};

}  // namespace fusedsl::hlo
