// compare.hpp: the rules every numeric test relies on, one by one.
#include "compare.hpp"

#include <doctest/doctest.h>

#include <array>
#include <limits>
#include <string>
#include <vector>

#include "fusedsl/core/dtype.hpp"

namespace ft = fusedsl::test;

namespace {
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("compare fails on NaN or inf where the reference is finite") {
  const std::vector<double> want{1.0, 2.0, 3.0};
  CHECK_FALSE(ft::compare(std::vector<double>{1.0, qnan, 3.0}, want, ft::abs_tol(1e3)));
  CHECK_FALSE(ft::compare(std::vector<double>{1.0, 2.0, inf}, want, ft::abs_tol(1e3)));
  CHECK_FALSE(ft::compare(std::vector<double>{-inf, 2.0, 3.0}, want, ft::rel_tol(1e3)));
  CHECK_FALSE(ft::compare(qnan, 0.0, ft::abs_tol(inf)));  // even an infinite tolerance
  CHECK_FALSE(ft::compare(qnan, 1.0, ft::abs_tol(1.0), ft::nans::expected));
}

TEST_CASE("compare reports the failing element even after a later finite one") {
  // A max(worst, err) fold would forget the NaN once a finite error follows it.
  const auto c = ft::compare(std::vector<float>{1.0f, float(qnan), 3.5f, 3.0f},
                             std::vector<float>{1.0f, 2.0f, 3.0f, 3.0f}, ft::abs_tol(0.1));
  CHECK_FALSE(c);
  CHECK(c.failures == 2);
  CHECK(c.worst == 1);
  CHECK(c.max_error == inf);
  const std::string text = c.text();
  CHECK(text.find("2 of 4 elements outside the tolerance") != std::string::npos);
  CHECK(text.find("worst at index 1: got nan, want 2") != std::string::npos);
  CHECK(text.find("atol 0.1") != std::string::npos);
}

TEST_CASE("compare passes equal infinities and fails on the other sign or a finite value") {
  CHECK(ft::compare(std::vector<double>{inf, -inf}, std::vector<double>{inf, -inf}, ft::exact()));
  CHECK_FALSE(ft::compare(inf, -inf, ft::abs_tol(1.0)));
  CHECK_FALSE(ft::compare(-inf, inf, ft::abs_tol(1.0)));
  CHECK_FALSE(ft::compare(1e308, inf, ft::rel_tol(1.0)));
  CHECK_FALSE(ft::compare(qnan, inf, ft::abs_tol(1.0), ft::nans::expected));
}

TEST_CASE("NaN in the reference passes only when the test says NaN is expected") {
  const std::vector<double> want{qnan, 1.0};
  const auto unexpected = ft::compare(std::vector<double>{qnan, 1.0}, want, ft::abs_tol(0.0));
  CHECK_FALSE(unexpected);
  CHECK(unexpected.text().find("reference holds NaN at index 0") != std::string::npos);
  CHECK(ft::compare(std::vector<double>{qnan, 1.0}, want, ft::abs_tol(0.0), ft::nans::expected));
  CHECK_FALSE(
      ft::compare(std::vector<double>{0.0, 1.0}, want, ft::abs_tol(1.0), ft::nans::expected));
  CHECK_FALSE(ft::compare(inf, qnan, ft::abs_tol(1.0), ft::nans::expected));
}

TEST_CASE("tolerances: absolute, relative with a floor, numpy.allclose, exact, per element") {
  CHECK(ft::compare(1.05, 1.0, ft::abs_tol(0.051)));
  CHECK_FALSE(ft::compare(1.05, 1.0, ft::abs_tol(0.049)));
  CHECK(ft::compare(1010.0, 1000.0, ft::rel_tol(0.011)));
  CHECK_FALSE(ft::compare(1010.0, 1000.0, ft::rel_tol(0.009)));
  CHECK(ft::compare(0.01, 0.0, ft::rel_tol(0.011)));               // floor 1: absolute near 0
  CHECK_FALSE(ft::compare(0.01, 0.0, ft::rel_tol(0.011, 1e-30)));  // no floor: relative
  CHECK(ft::compare(2.19, 2.0, ft::allclose(0.1, 0.05)));           // 0.1 + 0.05 * 2
  CHECK_FALSE(ft::compare(2.21, 2.0, ft::allclose(0.1, 0.05)));
  CHECK(ft::compare(3.0f, 3.0, ft::exact()));
  CHECK_FALSE(ft::compare(std::nextafter(3.0f, 4.0f), 3.0, ft::exact()));
  const std::array<double, 3> want{1, 2, 3}, scale{1, 10, 100};
  CHECK(ft::compare_scaled(std::array<double, 3>{1.5, 6, 52}, want, scale, 0.5));
  const auto c = ft::compare_scaled(std::array<double, 3>{1.5, 8, 52}, want, scale, 0.5);
  CHECK_FALSE(c);
  CHECK(c.worst == 1);
  CHECK(c.allowed == 5.0);
  CHECK_FALSE(ft::compare_scaled(std::array<double, 3>{1, 2, qnan}, want, scale, 0.5));
}

TEST_CASE("compare reads bf16 and f16 values and rejects a length mismatch") {
  const std::vector<fusedsl::bf16> got{fusedsl::bf16(1.0f), fusedsl::bf16(0.5f)};
  CHECK(ft::compare(got, std::vector<float>{1.0f, 0.5f}, ft::exact()));
  const std::vector<fusedsl::f16> half{fusedsl::f16(2.0f)};
  CHECK(ft::compare(half, std::vector<double>{2.0}, ft::exact()));
  const auto c = ft::compare(std::vector<double>{1.0}, std::vector<double>{1.0, 2.0}, ft::exact());
  CHECK_FALSE(c);
  CHECK(c.text().find("got has 1 elements, want 2") != std::string::npos);
}

TEST_CASE("max_abs gives the finite scale of a reference") {
  CHECK(ft::max_abs(std::vector<double>{-3.0, qnan, inf, 2.0}) == 3.0);
  CHECK(ft::max_abs(std::vector<double>{0.25}) == 1.0);  // the floor
  CHECK(ft::max_abs(std::vector<double>{0.25}, 0.0) == 0.25);
}

TEST_CASE("compare_rel_l2 is norm-wise and fails on any non-finite element") {
  const std::vector<double> want{3.0, 4.0};  // norm 5
  CHECK(ft::compare_rel_l2(std::vector<double>{3.0, 4.04}, want, 1e-2));
  CHECK_FALSE(ft::compare_rel_l2(std::vector<double>{3.0, 4.1}, want, 1e-2));
  const auto n = ft::compare_rel_l2(std::vector<double>{qnan, 4.0}, want, 1e9);
  CHECK_FALSE(n);
  CHECK(n.worst == 0);
  CHECK(n.max_error == inf);
  CHECK_FALSE(ft::compare_rel_l2(std::vector<double>{inf, 4.0}, want, 1e9));
  CHECK_FALSE(
      ft::compare_rel_l2(std::vector<double>{3.0, 4.0}, std::vector<double>{qnan, 4.0}, 1e9));
  CHECK(ft::compare_rel_l2(std::vector<double>{0.0}, std::vector<double>{0.0}, 0.0));
}
