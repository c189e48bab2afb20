#include "fusedsl/backend/cpu/kernels/row.hpp"

#include <cstring>
#include <limits>
#include <vector>

#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;
using fusedsl_test::random_floats;

namespace {
constexpr float inf = std::numeric_limits<float>::infinity();
const std::ptrdiff_t col_sizes[] = {1, 7, 16, 17, 33, 65, 127, 300, 1030};

// layernorm reduces rows in groups of 8 (4 or 2 for long rows); these counts cover a partial
// group, one group and more.
const std::ptrdiff_t norm_row_counts[] = {1, 3, 8, 13};

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}
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
        CHECK(ft::compare(y[std::size_t(r * ld + j)], std::exp(double(xr[j]) - m) / s,
                          ft::rel_tol(1e-5, 1e-30)));
        CHECK(ft::compare(lsm[std::size_t(r * ld + j)], double(xr[j]) - m - std::log(s),
                          ft::rel_tol(1e-5)));
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
  for (std::ptrdiff_t rows : norm_row_counts)
    for (std::ptrdiff_t cols : col_sizes) {
      CAPTURE(rows);
      CAPTURE(cols);
      const std::ptrdiff_t ld = cols + 2;
      auto x = random_floats(std::size_t(rows * ld), 5, -4, 6);
      auto g = random_floats(std::size_t(cols), 6), b = random_floats(std::size_t(cols), 7);
      std::vector<float> ln(x.size()), ln_plain(x.size()), rms(x.size());
      k::layernorm_rows<Arch>(rows, cols, x.data(), ld, g.data(), b.data(), 1e-5f, ln.data(), ld);
      k::layernorm_rows<Arch>(rows, cols, x.data(), ld, nullptr, nullptr, 1e-5f, ln_plain.data(),
                              ld);
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
          CHECK(ft::compare(ln_plain[i], n, ft::rel_tol(1e-5)));
          CHECK(ft::compare(ln[i], n * g[std::size_t(j)] + b[std::size_t(j)], ft::rel_tol(1e-5)));
          CHECK(ft::compare(rms[i], xr[j] / std::sqrt(ms + 1e-6) * g[std::size_t(j)],
                            ft::rel_tol(1e-5)));
        }
      }
    }
}

TEST_CASE_TEMPLATE("a norm row's result is bitwise the same alone and inside any batch of rows",
                   Arch, FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t rows : {1, 3, 5, 8, 9, 17, 129})
    for (std::ptrdiff_t cols : {1, 17, 128, 130, 300, 1030}) {
      CAPTURE(rows);
      CAPTURE(cols);
      const std::ptrdiff_t ld = cols + 3;
      auto x = random_floats(std::size_t(rows * ld), 11, -3, 5);
      auto g = random_floats(std::size_t(cols), 12), b = random_floats(std::size_t(cols), 13);
      std::vector<float> ln(x.size()), ln_plain(x.size()), rms(x.size()),
          one(static_cast<std::size_t>(cols));
      k::layernorm_rows<Arch>(rows, cols, x.data(), ld, g.data(), b.data(), 1e-5f, ln.data(), ld);
      k::layernorm_rows<Arch>(rows, cols, x.data(), ld, nullptr, nullptr, 1e-5f, ln_plain.data(),
                              ld);
      k::rmsnorm_rows<Arch>(rows, cols, x.data(), ld, g.data(), 1e-6f, rms.data(), ld);
      bool ln_same = true, ln_plain_same = true, rms_same = true;
      for (std::ptrdiff_t r = 0; r < rows; ++r) {
        const float* xr = &x[std::size_t(r * ld)];
        k::layernorm_rows<Arch>(1, cols, xr, ld, g.data(), b.data(), 1e-5f, one.data(), cols);
        for (std::ptrdiff_t j = 0; j < cols; ++j)
          ln_same = ln_same && same_bits(ln[std::size_t(r * ld + j)], one[std::size_t(j)]);
        k::layernorm_rows<Arch>(1, cols, xr, ld, nullptr, nullptr, 1e-5f, one.data(), cols);
        for (std::ptrdiff_t j = 0; j < cols; ++j)
          ln_plain_same =
              ln_plain_same && same_bits(ln_plain[std::size_t(r * ld + j)], one[std::size_t(j)]);
        k::rmsnorm_rows<Arch>(1, cols, xr, ld, g.data(), 1e-6f, one.data(), cols);
        for (std::ptrdiff_t j = 0; j < cols; ++j)
          rms_same = rms_same && same_bits(rms[std::size_t(r * ld + j)], one[std::size_t(j)]);
      }
      CHECK(ln_same);
      CHECK(ln_plain_same);
      CHECK(rms_same);
    }
}

TEST_CASE_TEMPLATE(
    "a NaN or inf makes its norm row NaN and leaves the other rows of its batch alone", Arch,
    FUSEDSL_CPU_ARCHS) {
  const std::ptrdiff_t rows = 10, cols = 21;
  auto x = random_floats(std::size_t(rows * cols), 14);
  x[std::size_t(2 * cols + 5)] = std::nanf("");  // row 2
  x[std::size_t(6 * cols + 20)] = inf;           // row 6: inf - mean(inf) is NaN
  x[std::size_t(9 * cols)] = -inf;               // row 9, outside the first group of 8
  std::vector<float> ln(x.size()), rms(x.size());
  k::layernorm_rows<Arch>(rows, cols, x.data(), cols, nullptr, nullptr, 1e-5f, ln.data(), cols);
  k::rmsnorm_rows<Arch>(rows, cols, x.data(), cols, nullptr, 1e-6f, rms.data(), cols);
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    CAPTURE(r);
    const bool bad = r == 2 || r == 6 || r == 9;
    for (std::ptrdiff_t j = 0; j < cols; ++j) {
      const std::size_t i = std::size_t(r * cols + j);
      CHECK(std::isnan(ln[i]) == bad);
      if (!bad) CHECK(std::isfinite(rms[i]));
    }
  }
  for (std::ptrdiff_t j = 0; j < cols; ++j) CHECK(std::isnan(rms[std::size_t(2 * cols + j)]));
}

TEST_CASE_TEMPLATE("layernorm and rmsnorm work in place across row groups", Arch,
                   FUSEDSL_CPU_ARCHS) {
  const std::ptrdiff_t rows = 19, cols = 40;
  auto x = random_floats(std::size_t(rows * cols), 15), x2 = x;
  auto g = random_floats(std::size_t(cols), 16), b = random_floats(std::size_t(cols), 17);
  std::vector<float> y(x.size()), y2(x.size());
  k::layernorm_rows<Arch>(rows, cols, x.data(), cols, g.data(), b.data(), 1e-5f, y.data(), cols);
  k::layernorm_rows<Arch>(rows, cols, x.data(), cols, g.data(), b.data(), 1e-5f, x.data(), cols);
  CHECK(x == y);
  k::rmsnorm_rows<Arch>(rows, cols, x2.data(), cols, g.data(), 1e-6f, y2.data(), cols);
  k::rmsnorm_rows<Arch>(rows, cols, x2.data(), cols, g.data(), 1e-6f, x2.data(), cols);
  CHECK(x2 == y2);
}

TEST_CASE("layernorm of a constant row is beta; row kernels reject bad sizes") {
  std::vector<float> x(20, 3.0f), b(20, 0.5f), y(20);
  k::layernorm_rows(1, 20, x.data(), 20, nullptr, b.data(), 1e-5f, y.data(), 20);
  for (float v : y) CHECK(v == 0.5f);
  CHECK_THROWS_AS(k::softmax_rows(1, 20, x.data(), 10, y.data(), 20), std::invalid_argument);
  CHECK_THROWS_AS(k::rmsnorm_rows(-1, 20, x.data(), 20, nullptr, 1e-5f, y.data(), 20),
                  std::invalid_argument);
}
