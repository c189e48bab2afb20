// Elementwise ops of the reference backend against plain loops: unary functions, binary ops with
// every kind of broadcasting, comparisons and select, integer masks, and edge values.
#include <limits>

#include "../common/test_util.hpp"

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

constexpr auto x = fd::input<"x", float, 6, 7>();
constexpr auto y = fd::input<"y", float, 6, 7>();

template <class E>
fd::dynamic_tensor eval1(E e, fd::tensor_ref xv) {
  auto outs = fd::reference::run(fd::flatten(e), {{"x", xv}});
  return std::move(outs.at(0));
}
template <class E>
fd::dynamic_tensor eval2(E e, fd::tensor_ref xv, fd::tensor_ref yv) {
  auto outs = fd::reference::run(fd::flatten(e), {{"x", xv}, {"y", yv}});
  return std::move(outs.at(0));
}

template <class E, class F>
void check_unary(E e, F f, float lo, float hi) {
  auto xv = test::random_tensor<float, 6, 7>(11, lo, hi);
  std::vector<double> want(42);
  for (int i = 0; i < 42; ++i) want[std::size_t(i)] = f(double(xv[i]));
  auto got = eval1(e, xv);
  test::check_close(got, want, 1e-6, 1e-5);
}

}  // namespace

TEST_CASE("unary ops match their formulas on random data") {
  const double pi = 3.14159265358979323846;
  SUBCASE("neg") {
    check_unary(
        -x, [](double v) { return -v; }, -3, 3);
  }
  SUBCASE("abs") {
    check_unary(
        fd::abs(x), [](double v) { return std::abs(v); }, -3, 3);
  }
  SUBCASE("exp") {
    check_unary(
        fd::exp(x), [](double v) { return std::exp(v); }, -5, 5);
  }
  SUBCASE("log") {
    check_unary(
        fd::log(x), [](double v) { return std::log(v); }, 0.01f, 10);
  }
  SUBCASE("sqrt") {
    check_unary(
        fd::sqrt(x), [](double v) { return std::sqrt(v); }, 0, 10);
  }
  SUBCASE("rsqrt") {
    check_unary(
        fd::rsqrt(x), [](double v) { return 1 / std::sqrt(v); }, 0.01f, 10);
  }
  SUBCASE("tanh") {
    check_unary(
        fd::tanh(x), [](double v) { return std::tanh(v); }, -4, 4);
  }
  SUBCASE("erf") {
    check_unary(
        fd::erf(x), [](double v) { return std::erf(v); }, -3, 3);
  }
  SUBCASE("sigmoid") {
    check_unary(
        fd::sigmoid(x), [](double v) { return 1 / (1 + std::exp(-v)); }, -8, 8);
  }
  SUBCASE("relu") {
    check_unary(
        fd::relu(x), [](double v) { return v > 0 ? v : 0; }, -3, 3);
  }
  SUBCASE("silu") {
    check_unary(
        fd::silu(x), [](double v) { return v / (1 + std::exp(-v)); }, -8, 8);
  }
  SUBCASE("gelu (erf form)") {
    check_unary(
        fd::gelu(x), [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -4, 4);
  }
  SUBCASE("gelu (tanh form)") {
    check_unary(
        fd::gelu_tanh(x),
        [&](double v) {
          return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
        },
        -4, 4);
  }
}

TEST_CASE("binary ops on equal shapes match plain loops") {
  auto xv = test::random_tensor<float, 6, 7>(1, 0.5f, 2.0f);
  auto yv = test::random_tensor<float, 6, 7>(2, -2.0f, 2.0f);
  auto check = [&](auto e, auto f) {
    std::vector<double> want(42);
    for (int i = 0; i < 42; ++i) want[std::size_t(i)] = double(f(xv[i], yv[i]));
    auto got = eval2(e, xv, yv);
    test::check_close(got, want, 0, 0);  // one f32 operation: exactly what a loop computes
  };
  check(x + y, [](float a, float b) { return a + b; });
  check(x - y, [](float a, float b) { return a - b; });
  check(x * y, [](float a, float b) { return a * b; });
  check(x / y, [](float a, float b) { return a / b; });
  check(fd::max(x, y), [](float a, float b) { return a > b ? a : b; });
  check(fd::min(x, y), [](float a, float b) { return a < b ? a : b; });
  check(fd::pow(x, y), [](float a, float b) { return std::pow(a, b); });
}

TEST_CASE("binary ops broadcast like NumPy") {
  auto xv = test::random_tensor<float, 6, 7>(3);
  SUBCASE("a scalar constant") {
    std::vector<double> want(42);
    for (int i = 0; i < 42; ++i) want[std::size_t(i)] = double(xv[i] * 2.5f);
    auto got = eval1(x * fd::lit<2.5>, xv);
    test::check_close(got, want, 0);
  }
  SUBCASE("a scalar constant on the left") {
    std::vector<double> want(42);
    for (int i = 0; i < 42; ++i) want[std::size_t(i)] = double(1.0f - xv[i]);
    auto got = eval1(fd::lit<1.0> - x, xv);
    test::check_close(got, want, 0);
  }
  SUBCASE("a rank-0 input") {
    constexpr auto s = fd::input<"y", float>();
    fd::tensor<float> sv;
    sv[0] = -1.75f;
    std::vector<double> want(42);
    for (int i = 0; i < 42; ++i) want[std::size_t(i)] = double(xv[i] + sv[0]);
    auto got = eval2(x + s, xv, sv);
    CHECK(got.shape() == fd::make_dims(6, 7));
    test::check_close(got, want, 0);
  }
  SUBCASE("a row [7] over [6,7]") {
    constexpr auto r = fd::input<"y", float, 7>();
    auto rv = test::random_tensor<float, 7>(4);
    std::vector<double> want(42);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 7; ++j) want[std::size_t(i * 7 + j)] = double(xv(i, j) + rv(j));
    auto got = eval2(x + r, xv, rv);
    test::check_close(got, want, 0);
  }
  SUBCASE("a column [6,1] over [6,7]") {
    constexpr auto c = fd::input<"y", float, 6, 1>();
    auto cv = test::random_tensor<float, 6, 1>(5);
    std::vector<double> want(42);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 7; ++j) want[std::size_t(i * 7 + j)] = double(xv(i, j) - cv(i, 0));
    auto got = eval2(x - c, xv, cv);
    test::check_close(got, want, 0);
  }
  SUBCASE("a column times a row gives the outer product") {
    constexpr auto c = fd::input<"x", float, 6, 1>();
    constexpr auto r = fd::input<"y", float, 1, 7>();
    auto cv = test::random_tensor<float, 6, 1>(6);
    auto rv = test::random_tensor<float, 1, 7>(7);
    std::vector<double> want(42);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 7; ++j) want[std::size_t(i * 7 + j)] = double(cv(i, 0) * rv(0, j));
    auto got = eval2(c * r, cv, rv);
    CHECK(got.shape() == fd::make_dims(6, 7));
    test::check_close(got, want, 0);
  }
  SUBCASE("rank extension: [6,7] against [2,3,6,7] and [3,1,7]") {
    constexpr auto b = fd::input<"y", float, 2, 3, 6, 7>();
    auto bv = test::random_tensor<float, 2, 3, 6, 7>(8);
    std::vector<double> want(2 * 3 * 42);
    for (int n = 0; n < 6; ++n)
      for (int i = 0; i < 42; ++i) want[std::size_t(n * 42 + i)] = double(bv[n * 42 + i] / xv[i]);
    auto got = eval2(b / x, xv, bv);
    CHECK(got.shape() == fd::make_dims(2, 3, 6, 7));
    test::check_close(got, want, 0);

    constexpr auto m = fd::input<"y", float, 3, 1, 7>();
    auto mv = test::random_tensor<float, 3, 1, 7>(9);
    std::vector<double> want2(3 * 42);
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 7; ++j)
          want2[std::size_t((k * 6 + i) * 7 + j)] =
              double(xv(i, j) > mv(k, 0, j) ? xv(i, j) : mv(k, 0, j));
    auto got2 = eval2(fd::max(x, m), xv, mv);
    CHECK(got2.shape() == fd::make_dims(3, 6, 7));
    test::check_close(got2, want2, 0);
  }
}

TEST_CASE("comparisons give pred tensors and where selects elementwise") {
  auto xv = test::random_tensor<float, 6, 7>(21);
  auto yv = test::random_tensor<float, 6, 7>(22);
  xv[3] = yv[3];  // one tie, so that le/ge/eq see equality
  auto check = [&](auto e, auto f) {
    auto got = eval2(e, xv, yv);
    REQUIRE(got.type() == fd::dtype::boolean);
    std::vector<double> want(42);
    for (int i = 0; i < 42; ++i) want[std::size_t(i)] = f(xv[i], yv[i]) ? 1.0 : 0.0;
    test::check_close(got, want, 0);
  };
  check(x < y, [](float a, float b) { return a < b; });
  check(x <= y, [](float a, float b) { return a <= b; });
  check(x > y, [](float a, float b) { return a > b; });
  check(x >= y, [](float a, float b) { return a >= b; });
  check(fd::eq(x, y), [](float a, float b) { return a == b; });
  check(fd::ne(x, y), [](float a, float b) { return a != b; });

  std::vector<double> want(42);
  for (int i = 0; i < 42; ++i) want[std::size_t(i)] = xv[i] > yv[i] ? xv[i] : 0.0f;
  auto got = eval2(fd::where(x > y, x, fd::lit<0.0>), xv, yv);
  test::check_close(got, want, 0);
}

TEST_CASE("where broadcasts its predicate, and a causal mask from iota works in i32") {
  constexpr auto s = fd::input<"x", float, 2, 5, 5>();
  constexpr auto keep = fd::iota<std::int32_t, 0, 5, 5>() >= fd::iota<std::int32_t, 1, 5, 5>();
  constexpr auto masked = fd::where(keep, s, fd::lit<-1e9>);
  auto sv = test::random_tensor<float, 2, 5, 5>(31);
  std::vector<double> want(50);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j)
        want[std::size_t((h * 5 + i) * 5 + j)] = i >= j ? double(sv(h, i, j)) : double(-1e9f);
  auto got = eval1(masked, sv);
  test::check_close(got, want, 0);
}

TEST_CASE("i32 arithmetic is exact and integer division by zero is an error naming the node") {
  constexpr auto i = fd::iota<std::int32_t, 0, 3, 4>();
  constexpr auto j = fd::iota<std::int32_t, 1, 3, 4>();
  auto outs =
      fd::reference::run(fd::flatten(i * fd::lit<10.0> + j, fd::max(i, j), i - j), {});
  std::vector<double> a(12), b(12), c(12);
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 4; ++k) {
      a[std::size_t(r * 4 + k)] = 10 * r + k;
      b[std::size_t(r * 4 + k)] = r > k ? r : k;
      c[std::size_t(r * 4 + k)] = r - k;
    }
  REQUIRE(outs.size() == 3);
  CHECK(outs[0].type() == fd::dtype::i32);
  test::check_close(outs[0], a, 0);
  test::check_close(outs[1], b, 0);
  test::check_close(outs[2], c, 0);
  CHECK_THROWS_WITH_AS(fd::reference::run(fd::flatten(i / j), {}),
                       doctest::Contains("integer division by zero"), fd::error);
}

TEST_CASE("edge values: infinities and NaN follow IEEE arithmetic, max and min propagate NaN") {
  fd::tensor<float, 6, 7> xv, yv;
  for (int i = 0; i < 42; ++i) xv[i] = yv[i] = 1.0f;
  xv[0] = inf;
  yv[0] = inf;  // inf - inf = NaN
  xv[1] = qnan;
  yv[1] = 1.0f;  // NaN propagates
  xv[2] = 1.0f;
  yv[2] = 0.0f;  // 1/0 = inf
  xv[3] = -1.0f;
  yv[3] = qnan;  // max(-1, NaN) = NaN
  xv[4] = -inf;
  yv[4] = 5.0f;
  auto sub = eval2(x - y, xv, yv);
  auto div = eval2(x / y, xv, yv);
  auto mx = eval2(fd::max(x, y), xv, yv);
  auto mn = eval2(fd::min(x, y), xv, yv);
  const auto s = test::values(sub), d = test::values(div), M = test::values(mx),
             m = test::values(mn);
  CHECK(std::isnan(s[0]));
  CHECK(std::isnan(s[1]));
  CHECK(d[2] == inf);
  CHECK(std::isnan(M[1]));
  CHECK(std::isnan(M[3]));
  CHECK(std::isnan(m[1]));
  CHECK(std::isnan(m[3]));
  CHECK(M[4] == 5.0f);
  CHECK(m[4] == -inf);
  auto ex = eval1(fd::exp(x), xv);
  const auto e = test::values(ex);
  CHECK(e[4] == 0.0f);  // exp(-inf)
  CHECK(e[0] == inf);
  CHECK(std::isnan(e[1]));
  auto rl = eval1(fd::relu(x), xv);
  const auto r = test::values(rl);
  CHECK(std::isnan(r[1]));  // relu keeps NaN
  CHECK(r[4] == 0.0f);
}

TEST_CASE("floor, ceil, trunc and round (half to even) on ties, signed zeros and edge values") {
  struct row {
    float x, floor, ceil, trunc, round;
  };
  const row rows[] = {
      {0.5f, 0.0f, 1.0f, 0.0f, 0.0f},
      {1.5f, 1.0f, 2.0f, 1.0f, 2.0f},
      {2.5f, 2.0f, 3.0f, 2.0f, 2.0f},
      {-0.5f, -1.0f, -0.0f, -0.0f, -0.0f},
      {-1.5f, -2.0f, -1.0f, -1.0f, -2.0f},
      {-2.5f, -3.0f, -2.0f, -2.0f, -2.0f},
      {0.49999997f, 0.0f, 1.0f, 0.0f, 0.0f},
      {2.5000002f, 2.0f, 3.0f, 2.0f, 3.0f},
      {-2.7f, -3.0f, -2.0f, -2.0f, -3.0f},
      {8388607.5f, 8388607.0f, 8388608.0f, 8388607.0f, 8388608.0f},
      {-8388606.5f, -8388607.0f, -8388606.0f, -8388606.0f, -8388606.0f},
      {16777216.0f, 16777216.0f, 16777216.0f, 16777216.0f, 16777216.0f},
      {-0.0f, -0.0f, -0.0f, -0.0f, -0.0f},
      {1e-40f, 0.0f, 1.0f, 0.0f, 0.0f},
      {inf, inf, inf, inf, inf},
      {-inf, -inf, -inf, -inf, -inf},
  };
  fd::tensor<float, 6, 7> xv;
  for (int i = 0; i < 42; ++i) xv[i] = i < int(std::size(rows)) ? rows[i].x : qnan;
  auto fl = eval1(fd::floor(x), xv), ce = eval1(fd::ceil(x), xv), tr = eval1(fd::trunc(x), xv),
       ro = eval1(fd::round(x), xv);
  const auto f = test::values(fl), c = test::values(ce), t = test::values(tr), r = test::values(ro);
  for (std::size_t i = 0; i < 42; ++i) {
    CAPTURE(i);
    if (i >= std::size(rows)) {  // NaN stays NaN
      CHECK((std::isnan(f[i]) && std::isnan(c[i]) && std::isnan(t[i]) && std::isnan(r[i])));
      continue;
    }
    const row& w = rows[i];
    CAPTURE(w.x);
    const float want[4] = {w.floor, w.ceil, w.trunc, w.round};
    const float got[4] = {float(f[i]), float(c[i]), float(t[i]), float(r[i])};
    for (int k = 0; k < 4; ++k) {
      CHECK(got[k] == want[k]);
      CHECK(std::signbit(got[k]) == std::signbit(want[k]));
    }
  }
}

TEST_CASE("bf16 and f16 results are rounded to their dtype after every node") {
  auto xf = test::random_tensor<float, 6, 7>(41);
  fd::tensor<fd::bf16, 6, 7> xb;
  fd::tensor<fd::f16, 6, 7> xh;
  for (int i = 0; i < 42; ++i) {
    xb[i] = fd::bf16(xf[i]);
    xh[i] = fd::f16(xf[i]);
  }
  constexpr auto b = fd::input<"x", fd::bf16, 6, 7>();
  constexpr auto h = fd::input<"x", fd::f16, 6, 7>();
  // (x * 0.1) + x: the weak constant takes the tensor's dtype, each node rounds.
  auto gb = eval1((b * fd::lit<0.1>)+fd::exp(b), xb);
  auto gh = eval1((h * fd::lit<0.1>)+fd::exp(h), xh);
  REQUIRE(gb.type() == fd::dtype::bf16);
  REQUIRE(gh.type() == fd::dtype::f16);
  for (int i = 0; i < 42; ++i) {
    const float vb = float(xb[i]), vh = float(xh[i]);
    const float pb = float(fd::bf16(vb * float(fd::bf16(0.1f)))),
                eb = float(fd::bf16(std::exp(vb)));
    const float ph = float(fd::f16(vh * float(fd::f16(0.1f)))), eh = float(fd::f16(std::exp(vh)));
    CHECK(gb.data<fd::bf16>()[i] == fd::bf16(pb + eb));
    CHECK(gh.data<fd::f16>()[i] == fd::f16(ph + eh));
  }
}
