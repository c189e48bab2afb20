// Every elementwise op of the op table (graph/ops.hpp), three ways on the same inputs: its body
// with the CPU kernels' vector policy (kernels/vec_math.hpp) on this build's instruction set and on
// the scalar path, its body with the one-lane policy (graph/scalar.hpp), and the reference
// backend's own formula (backend/reference/kernels.hpp). The inputs are an odd count (the last
// vector is partly filled) of random values and edge values: NaN, +-inf, +-0, a subnormal, the ends
// of exp's range. Built for AVX-512, AVX2, SSE2 and the forced scalar path
// (CMakeLists.txt here).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fusedsl/backend/cpu/kernels/vec_math.hpp"
#include "fusedsl/backend/reference/kernels.hpp"
#include "fusedsl/graph/ops.hpp"
#include "fusedsl/graph/scalar.hpp"
#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;
namespace g = fusedsl::graph;
namespace ref = fusedsl::reference::kernels;
using g::op_kind;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float nan = std::numeric_limits<float>::quiet_NaN();

// The edge values every op sees, then `random` values in [lo, hi]; 37 + 12 values in all (not a
// multiple of any vector width).
std::vector<float> inputs(float lo, float hi, unsigned seed) {
  std::vector<float> v = {nan,     inf,   -inf,   0.0f, -0.0f, 1e-40f,
                          -1e-40f, 88.5f, -88.5f, 1.0f, -1.0f, -9.75f};
  const std::vector<float> r = fusedsl_test::random_floats(37, seed, lo, hi);
  v.insert(v.end(), r.begin(), r.end());
  return v;
}

// Applies f (on values of type simd<Arch>::vec) to the n-element arrays at `in`, vector by vector;
// the tail vector is padded with 1.
template <class Arch, int Arity, class F>
std::vector<float> run_vector(const std::vector<float>* in, std::size_t n, F f) {
  using S = k::simd<Arch>;
  const std::size_t w = std::size_t(S::width), padded = (n + w - 1) / w * w;
  std::vector<float> a[3], out(padded);
  for (int j = 0; j < Arity; ++j) {
    a[j] = in[j];
    a[j].resize(padded, 1.0f);
  }
  for (std::size_t i = 0; i < padded; i += w) {
    if constexpr (Arity == 1) S::store(&out[i], f(S::load(&a[0][i])));
    if constexpr (Arity == 2) S::store(&out[i], f(S::load(&a[0][i]), S::load(&a[1][i])));
    if constexpr (Arity == 3)
      S::store(&out[i], f(S::load(&a[0][i]), S::load(&a[1][i]), S::load(&a[2][i])));
  }
  out.resize(n);
  return out;
}

// The tolerance of op K against the reference (double precision rounded once): the vector
// policy's polynomial forms are within a few ulp of it; sin and cos absolutely near their zeros.
ft::tolerance tolerance_of(op_kind kind) {
  switch (kind) {
    case op_kind::neg:
    case op_kind::abs:
    case op_kind::relu:
    case op_kind::add:
    case op_kind::sub:
    case op_kind::mul:
    case op_kind::div:
    case op_kind::max:
    case op_kind::min:
    case op_kind::sqrt:
    case op_kind::select:
      return ft::rel_tol(1.2e-7, 0.0);  // correctly rounded or one rounding
    case op_kind::floor:
    case op_kind::ceil:
    case op_kind::trunc:
    case op_kind::round:
      return ft::rel_tol(0.0, 0.0);  // exact
    case op_kind::sin:
    case op_kind::cos:
      return ft::allclose(4e-7, 4e-7);
    // Results and operands below the normal range may flush to 0.
    case op_kind::pow:
      return ft::allclose(std::numeric_limits<float>::min(), 2e-6);
    // The negative tails: erfc(-x / sqrt 2) and exp(-2u) of an argument rounded to float, whose
    // relative error grows with |x| (gelu_erf(-11.7) = -1.1e-31); gelu_tanh is 0 once exp(-2u)
    // would overflow (x below about -9.5, |exact value| < 2e-34; graph/ops.hpp).
    case op_kind::gelu_erf:
      return ft::rel_tol(1e-5, 0.0);
    case op_kind::gelu_tanh:
      return ft::allclose(2e-34, 1e-5);
    default:
      return ft::rel_tol(6e-7, 1e-30);
  }
}

template <op_kind K>
constexpr bool elementwise_body = g::op_traits<K>::has_body &&
                                  (g::is_unary(K) || g::is_binary(K) || g::is_compare(K) ||
                                   g::category_of(K) == g::op_category::select);

// The reference's value of K at element i.
template <op_kind K>
float reference_of(const std::vector<float>* in, std::size_t i) {
  if constexpr (g::is_unary(K)) {
    return ref::apply_unary(K, in[0][i]);
  } else if constexpr (g::is_compare(K)) {
    return ref::float_compare(K, in[0][i], in[1][i]) ? 1.0f : 0.0f;
  } else if constexpr (g::is_binary(K)) {
    float r = 0;
    ref::with_float_arithmetic(K, [&](auto fn) { r = fn(in[0][i], in[1][i]); });
    return r;
  } else {
    return in[0][i] != 0.0f ? in[1][i] : in[2][i];
  }
}

template <op_kind K, class Arch>
std::vector<float> vector_body(const std::vector<float>* in, std::size_t n) {
  using T = g::op_traits<K>;
  using V = typename k::simd<Arch>::vec;
  if constexpr (g::is_unary(K))
    return run_vector<Arch, 1>(in, n, [](V x) { return T::template apply<k::vec_math>(x); });
  else if constexpr (g::is_binary(K) || g::is_compare(K))
    return run_vector<Arch, 2>(in, n,
                               [](V x, V y) { return T::template apply<k::vec_math>(x, y); });
  else
    return run_vector<Arch, 3>(
        in, n, [](V p, V a, V b) { return T::template apply<k::vec_math>(p, a, b); });
}

template <op_kind K>
std::vector<float> scalar_body(const std::vector<float>* in, std::size_t n) {
  using T = g::op_traits<K>;
  using M = g::scalar::math;
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (g::is_unary(K))
      out[i] = T::template apply<M>(in[0][i]);
    else if constexpr (g::is_binary(K) || g::is_compare(K))
      out[i] = T::template apply<M>(in[0][i], in[1][i]);
    else
      out[i] = T::template apply<M>(in[0][i], in[1][i], in[2][i]);
  }
  return out;
}

constexpr bool is_rounding_kind(op_kind kind) {
  return kind == op_kind::floor || kind == op_kind::ceil || kind == op_kind::trunc ||
         kind == op_kind::round;
}

// Values where rounding goes wrong if it is done carelessly: halves (ties go to the even
// neighbour), the floats just below and above a half, the largest floats with a fraction
// (8388607.5 = 2^23 - 0.5), integers above 2^23 (where adding 0.5 rounds), and huge values.
std::vector<float> rounding_edges() {
  return {0.5f,       1.5f,       2.5f,       3.5f,       0.49999997f, 0.50000006f,
          1.4999999f, 2.5000002f, 8388607.5f, 8388607.0f, 8388609.0f,  16777215.0f,
          4194303.5f, 1e30f,      0.25f,      0.75f,      1e-45f,      100.5f};
}

// The inputs of K: for unary ops the edge and random values in a range that exercises the op; for
// binary ops every pair of edge values, then random pairs; for select a 0/1 predicate.
std::vector<std::vector<float>> operands_of(op_kind kind) {
  const bool wide = kind == op_kind::exp || kind == op_kind::sigmoid || kind == op_kind::silu ||
                    kind == op_kind::gelu_erf || kind == op_kind::gelu_tanh ||
                    kind == op_kind::tanh || kind == op_kind::erf;
  const float lo = kind == op_kind::log || kind == op_kind::sqrt || kind == op_kind::rsqrt
                       ? 0.0f
                       : (wide ? -30.0f : -6.0f);
  const float hi = wide ? 30.0f : 6.0f;
  if (is_rounding_kind(kind)) {  // ties, the last fractional floats and integers beyond 2^23
    std::vector<float> x = inputs(lo, hi, 1);
    for (float t : rounding_edges()) x.push_back(t), x.push_back(-t);
    return {x};
  }
  if (g::is_unary(kind)) return {inputs(lo, hi, 1)};
  const std::vector<float> e = inputs(lo, hi, 2);
  std::vector<float> x, y;
  for (std::size_t i = 0; i < 12; ++i)
    for (std::size_t j = 0; j < 12; ++j) x.push_back(e[i]), y.push_back(e[j]);
  const std::vector<float> rx = fusedsl_test::random_floats(41, 3, lo, hi),
                           ry = fusedsl_test::random_floats(41, 4, lo, hi);
  x.insert(x.end(), rx.begin(), rx.end());
  y.insert(y.end(), ry.begin(), ry.end());
  if (kind == op_kind::pow)  // positive bases, and x ** 2, x ** 0.5 on every base
    for (std::size_t i = 0; i < rx.size(); ++i)
      x.push_back(std::fabs(rx[i]) + 0.01f), y.push_back(ry[i] / 2), x.push_back(rx[i]),
          y.push_back(i % 2 ? 2.0f : 0.5f);
  if (kind == op_kind::eq || kind == op_kind::ne || kind == op_kind::le || kind == op_kind::ge)
    for (std::size_t i = 0; i < rx.size(); ++i) x.push_back(rx[i]), y.push_back(rx[i]);
  if (g::category_of(kind) != g::op_category::select) return {x, y};
  std::vector<float> p(x.size());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = float(i % 3 == 0);
  return {p, x, y};
}

template <op_kind K>
void check_op() {
  const std::vector<std::vector<float>> in = operands_of(K);
  const std::size_t n = in[0].size();
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = reference_of<K>(in.data(), i);
  const ft::tolerance tol = tolerance_of(K);
  INFO(std::string(g::name_of(K)) << " on " << n << " elements, "
                                  << std::string(k::native_arch::name()));
  CHECK(ft::compare(vector_body<K, k::native_arch>(in.data(), n), want, tol, ft::nans::expected));
  CHECK(ft::compare(vector_body<K, k::scalar_arch>(in.data(), n), want, tol, ft::nans::expected));
  CHECK(ft::compare(scalar_body<K>(in.data(), n), want, tol, ft::nans::expected));
}

template <op_kind K>
int check_if_elementwise() {
  if constexpr (elementwise_body<K>) {
    check_op<K>();
    return 1;
  } else {
    return 0;
  }
}

template <std::size_t... I>
int check_all(std::index_sequence<I...>) {
  return (check_if_elementwise<op_kind(I)>() + ...);
}

}  // namespace

TEST_CASE("every elementwise op of the table: vector and scalar bodies match the reference") {
  const int checked = check_all(std::make_index_sequence<g::op_count>{});
  // neg ... cos (15), floor ... round (4), add ... pow (7), eq ... ge (6), select.
  CHECK(checked == 33);
}

// The rounding ops keep the sign of zero (round(-0.4) is -0, as IEEE's roundToIntegral and XLA's
// are), which an exact comparison of values does not see.
TEST_CASE("floor, ceil, trunc and round keep the sign of zero on every path") {
  struct signed_case {
    op_kind op;
    float x;
    bool negative;  // the sign of the zero result
  };
  const signed_case cases[] = {
      {op_kind::floor, -0.0f, true}, {op_kind::floor, 0.3f, false}, {op_kind::ceil, -0.3f, true},
      {op_kind::ceil, -0.0f, true},  {op_kind::ceil, 0.0f, false},  {op_kind::trunc, -0.7f, true},
      {op_kind::trunc, 0.7f, false}, {op_kind::round, -0.4f, true}, {op_kind::round, -0.5f, true},
      {op_kind::round, 0.5f, false}, {op_kind::round, -0.0f, true},
  };
  for (const signed_case& c : cases) {
    INFO(std::string(g::name_of(c.op)) << "(" << c.x << ")");
    const std::vector<float> in[1] = {std::vector<float>(5, c.x)};
    // Every path on the same lanes (graph::visit_op: the run-time kind onto its body).
    const auto got = g::visit_op(c.op, [&](auto kind) {
      constexpr op_kind K = decltype(kind)::value;
      std::vector<std::vector<float>> r;
      if constexpr (is_rounding_kind(K))
        r = {vector_body<K, k::native_arch>(in, 5),
             vector_body<K, k::scalar_arch>(in, 5),
             scalar_body<K>(in, 5),
             {ref::apply_unary(K, c.x)}};
      return r;
    });
    for (const std::vector<float>& r : got)
      for (float v : r) {
        CHECK(v == 0.0f);
        CHECK(std::signbit(v) == c.negative);
      }
  }
}
