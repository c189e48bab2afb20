#pragma once
// What each elementwise op computes on one f32 value: the one definition that every backend's
// scalar path uses (the reference backend, the CPU interpreter), so they cannot drift apart.
#include <cmath>
#include <stdexcept>
#include <string>

#include "fusedsl/graph/node.hpp"

namespace fusedsl::graph::scalar {

// maximum/minimum propagate NaN, as XLA's do.
inline float nan_max(float x, float y) { return (x != x || y != y) ? x + y : (x > y ? x : y); }
inline float nan_min(float x, float y) { return (x != x || y != y) ? x + y : (x < y ? x : y); }

inline float unary(op_kind k, float x) {
  switch (k) {
    case op_kind::neg: return -x;
    case op_kind::abs: return std::fabs(x);
    case op_kind::exp: return std::exp(x);
    case op_kind::log: return std::log(x);
    case op_kind::sqrt: return std::sqrt(x);
    case op_kind::rsqrt: return 1.0f / std::sqrt(x);
    case op_kind::tanh: return std::tanh(x);
    case op_kind::erf: return std::erf(x);
    case op_kind::sigmoid: return 1.0f / (1.0f + std::exp(-x));
    case op_kind::relu: return x < 0.0f ? 0.0f : x;  // NaN stays NaN
    // Both GELUs in forms that do not cancel for negative x, where 1 + erf and 1 + tanh lose
    // every digit of a small result (6.5e5 and 4.8e6 ulp at x = -5 in float):
    // x/2 (1 + erf(x / sqrt 2)) = x/2 erfc(-x / sqrt 2), x/2 (1 + tanh(u)) = x / (1 + e^(-2u)).
    case op_kind::gelu_erf: return 0.5f * x * std::erfc(x * -0.70710678118654752f);
    case op_kind::gelu_tanh: {
      const float c = 0.79788456080286536f;  // sqrt(2 / pi)
      return x / (1.0f + std::exp(-2.0f * c * (x + 0.044715f * x * x * x)));
    }
    case op_kind::silu: return x / (1.0f + std::exp(-x));
    default: throw std::invalid_argument(std::string("not a unary op: ") + std::string(name_of(k)));
  }
}

// IEEE comparisons: every one but ne is false when an operand is NaN.
inline bool compare(op_kind k, float x, float y) {
  switch (k) {
    case op_kind::eq: return x == y;
    case op_kind::ne: return x != y;
    case op_kind::lt: return x < y;
    case op_kind::le: return x <= y;
    case op_kind::gt: return x > y;
    case op_kind::ge: return x >= y;
    default: throw std::invalid_argument(std::string("not a comparison: ") + std::string(name_of(k)));
  }
}

inline float binary(op_kind k, float x, float y) {
  switch (k) {
    case op_kind::add: return x + y;
    case op_kind::sub: return x - y;
    case op_kind::mul: return x * y;
    case op_kind::div: return x / y;
    case op_kind::max: return nan_max(x, y);
    case op_kind::min: return nan_min(x, y);
    case op_kind::pow: return std::pow(x, y);
    default: return compare(k, x, y) ? 1.0f : 0.0f;
  }
}

}  // namespace fusedsl::graph::scalar
