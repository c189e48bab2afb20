#pragma once
// Shared by the tests of the DSL, the graph and the reference backend: random tensors, element
// access as f32, the comparison of a tensor with expected values (compare.hpp's rules).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compare.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/fusedsl.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;

namespace test {

// A tensor of uniform random values in [lo, hi), rounded to T.
template <class T, std::int64_t... Ds>
fd::tensor<T, Ds...> random_tensor(unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  fd::tensor<T, Ds...> t;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = T(dist(gen));
  return t;
}

// Every element of a tensor as f32 (pred and i32 converted).
inline std::vector<float> values(const fd::tensor_ref& t) {
  std::vector<float> r(std::size_t(t.shape.size()));
  for (std::size_t i = 0; i < r.size(); ++i) {
    switch (t.type) {
      case fd::dtype::f32:
        r[i] = t.as<const float>()[i];
        break;
      case fd::dtype::bf16:
        r[i] = float(t.as<const fd::bf16>()[i]);
        break;
      case fd::dtype::f16:
        r[i] = float(t.as<const fd::f16>()[i]);
        break;
      case fd::dtype::i32:
        r[i] = float(t.as<const std::int32_t>()[i]);
        break;
      case fd::dtype::boolean:
        r[i] = t.as<const bool>()[i] ? 1.0f : 0.0f;
        break;
      case fd::dtype::i8:
        r[i] = float(t.as<const std::int8_t>()[i]);
        break;
      case fd::dtype::u8:
        r[i] = float(t.as<const std::uint8_t>()[i]);
        break;
    }
  }
  return r;
}
inline std::vector<float> values(fd::dynamic_tensor& t) {
  return values(t.ref());
}

// Checks every element of a tensor: |got - want| <= atol + rtol |want| (ft::allclose), an infinity
// the same infinity, NaN only where the test passes ft::nans::expected.
inline void check_close(fd::dynamic_tensor& got, const std::vector<double>& want, double atol,
                        double rtol = 0.0, ft::nans policy = ft::nans::unexpected) {
  CHECK(ft::compare(values(got), want, ft::allclose(atol, rtol), policy));
}

// Row-major offset of a multi-index in a shape.
inline std::int64_t offset(const fd::dims& s, std::initializer_list<std::int64_t> idx) {
  std::int64_t o = 0;
  int a = 0;
  for (std::int64_t i : idx) o += i * s.stride(a++);
  return o;
}

}  // namespace test
