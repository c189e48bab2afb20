// softmax, log_softmax, layernorm and rmsnorm against their formulas in double, and the defined
// results at the edges: a row entirely -inf under a mask, NaN in a row.
#include <limits>

#include "../common/test_util.hpp"

namespace {

constexpr double ninf = -std::numeric_limits<double>::infinity();
constexpr auto x = fd::input<"x", float, 3, 4, 5>();

// softmax (or log_softmax) of xv along axis, in double.
std::vector<double> softmax_ref(const fd::tensor<float, 3, 4, 5>& xv, int axis, bool log) {
  const fd::dims s = fd::make_dims(3, 4, 5);
  std::vector<double> out(60);
  const std::int64_t st = s.stride(axis), len = s[axis];
  for (std::int64_t i = 0; i < 60; ++i) {
    if ((i / st) % len != 0) continue;  // i is the first element of its row
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < len; ++j) m = std::max(m, double(xv[i + j * st]));
    double sum = 0;
    for (std::int64_t j = 0; j < len; ++j) sum += std::exp(double(xv[i + j * st]) - m);
    for (std::int64_t j = 0; j < len; ++j) {
      const double v = double(xv[i + j * st]) - m;
      out[std::size_t(i + j * st)] = log ? v - std::log(sum) : std::exp(v) / sum;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("softmax along each axis matches exp(x - max) / sum") {
  auto xv = test::random_tensor<float, 3, 4, 5>(1, -4, 4);
  auto outs = fd::reference::run(
      fd::flatten(fd::softmax<0>(x), fd::softmax<1>(x), fd::softmax<2>(x)), {{"x", xv}});
  REQUIRE(outs.size() == 3);
  test::check_close(outs[0], softmax_ref(xv, 0, false), 1e-6, 1e-5);
  test::check_close(outs[1], softmax_ref(xv, 1, false), 1e-6, 1e-5);
  test::check_close(outs[2], softmax_ref(xv, 2, false), 1e-6, 1e-5);
  auto last = fd::reference::run(fd::flatten(fd::softmax(x)),
                                 {{"x", xv}});  // the default axis is the last
  test::check_close(last[0], softmax_ref(xv, 2, false), 1e-6, 1e-5);
}

TEST_CASE("log_softmax matches x - max - log(sum)") {
  auto xv = test::random_tensor<float, 3, 4, 5>(2, -4, 4);
  auto outs = fd::reference::run(fd::flatten(fd::log_softmax<1>(x), fd::log_softmax(x)),
                                 {{"x", xv}});
  test::check_close(outs[0], softmax_ref(xv, 1, true), 1e-5, 1e-5);
  test::check_close(outs[1], softmax_ref(xv, 2, true), 1e-5, 1e-5);
}

TEST_CASE("softmax is stable for large logits") {
  auto xv =
      test::random_tensor<float, 3, 4, 5>(3, 80, 100);  // exp(100) overflows f32 without the shift
  auto out = fd::reference::run(fd::flatten(fd::softmax(x)), {{"x", xv}});
  test::check_close(out[0], softmax_ref(xv, 2, false), 1e-6, 1e-5);
}

TEST_CASE("a softmax row that is entirely -inf under a mask gives zeros; log_softmax gives -inf") {
  constexpr auto s = fd::input<"s", float, 4, 6>();
  constexpr auto keep = fd::input<"keep", bool, 4, 6>();
  constexpr auto masked = fd::where(keep, s, fd::lit<-std::numeric_limits<double>::infinity()>);
  auto sv = test::random_tensor<float, 4, 6>(4);
  fd::tensor<bool, 4, 6> kv;
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 6; ++j) kv(r, j) = r != 2 && j <= r + 1;  // row 2 keeps nothing
  auto outs = fd::reference::run(fd::flatten(fd::softmax(masked), fd::log_softmax(masked)),
                                 {{"s", sv}, {"keep", kv}});
  std::vector<double> want(24), want_log(24);
  for (int r = 0; r < 4; ++r) {
    double m = ninf, sum = 0;
    for (int j = 0; j < 6; ++j)
      if (kv(r, j)) m = std::max(m, double(sv(r, j)));
    for (int j = 0; j < 6; ++j)
      if (kv(r, j)) sum += std::exp(double(sv(r, j)) - m);
    for (int j = 0; j < 6; ++j) {
      want[std::size_t(r * 6 + j)] = kv(r, j) ? std::exp(double(sv(r, j)) - m) / sum : 0.0;
      want_log[std::size_t(r * 6 + j)] = kv(r, j) ? double(sv(r, j)) - m - std::log(sum) : ninf;
    }
  }
  test::check_close(outs[0], want, 1e-6, 1e-5);
  test::check_close(outs[1], want_log, 1e-5, 1e-5);
  const auto p = test::values(outs[0]);
  for (int j = 0; j < 6; ++j) CHECK(p[std::size_t(12 + j)] == 0.0f);  // exactly zero, not NaN
}

TEST_CASE("NaN anywhere in a row makes that softmax row NaN and leaves the others alone") {
  auto xv = test::random_tensor<float, 3, 4, 5>(5);
  xv(1, 2, 3) = std::numeric_limits<float>::quiet_NaN();
  auto out = fd::reference::run(fd::flatten(fd::softmax(x)), {{"x", xv}});
  const auto p = test::values(out[0]);
  for (int j = 0; j < 5; ++j)
    CHECK(std::isnan(p[std::size_t(test::offset(fd::make_dims(3, 4, 5), {1, 2, j}))]));
  for (int j = 0; j < 5; ++j)
    CHECK(!std::isnan(p[std::size_t(test::offset(fd::make_dims(3, 4, 5), {1, 1, j}))]));
}

TEST_CASE("layernorm and rmsnorm match their formulas over the last axis") {
  constexpr auto g = fd::param<"g", float, 5>();
  constexpr auto b = fd::param<"b", float, 5>();
  auto xv = test::random_tensor<float, 3, 4, 5>(6, -3, 3);
  auto gv = test::random_tensor<float, 5>(7, 0.5f, 1.5f);
  auto bv = test::random_tensor<float, 5>(8);
  auto outs = fd::reference::run(
      fd::flatten(fd::layernorm(x, g, b), fd::rmsnorm(x, g), fd::layernorm<0.5>(x, g, b)),
      {{"x", xv}, {"g", gv}, {"b", bv}});
  std::vector<double> ln(60), rms(60), ln_big_eps(60);
  for (int r = 0; r < 12; ++r) {
    double mu = 0, ms = 0, var = 0;
    for (int j = 0; j < 5; ++j) mu += xv[r * 5 + j] / 5.0;
    for (int j = 0; j < 5; ++j) {
      var += (xv[r * 5 + j] - mu) * (xv[r * 5 + j] - mu) / 5.0;
      ms += double(xv[r * 5 + j]) * xv[r * 5 + j] / 5.0;
    }
    for (int j = 0; j < 5; ++j) {
      const std::size_t i = std::size_t(r * 5 + j);
      ln[i] = (xv[r * 5 + j] - mu) / std::sqrt(var + 1e-5) * gv[j] + bv[j];
      ln_big_eps[i] = (xv[r * 5 + j] - mu) / std::sqrt(var + 0.5) * gv[j] + bv[j];
      rms[i] = xv[r * 5 + j] / std::sqrt(ms + 1e-6) * gv[j];
    }
  }
  test::check_close(outs[0], ln, 1e-5, 1e-5);
  test::check_close(outs[1], rms, 1e-5, 1e-5);
  test::check_close(outs[2], ln_big_eps, 1e-5, 1e-5);
}

TEST_CASE("a constant row normalises to beta (variance 0 meets eps)") {
  constexpr auto g = fd::param<"g", float, 5>();
  constexpr auto b = fd::param<"b", float, 5>();
  fd::tensor<float, 3, 4, 5> xv;
  for (int i = 0; i < 60; ++i) xv[i] = 7.0f;
  auto gv = test::random_tensor<float, 5>(9);
  auto bv = test::random_tensor<float, 5>(10);
  auto out = fd::reference::run(fd::flatten(fd::layernorm(x, g, b)),
                                {{"x", xv}, {"g", gv}, {"b", bv}});
  std::vector<double> want(60);
  for (int i = 0; i < 60; ++i) want[std::size_t(i)] = bv[i % 5];
  test::check_close(out[0], want, 0);
}

TEST_CASE("bf16 softmax and layernorm stay within bf16 rounding of the f32 result") {
  constexpr auto h = fd::input<"x", fd::bf16, 4, 32>();
  constexpr auto g = fd::param<"g", fd::bf16, 32>();
  constexpr auto b = fd::param<"b", fd::bf16, 32>();
  auto xf = test::random_tensor<float, 4, 32>(11, -3, 3);
  fd::tensor<fd::bf16, 4, 32> hv;
  fd::tensor<fd::bf16, 32> gv, bv;
  for (int i = 0; i < 128; ++i) hv[i] = fd::bf16(xf[i]);
  for (int i = 0; i < 32; ++i) {
    gv[i] = fd::bf16(1.0f + float(i) / 64);
    bv[i] = fd::bf16(float(i) / 32 - 0.5f);
  }
  auto outs = fd::reference::run(fd::flatten(fd::softmax(h), fd::layernorm(h, g, b)),
                                 {{"x", hv}, {"g", gv}, {"b", bv}});
  REQUIRE(outs[0].type() == fd::dtype::bf16);
  std::vector<double> sm(128), ln(128);
  for (int r = 0; r < 4; ++r) {
    double m = ninf, sum = 0, mu = 0, var = 0;
    for (int j = 0; j < 32; ++j) m = std::max(m, double(float(hv(r, j))));
    for (int j = 0; j < 32; ++j) sum += std::exp(double(float(hv(r, j))) - m);
    for (int j = 0; j < 32; ++j) mu += double(float(hv(r, j))) / 32;
    for (int j = 0; j < 32; ++j) var += std::pow(double(float(hv(r, j))) - mu, 2) / 32;
    for (int j = 0; j < 32; ++j) {
      sm[std::size_t(r * 32 + j)] = std::exp(double(float(hv(r, j))) - m) / sum;
      ln[std::size_t(r * 32 + j)] =
          (double(float(hv(r, j))) - mu) / std::sqrt(var + 1e-5) * double(float(gv[j])) +
          double(float(bv[j]));
    }
  }
  // Each primitive rounds to bf16 (8 bits of mantissa): a few ulps of 2^-8 in all.
  test::check_close(outs[0], sm, 2e-3, 3e-2);
  test::check_close(outs[1], ln, 3e-2, 3e-2);
}
