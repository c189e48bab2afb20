#include "fusedsl/backend/cpu/kernels/row.hpp"

#include <limits>
#include <vector>

#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;
using fusedsl_test::close;
using fusedsl_test::random_floats;

namespace {
constexpr float inf = std::numeric_limits<float>::infinity();
const std::ptrdiff_t col_sizes[] = {1, 7, 16, 17, 33, 65, 127, 300};
}  // namespace

TEST_CASE_TEMPLATE("softmax rows match the reference within 1e-5 relative", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t cols : col_sizes) {
    const std::ptrdiff_t rows = 4, ld = cols + 5;
    auto x = random_floats(std::size_t(rows * ld), 1, -20, 20);
    std::vector<float> y(x.size());
    k::softmax_rows<Arch>(rows, cols, x.data(), ld, y.data(), ld);
    std::vector<float> lsm(x.size());
    k::log_softmax_rows<Arch>(rows, cols, x.data(), ld, lsm.data(), ld);
    for (std::ptrdiff_t r = 0; r < rows; ++r) {
      const float* xr = &x[std::size_t(r * ld)];
      double m = -1e300, s = 0;
      for (std::ptrdiff_t j = 0; j < cols; ++j) m = std::max(m, double(xr[j]));
      for (std::ptrdiff_t j = 0; j < cols; ++j) s += std::exp(double(xr[j]) - m);
      for (std::ptrdiff_t j = 0; j < cols; ++j) {
        CHECK(close(y[std::size_t(r * ld + j)], std::exp(double(xr[j]) - m) / s, 1e-5, 1e-30));
        CHECK(close(lsm[std::size_t(r * ld + j)], double(xr[j]) - m - std::log(s), 1e-5));
      }
    }
  }
}

TEST_CASE_TEMPLATE("softmax of a fully masked row is zeros, log_softmax of it is -inf", Arch,
                   FUSEDSL_CPU_ARCHS) {
  std::vector<float> x(2 * 19, -inf), y(x.size(), 5.0f), ly(x.size());
  for (int j = 0; j < 19; ++j) x[std::size_t(19 + j)] = j == 3 ? 0.0f : -inf;  // row 1: one live
  k::softmax_rows<Arch>(2, 19, x.data(), 19, y.data(), 19);
  k::log_softmax_rows<Arch>(2, 19, x.data(), 19, ly.data(), 19);
  for (int j = 0; j < 19; ++j) {
    CHECK(y[std::size_t(j)] == 0.0f);
    CHECK(ly[std::size_t(j)] == -inf);
    CHECK(y[std::size_t(19 + j)] == (j == 3 ? 1.0f : 0.0f));
  }
}

TEST_CASE_TEMPLATE("a NaN makes its softmax row NaN and leaves other rows alone", Arch,
                   FUSEDSL_CPU_ARCHS) {
  auto x = random_floats(2 * 40, 3);
  x[17] = std::nanf("");
  std::vector<float> y(x.size());
  k::softmax_rows<Arch>(2, 40, x.data(), 40, y.data(), 40);
  for (int j = 0; j < 40; ++j) {
    CHECK(std::isnan(y[std::size_t(j)]));
    CHECK(std::isfinite(y[std::size_t(40 + j)]));
  }
}

TEST_CASE_TEMPLATE("softmax works in place", Arch, FUSEDSL_CPU_ARCHS) {
  auto x = random_floats(3 * 33, 4);
  std::vector<float> y(x.size());
  k::softmax_rows<Arch>(3, 33, x.data(), 33, y.data(), 33);
  k::softmax_rows<Arch>(3, 33, x.data(), 33, x.data(), 33);
  CHECK(x == y);
}

TEST_CASE_TEMPLATE("layernorm and rmsnorm rows match the reference within 1e-5", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t cols : col_sizes) {
    const std::ptrdiff_t rows = 3, ld = cols + 2;
    auto x = random_floats(std::size_t(rows * ld), 5, -4, 6);
    auto g = random_floats(std::size_t(cols), 6), b = random_floats(std::size_t(cols), 7);
    std::vector<float> ln(x.size()), ln_plain(x.size()), rms(x.size());
    k::layernorm_rows<Arch>(rows, cols, x.data(), ld, g.data(), b.data(), 1e-5f, ln.data(), ld);
    k::layernorm_rows<Arch>(rows, cols, x.data(), ld, nullptr, nullptr, 1e-5f, ln_plain.data(), ld);
    k::rmsnorm_rows<Arch>(rows, cols, x.data(), ld, g.data(), 1e-6f, rms.data(), ld);
    for (std::ptrdiff_t r = 0; r < rows; ++r) {
      const float* xr = &x[std::size_t(r * ld)];
      double mean = 0, var = 0, ms = 0;
      for (std::ptrdiff_t j = 0; j < cols; ++j) mean += xr[j], ms += double(xr[j]) * xr[j];
      mean /= double(cols), ms /= double(cols);
      for (std::ptrdiff_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
      var /= double(cols);
      for (std::ptrdiff_t j = 0; j < cols; ++j) {
        const double n = (xr[j] - mean) / std::sqrt(var + 1e-5);
        const std::size_t i = std::size_t(r * ld + j);
        CHECK(close(ln_plain[i], n, 1e-5));
        CHECK(close(ln[i], n * g[std::size_t(j)] + b[std::size_t(j)], 1e-5));
        CHECK(close(rms[i], xr[j] / std::sqrt(ms + 1e-6) * g[std::size_t(j)], 1e-5));
      }
    }
  }
}

TEST_CASE("layernorm of a constant row is beta; row kernels reject bad sizes") {
  std::vector<float> x(20, 3.0f), b(20, 0.5f), y(20);
  k::layernorm_rows(1, 20, x.data(), 20, nullptr, b.data(), 1e-5f, y.data(), 20);
  for (float v : y) CHECK(v == 0.5f);
  CHECK_THROWS_AS(k::softmax_rows(1, 20, x.data(), 10, y.data(), 20), std::invalid_argument);
  CHECK_THROWS_AS(k::rmsnorm_rows(-1, 20, x.data(), 20, nullptr, 1e-5f, y.data(), 20),
                  std::invalid_argument);
}
