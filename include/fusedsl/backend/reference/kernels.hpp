#pragma once
// The reference backend's kernels: one function per primitive op. Each reads its operands as
// tensor_refs and returns a new tensor; nothing is fused and every result is materialised.
//
// Numerics (the ground truth every other backend is compared with):
//  - floating-point ops compute in f32 and round each result to its dtype (bf16/f16: round to
//    nearest, ties to even, with the conversions of core/dtype.hpp);
//  - reductions accumulate in f32, in index order; max/min propagate NaN (as XLA does);
//  - matmul is Eigen's f32 GEMM on operands converted to f32;
//  - i32 and pred ops compute in 64-bit integers; i32 results wrap modulo 2^32, pred results are
//    "!= 0". Integer division by zero throws fusedsl::error;
//  - casts to i32 truncate toward zero and saturate (NaN -> 0); casts to pred are "!= 0"; i32 to
//    bf16/f16 goes through f32.
// Shapes are trusted here: reference::validate checks every node before anything runs.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/shape.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/graph/node.hpp"

// GCC 12 reports false (maybe-)uninitialized warnings inside Eigen's AVX-512 GEMM kernels, at the
// point where they are inlined; the suppression must cover both the include and the GEMM calls.
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>

namespace fusedsl::reference::kernels {

static_assert(std::numeric_limits<float>::is_iec559, "the reference backend needs IEEE 754 floats");

using graph::op_kind;
using strides = std::array<std::int64_t, max_rank>;

// ---- scalar conversions ----

// Truncate toward zero, saturate at the i32 limits; NaN gives 0 (a defined result, unlike C++).
inline std::int32_t saturate_i32(double v) {
  if (v != v) return 0;
  if (v <= double(std::numeric_limits<std::int32_t>::min()))
    return std::numeric_limits<std::int32_t>::min();
  if (v >= double(std::numeric_limits<std::int32_t>::max()))
    return std::numeric_limits<std::int32_t>::max();
  return std::int32_t(v);
}

// An f32 value rounded to dtype t and read back as f32 (what storing it in t keeps).
inline float round_to(dtype t, float v) {
  switch (t) {
    case dtype::f32:
      return v;
    case dtype::bf16:
      return float(bf16(v));
    case dtype::f16:
      return float(f16(v));
    case dtype::i32:
      return float(saturate_i32(v));
    case dtype::boolean:
      return v != 0.0f ? 1.0f : 0.0f;
    case dtype::i8:
      return float(from_f32<std::int8_t>(v));
    case dtype::u8:
      return float(from_f32<std::uint8_t>(v));
  }
  return v;
}

// ---- reading operands ----

// The elements of a tensor as f32: read in place when it is f32, converted otherwise.
class f32_data {
 public:
  explicit f32_data(const tensor_ref& t) {
    const std::size_t n = std::size_t(t.shape.size());
    if (t.type == dtype::f32) {
      p_ = static_cast<const float*>(t.data);
      return;
    }
    copy_.resize(n);
    switch (t.type) {
      case dtype::bf16:
        for (std::size_t i = 0; i < n; ++i) copy_[i] = float(t.as<const bf16>()[i]);
        break;
      case dtype::f16:
        for (std::size_t i = 0; i < n; ++i) copy_[i] = float(t.as<const f16>()[i]);
        break;
      case dtype::i32:
        for (std::size_t i = 0; i < n; ++i) copy_[i] = float(t.as<const std::int32_t>()[i]);
        break;
      case dtype::boolean:
        for (std::size_t i = 0; i < n; ++i) copy_[i] = t.as<const bool>()[i] ? 1.0f : 0.0f;
        break;
      case dtype::i8:
        for (std::size_t i = 0; i < n; ++i) copy_[i] = float(t.as<const std::int8_t>()[i]);
        break;
      case dtype::u8:
        for (std::size_t i = 0; i < n; ++i) copy_[i] = float(t.as<const std::uint8_t>()[i]);
        break;
      case dtype::f32:
        break;
    }
    p_ = copy_.data();
  }
  f32_data(const f32_data&) = delete;
  f32_data& operator=(const f32_data&) = delete;
  const float* data() const { return p_; }

 private:
  std::vector<float> copy_;
  const float* p_ = nullptr;
};

// The elements of a tensor as 64-bit integers (floating values truncated and saturated).
inline std::vector<std::int64_t> int_data(const tensor_ref& t) {
  const std::size_t n = std::size_t(t.shape.size());
  std::vector<std::int64_t> r(n);
  switch (t.type) {
    case dtype::i32:
      for (std::size_t i = 0; i < n; ++i) r[i] = t.as<const std::int32_t>()[i];
      break;
    case dtype::boolean:
      for (std::size_t i = 0; i < n; ++i) r[i] = t.as<const bool>()[i] ? 1 : 0;
      break;
    case dtype::i8:
      for (std::size_t i = 0; i < n; ++i) r[i] = t.as<const std::int8_t>()[i];
      break;
    case dtype::u8:
      for (std::size_t i = 0; i < n; ++i) r[i] = t.as<const std::uint8_t>()[i];
      break;
    default: {
      const f32_data f(t);
      for (std::size_t i = 0; i < n; ++i) r[i] = saturate_i32(f.data()[i]);
    }
  }
  return r;
}

// ---- writing results ----

// f32 results, rounded into `out` (of any dtype) by commit(); f32 outputs are written in place.
class f32_sink {
 public:
  explicit f32_sink(dynamic_tensor& out) : out_(out) {
    if (out.type() == dtype::f32)
      p_ = out.data<float>();
    else {
      tmp_.resize(std::size_t(out.shape().size()));
      p_ = tmp_.data();
    }
  }
  float* data() { return p_; }
  void commit() {
    const std::size_t n = tmp_.size();
    switch (out_.type()) {
      case dtype::f32:
        break;
      case dtype::bf16:
        for (std::size_t i = 0; i < n; ++i) out_.data<bf16>()[i] = bf16(tmp_[i]);
        break;
      case dtype::f16:
        for (std::size_t i = 0; i < n; ++i) out_.data<f16>()[i] = f16(tmp_[i]);
        break;
      case dtype::i32:
        for (std::size_t i = 0; i < n; ++i) out_.data<std::int32_t>()[i] = saturate_i32(tmp_[i]);
        break;
      case dtype::boolean:
        for (std::size_t i = 0; i < n; ++i) out_.data<bool>()[i] = tmp_[i] != 0.0f;
        break;
      case dtype::i8:
        for (std::size_t i = 0; i < n; ++i)
          out_.data<std::int8_t>()[i] = from_f32<std::int8_t>(tmp_[i]);
        break;
      case dtype::u8:
        for (std::size_t i = 0; i < n; ++i)
          out_.data<std::uint8_t>()[i] = from_f32<std::uint8_t>(tmp_[i]);
        break;
    }
  }

 private:
  dynamic_tensor& out_;
  std::vector<float> tmp_;
  float* p_ = nullptr;
};

// 64-bit integer results stored into `out`: i32 wraps modulo 2^32, i8 and u8 saturate at their
// range, pred is "!= 0", floats convert.
inline void store_ints(dynamic_tensor& out, const std::vector<std::int64_t>& v) {
  const std::size_t n = v.size();
  switch (out.type()) {
    case dtype::i32:
      for (std::size_t i = 0; i < n; ++i)
        out.data<std::int32_t>()[i] = std::int32_t(std::uint32_t(std::uint64_t(v[i])));
      break;
    case dtype::boolean:
      for (std::size_t i = 0; i < n; ++i) out.data<bool>()[i] = v[i] != 0;
      break;
    case dtype::i8:
      for (std::size_t i = 0; i < n; ++i)
        out.data<std::int8_t>()[i] = std::int8_t(v[i] < -128 ? -128 : v[i] > 127 ? 127 : v[i]);
      break;
    case dtype::u8:
      for (std::size_t i = 0; i < n; ++i)
        out.data<std::uint8_t>()[i] = std::uint8_t(v[i] < 0 ? 0 : v[i] > 255 ? 255 : v[i]);
      break;
    default: {
      f32_sink s(out);
      for (std::size_t i = 0; i < n; ++i) s.data()[i] = float(v[i]);
      s.commit();
    }
  }
}

// ---- index iteration ----

// Strides (in elements) with which `in` is read at each axis of `out` under NumPy broadcasting:
// 0 along axes that `in` lacks or has as 1.
inline strides broadcast_strides(const dims& in, const dims& out) {
  strides s{};
  for (int a = 0; a < out.rank; ++a) {
    const int ai = a - (out.rank - in.rank);
    s[std::size_t(a)] = (ai < 0 || in[ai] == 1) ? 0 : in.stride(ai);
  }
  return s;
}

// Calls f(i, off) for every element i of `out` in row-major order, where off[k] is the offset
// of operand k, advanced by st[k] along each axis.
template <std::size_t K, class F>
void strided_loop(const dims& out, const std::array<strides, K>& st, F&& f) {
  const std::int64_t n = out.size();
  if (n == 0) return;
  const int r = out.rank;
  const std::int64_t inner = r ? out[r - 1] : 1;
  std::array<std::int64_t, K> inner_st{};
  for (std::size_t k = 0; k < K; ++k) inner_st[k] = r ? st[k][std::size_t(r - 1)] : 0;
  std::array<std::int64_t, max_rank> idx{};
  std::array<std::int64_t, K> off{};
  for (std::int64_t base = 0; base < n; base += inner) {
    std::array<std::int64_t, K> o = off;
    for (std::int64_t j = 0; j < inner; ++j) {
      f(base + j, o);
      for (std::size_t k = 0; k < K; ++k) o[k] += inner_st[k];
    }
    for (int a = r - 2; a >= 0; --a) {
      const std::size_t ua = std::size_t(a);
      ++idx[ua];
      for (std::size_t k = 0; k < K; ++k) off[k] += st[k][ua];
      if (idx[ua] < out[a]) break;
      for (std::size_t k = 0; k < K; ++k) off[k] -= st[k][ua] * out[a];
      idx[ua] = 0;
    }
  }
}

// ---- elementwise ----

// maximum/minimum propagate NaN, as XLA's do.
inline float nan_max(float x, float y) { return (x != x || y != y) ? x + y : (x > y ? x : y); }
inline float nan_min(float x, float y) { return (x != x || y != y) ? x + y : (x < y ? x : y); }

// The reference's own formulas (not the op table's bodies, so that a backend compared with the
// reference is compared with a second implementation): the C library in double precision, rounded
// once to float. The GELUs in their non-cancelling erfc / exp forms (see graph/ops.hpp).
inline float apply_unary(op_kind k, float xf) {
  const double x = xf;
  switch (k) {
    case op_kind::neg: return -xf;
    case op_kind::abs: return std::fabs(xf);
    case op_kind::exp: return float(std::exp(x));
    case op_kind::log: return float(std::log(x));
    case op_kind::sqrt: return float(std::sqrt(x));
    case op_kind::rsqrt: return float(1.0 / std::sqrt(x));
    case op_kind::tanh: return float(std::tanh(x));
    case op_kind::erf: return float(std::erf(x));
    case op_kind::sigmoid: return float(1.0 / (1.0 + std::exp(-x)));
    case op_kind::relu: return xf < 0.0f ? 0.0f : xf;  // NaN stays NaN
    // The GELUs and SiLU at +-inf: their limits (+inf, 0).
    case op_kind::gelu_erf:
      return std::isinf(x) ? (x > 0 ? xf : 0.0f) : float(0.5 * x * std::erfc(-x / std::sqrt(2.0)));
    case op_kind::gelu_tanh: {
      if (std::isinf(x)) return x > 0 ? xf : 0.0f;
      const double u = std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
      return float(x / (1.0 + std::exp(-2.0 * u)));
    }
    case op_kind::silu:
      return std::isinf(x) ? (x > 0 ? xf : 0.0f) : float(x / (1.0 + std::exp(-x)));
    case op_kind::sin: return float(std::sin(x));
    case op_kind::cos: return float(std::cos(x));
    case op_kind::floor:
      return std::floor(xf);
    case op_kind::ceil:
      return std::ceil(xf);
    case op_kind::trunc:
      return std::trunc(xf);
    // Ties to even by hand rather than by the rounding mode: floor(x + 0.5), one lower where
    // that lands on an odd integer from an exact tie.
    case op_kind::round: {
      if (!std::isfinite(x)) return xf;
      double r = std::floor(x + 0.5);
      if (r - x == 0.5 && std::fmod(r, 2.0) != 0.0) r -= 1.0;
      return float(std::copysign(r, x));
    }
    default: break;
  }
  throw error(std::string("reference: not a unary op: ") + std::string(graph::name_of(k)));
}

// A unary op on a floating tensor, result of dtype out_type.
inline dynamic_tensor unary(op_kind k, const tensor_ref& x, dtype out_type) {
  dynamic_tensor out(out_type, x.shape);
  const f32_data in(x);
  f32_sink s(out);
  const std::int64_t n = x.shape.size();
  const float* a = in.data();
  float* o = s.data();
  switch (k) {  // the common ones get a loop of their own, the rest share a switch per element
    case op_kind::exp:
      for (std::int64_t i = 0; i < n; ++i) o[i] = std::exp(a[i]);
      break;
    case op_kind::neg:
      for (std::int64_t i = 0; i < n; ++i) o[i] = -a[i];
      break;
    default:
      for (std::int64_t i = 0; i < n; ++i) o[i] = apply_unary(k, a[i]);
      break;
  }
  s.commit();
  return out;
}

// Calls fn with the f32 function of arithmetic op k (one instantiation per op).
template <class Fn>
void with_float_arithmetic(op_kind k, Fn&& fn) {
  switch (k) {
    case op_kind::add:
      return fn([](float x, float y) { return x + y; });
    case op_kind::sub:
      return fn([](float x, float y) { return x - y; });
    case op_kind::mul:
      return fn([](float x, float y) { return x * y; });
    case op_kind::div:
      return fn([](float x, float y) { return x / y; });
    case op_kind::max:
      return fn([](float x, float y) { return nan_max(x, y); });
    case op_kind::min:
      return fn([](float x, float y) { return nan_min(x, y); });
    case op_kind::pow:
      return fn([](float x, float y) { return std::pow(x, y); });
    default:
      throw error(std::string("reference: not a binary op: ") + std::string(graph::name_of(k)));
  }
}

inline bool float_compare(op_kind k, float x, float y) {
  switch (k) {
    case op_kind::eq: return x == y;
    case op_kind::ne: return x != y;
    case op_kind::lt: return x < y;
    case op_kind::le: return x <= y;
    case op_kind::gt: return x > y;
    case op_kind::ge: return x >= y;
    default: break;
  }
  throw error(std::string("reference: not a comparison: ") + std::string(graph::name_of(k)));
}

inline std::int64_t int_binary(op_kind k, std::int64_t x, std::int64_t y) {
  switch (k) {
    case op_kind::add:
      return x + y;
    case op_kind::sub:
      return x - y;
    case op_kind::mul:
      return x * y;
    case op_kind::div:
      if (y == 0) throw error("div: integer division by zero");
      return x / y;
    case op_kind::max:
      return x > y ? x : y;
    case op_kind::min:
      return x < y ? x : y;
    case op_kind::eq:
      return x == y;
    case op_kind::ne:
      return x != y;
    case op_kind::lt:
      return x < y;
    case op_kind::le:
      return x <= y;
    case op_kind::gt:
      return x > y;
    case op_kind::ge:
      return x >= y;
    default:
      throw error(std::string(graph::name_of(k)) + ": not defined for i32 or pred operands");
  }
}

// A binary op or comparison with NumPy broadcasting. Both operands hold the compute dtype (weak
// constants already converted); the result has out_type and out_shape.
inline dynamic_tensor binary(op_kind k, const tensor_ref& a, const tensor_ref& b,
                             const dims& out_shape, dtype out_type) {
  dynamic_tensor out(out_type, out_shape);
  const std::array<strides, 2> st{broadcast_strides(a.shape, out_shape),
                                  broadcast_strides(b.shape, out_shape)};
  if (is_floating(a.type)) {
    const f32_data x(a), y(b);
    const float* pa = x.data();
    const float* pb = y.data();
    if (graph::is_compare(k)) {
      bool* o = out.data<bool>();
      strided_loop(out_shape, st, [&](std::int64_t i, const std::array<std::int64_t, 2>& off) {
        o[i] = float_compare(k, pa[off[0]], pb[off[1]]);
      });
    } else {
      f32_sink s(out);
      float* o = s.data();
      with_float_arithmetic(k, [&](auto op) {
        strided_loop(out_shape, st, [&](std::int64_t i, const std::array<std::int64_t, 2>& off) {
          o[i] = op(pa[off[0]], pb[off[1]]);
        });
      });
      s.commit();
    }
    return out;
  }
  const std::vector<std::int64_t> x = int_data(a), y = int_data(b);
  std::vector<std::int64_t> r(std::size_t(out_shape.size()));
  strided_loop(out_shape, st, [&](std::int64_t i, const std::array<std::int64_t, 2>& off) {
    r[std::size_t(i)] = int_binary(k, x[std::size_t(off[0])], y[std::size_t(off[1])]);
  });
  store_ints(out, r);
  return out;
}

// where(pred, a, b) with broadcasting; a and b hold the result dtype.
inline dynamic_tensor select(const tensor_ref& p, const tensor_ref& a, const tensor_ref& b,
                             const dims& out_shape, dtype out_type) {
  dynamic_tensor out(out_type, out_shape);
  const std::array<strides, 3> st{broadcast_strides(p.shape, out_shape),
                                  broadcast_strides(a.shape, out_shape),
                                  broadcast_strides(b.shape, out_shape)};
  const bool* pp = p.as<const bool>();
  // Values are copied bit for bit, so no rounding happens and NaN payloads survive.
  const std::size_t es = std::size_t(size_of(out_type));
  const auto* pa = static_cast<const unsigned char*>(a.data);
  const auto* pb = static_cast<const unsigned char*>(b.data);
  auto* o = static_cast<unsigned char*>(out.raw());
  strided_loop(out_shape, st, [&](std::int64_t i, const std::array<std::int64_t, 3>& off) {
    const unsigned char* src =
        pp[off[0]] ? pa + std::size_t(off[1]) * es : pb + std::size_t(off[2]) * es;
    std::memcpy(o + std::size_t(i) * es, src, es);
  });
  return out;
}

// Convert every element of x to dtype `to` (see the header comment for the rules).
inline dynamic_tensor cast(const tensor_ref& x, dtype to) {
  dynamic_tensor out(to, x.shape);
  if (x.type == to) {
    if (x.bytes()) std::memcpy(out.raw(), x.data, x.bytes());
    return out;
  }
  if (is_floating(x.type)) {
    const f32_data in(x);
    const std::int64_t n = x.shape.size();
    if (to == dtype::boolean) {
      for (std::int64_t i = 0; i < n; ++i)
        out.data<bool>()[i] = in.data()[i] != 0.0f;  // NaN -> true
      return out;
    }
    f32_sink s(out);
    std::memcpy(s.data(), in.data(), std::size_t(n) * sizeof(float));
    s.commit();
    return out;
  }
  store_ints(out, int_data(x));
  return out;
}

// A tensor of the given shape with every element equal to v, converted to dtype t.
inline dynamic_tensor fill(dtype t, const dims& shape, double v) {
  dynamic_tensor out(t, shape);
  const std::int64_t n = shape.size();
  if (is_floating(t)) {
    f32_sink s(out);
    for (std::int64_t i = 0; i < n; ++i) s.data()[i] = float(v);
    s.commit();
  } else {
    const std::int32_t iv = saturate_i32(v);
    for (std::int64_t i = 0; i < n; ++i) {
      if (t == dtype::i32)
        out.data<std::int32_t>()[i] = iv;
      else
        out.data<bool>()[i] = v != 0.0;
    }
  }
  return out;
}

// Indices along `axis`, as dtype t.
inline dynamic_tensor iota(dtype t, const dims& shape, int axis) {
  dynamic_tensor out(t, shape);
  const std::int64_t n = shape.size(), st = shape.stride(axis), len = shape[axis];
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[std::size_t(i)] = (i / st) % len;
  store_ints(out, v);
  return out;
}

// ---- reductions ----

// Reduce x over `axis` (accumulating in f32 in index order, or in 64-bit integers).
inline dynamic_tensor reduce(op_kind k, const tensor_ref& x, int axis, const dims& out_shape,
                             dtype out_type) {
  dynamic_tensor out(out_type, out_shape);
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape[i];
  for (int i = axis + 1; i < x.shape.rank; ++i) inner *= x.shape[i];
  const std::int64_t len = x.shape[axis];
  if (is_floating(x.type)) {
    const f32_data in(x);
    const float* a = in.data();
    f32_sink s(out);
    float* o = s.data();
    for (std::int64_t p = 0; p < outer; ++p) {
      float* row = o + p * inner;
      const float* src = a + p * len * inner;
      for (std::int64_t i = 0; i < inner; ++i) row[i] = src[i];
      for (std::int64_t j = 1; j < len; ++j) {
        const float* s_j = src + j * inner;
        switch (k) {
          case op_kind::reduce_sum:
          case op_kind::reduce_mean:
            for (std::int64_t i = 0; i < inner; ++i) row[i] += s_j[i];
            break;
          case op_kind::reduce_max:
            for (std::int64_t i = 0; i < inner; ++i) row[i] = nan_max(row[i], s_j[i]);
            break;
          case op_kind::reduce_min:
            for (std::int64_t i = 0; i < inner; ++i) row[i] = nan_min(row[i], s_j[i]);
            break;
          default:
            throw error("reference: not a reduction");
        }
      }
      if (k == op_kind::reduce_mean)
        for (std::int64_t i = 0; i < inner; ++i) row[i] /= float(len);
    }
    s.commit();
    return out;
  }
  if (k == op_kind::reduce_mean)
    throw error("reduce_mean: needs a floating-point operand (cast it first)");
  if (k == op_kind::reduce_sum && x.type == dtype::boolean)
    throw error("reduce_sum: not defined for pred operands");
  const std::vector<std::int64_t> a = int_data(x);
  std::vector<std::int64_t> r(std::size_t(outer * inner));
  for (std::int64_t p = 0; p < outer; ++p)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t acc = a[std::size_t(p * len * inner + i)];
      for (std::int64_t j = 1; j < len; ++j) {
        const std::int64_t v = a[std::size_t((p * len + j) * inner + i)];
        if (k == op_kind::reduce_sum)
          acc = std::int64_t(std::uint64_t(acc) + std::uint64_t(v));
        else if (k == op_kind::reduce_max)
          acc = v > acc ? v : acc;
        else
          acc = v < acc ? v : acc;
      }
      r[std::size_t(p * inner + i)] = acc;
    }
  store_ints(out, r);
  return out;
}

// ---- matmul ----

// [..., M, K] x [..., K, N] -> [..., M, N] with broadcast batch axes; each matrix product is one
// call of Eigen's GEMM on f32 operands.
inline dynamic_tensor matmul(const tensor_ref& a, const tensor_ref& b, bool ta, bool tb,
                             const dims& out_shape, dtype out_type) {
  if (!is_floating(a.type) || !is_floating(b.type))
    throw error("matmul: the reference backend multiplies floating-point tensors only");
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  dynamic_tensor out(out_type, out_shape);
  const f32_data x(a), y(b);
  f32_sink s(out);
  const int r = out_shape.rank;
  const std::int64_t m = out_shape[r - 2], n = out_shape[r - 1];
  const std::int64_t ar = a.shape[a.shape.rank - 2], ac = a.shape[a.shape.rank - 1];
  const std::int64_t br = b.shape[b.shape.rank - 2], bc = b.shape[b.shape.rank - 1];
  // Batch axes: out [..., M, N]; operands are read with broadcast strides counted in matrices.
  dims batch, ba, bb;
  batch.rank = r - 2;
  for (int i = 0; i < batch.rank; ++i) batch[i] = out_shape[i];
  ba.rank = a.shape.rank - 2;
  for (int i = 0; i < ba.rank; ++i) ba[i] = a.shape[i];
  bb.rank = b.shape.rank - 2;
  for (int i = 0; i < bb.rank; ++i) bb[i] = b.shape[i];
  const std::array<strides, 2> st{broadcast_strides(ba, batch), broadcast_strides(bb, batch)};
  matrix at, bt;
  strided_loop(batch, st, [&](std::int64_t i, const std::array<std::int64_t, 2>& off) {
    const Eigen::Map<const matrix> ma(x.data() + off[0] * ar * ac, Eigen::Index(ar),
                                      Eigen::Index(ac));
    const Eigen::Map<const matrix> mb(y.data() + off[1] * br * bc, Eigen::Index(br),
                                      Eigen::Index(bc));
    Eigen::Map<matrix> mc(s.data() + i * m * n, Eigen::Index(m), Eigen::Index(n));
    // A transposed operand is copied row-major first, so that one GEMM kernel serves all four
    // cases (each storage-order pair is a separate, slow-to-compile instantiation in Eigen).
    if (ta) at = ma.transpose();
    if (tb) bt = mb.transpose();
    if (ta && tb)
      mc.noalias() = at * bt;
    else if (ta)
      mc.noalias() = at * mb;
    else if (tb)
      mc.noalias() = ma * bt;
    else
      mc.noalias() = ma * mb;
  });
  s.commit();
  return out;
}

// ---- structure (bit-exact copies, any dtype) ----

// out[i] = in[base + off(i)] for the given per-axis strides of `in`, elements of es bytes.
inline void gather(const tensor_ref& in, std::int64_t base, const strides& st,
                   dynamic_tensor& out) {
  const std::size_t es = std::size_t(size_of(in.type));
  const auto* src = static_cast<const unsigned char*>(in.data) + std::size_t(base) * es;
  auto* dst = static_cast<unsigned char*>(out.raw());
  strided_loop(out.shape(), std::array<strides, 1>{st},
               [&](std::int64_t i, const std::array<std::int64_t, 1>& off) {
                 std::memcpy(dst + std::size_t(i) * es, src + std::size_t(off[0]) * es, es);
               });
}

// out axis j is in axis perm[j].
inline dynamic_tensor transpose(const tensor_ref& x, std::span<const int> perm,
                                const dims& out_shape) {
  dynamic_tensor out(x.type, out_shape);
  strides st{};
  for (std::size_t j = 0; j < perm.size(); ++j) st[j] = x.shape.stride(perm[j]);
  gather(x, 0, st, out);
  return out;
}

inline dynamic_tensor reshape(const tensor_ref& x, const dims& out_shape) {
  dynamic_tensor out(x.type, out_shape);
  if (x.bytes()) std::memcpy(out.raw(), x.data, x.bytes());
  return out;
}

inline dynamic_tensor broadcast(const tensor_ref& x, const dims& out_shape) {
  dynamic_tensor out(x.type, out_shape);
  gather(x, 0, broadcast_strides(x.shape, out_shape), out);
  return out;
}

inline dynamic_tensor slice(const tensor_ref& x, int axis, std::int64_t begin,
                            const dims& out_shape) {
  dynamic_tensor out(x.type, out_shape);
  strides st{};
  for (int a = 0; a < x.shape.rank; ++a) st[std::size_t(a)] = x.shape.stride(a);
  gather(x, begin * x.shape.stride(axis), st, out);
  return out;
}

inline dynamic_tensor concat(std::span<const tensor_ref> xs, int axis, const dims& out_shape) {
  dynamic_tensor out(xs[0].type, out_shape);
  const std::size_t es = std::size_t(size_of(xs[0].type));
  std::int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= out_shape[i];
  const std::int64_t out_row =
      out_shape[axis] * out_shape.stride(axis);  // elements per outer index
  auto* dst = static_cast<unsigned char*>(out.raw());
  std::int64_t at = 0;  // offset of this operand's chunk inside an output row
  for (const tensor_ref& x : xs) {
    const std::int64_t chunk = x.shape[axis] * x.shape.stride(axis);
    const auto* src = static_cast<const unsigned char*>(x.data);
    for (std::int64_t p = 0; p < outer; ++p)
      std::memcpy(dst + std::size_t(p * out_row + at) * es, src + std::size_t(p * chunk) * es,
                  std::size_t(chunk) * es);
    at += chunk;
  }
  return out;
}

// ---- run-time positions ----

// The i32 (or integral) scalar at t, as an index.
inline std::int64_t index_of(const tensor_ref& t) { return int_data(t).at(0); }

// table[ids] along axis 0, ids clamped to the table (as XLA's gather).
inline dynamic_tensor gather_rows(const tensor_ref& table, const tensor_ref& ids,
                                  const dims& out_shape) {
  dynamic_tensor out(table.type, out_shape);
  const std::vector<std::int64_t> id = int_data(ids);
  const std::int64_t rows = table.shape[0];
  const std::size_t row_bytes =
      std::size_t(table.shape.size() / rows) * std::size_t(size_of(table.type));
  auto* dst = static_cast<unsigned char*>(out.raw());
  const auto* src = static_cast<const unsigned char*>(table.data);
  for (std::size_t k = 0; k < id.size(); ++k) {
    const std::int64_t r = std::clamp<std::int64_t>(id[k], 0, rows - 1);
    std::memcpy(dst + k * row_bytes, src + std::size_t(r) * row_bytes, row_bytes);
  }
  return out;
}

// x[start : start + out_shape[axis]] along axis, start clamped into x.
inline dynamic_tensor dynamic_slice(const tensor_ref& x, const tensor_ref& start, int axis,
                                    const dims& out_shape) {
  const std::int64_t s =
      std::clamp<std::int64_t>(index_of(start), 0, x.shape[axis] - out_shape[axis]);
  return slice(x, axis, s, out_shape);
}

// x with `update` written at start along axis, start clamped into x.
inline dynamic_tensor dynamic_update_slice(const tensor_ref& x, const tensor_ref& update,
                                           const tensor_ref& start, int axis) {
  dynamic_tensor out(x.type, x.shape);
  if (x.bytes()) std::memcpy(out.raw(), x.data, x.bytes());
  const std::int64_t s =
      std::clamp<std::int64_t>(index_of(start), 0, x.shape[axis] - update.shape[axis]);
  const std::size_t es = std::size_t(size_of(x.type));
  std::int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape[i];
  const std::int64_t chunk = update.shape[axis] * update.shape.stride(axis),
                     row = x.shape[axis] * x.shape.stride(axis);
  auto* dst = static_cast<unsigned char*>(out.raw());
  const auto* src = static_cast<const unsigned char*>(update.data);
  for (std::int64_t p = 0; p < outer; ++p)
    std::memcpy(dst + std::size_t(p * row + s * x.shape.stride(axis)) * es,
                src + std::size_t(p * chunk) * es, std::size_t(chunk) * es);
  return out;
}

// The first index of the maximum along axis (NaN is the maximum, the first NaN wins), as i32.
inline dynamic_tensor argmax(const tensor_ref& x, int axis, const dims& out_shape) {
  dynamic_tensor out(dtype::i32, out_shape);
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape[i];
  for (int i = axis + 1; i < x.shape.rank; ++i) inner *= x.shape[i];
  const std::int64_t len = x.shape[axis];
  const f32_data in(x);
  const float* a = in.data();
  auto* o = out.data<std::int32_t>();
  for (std::int64_t p = 0; p < outer; ++p)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < len; ++j) {
        const float v = a[(p * len + j) * inner + i], b = a[(p * len + best) * inner + i];
        if (std::isnan(v) ? !std::isnan(b) : v > b) best = j;
      }
      o[p * inner + i] = std::int32_t(best);
    }
  return out;
}

}  // namespace fusedsl::reference::kernels

#pragma GCC diagnostic pop
