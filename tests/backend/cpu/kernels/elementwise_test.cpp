#include "fusedsl/backend/cpu/kernels/elementwise.hpp"

#include <string>

#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;
using fusedsl_test::random_floats;

TEST_CASE_TEMPLATE("map fuses a bias + gelu + residual chain with row broadcast", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t cols : {1, 7, 16, 17, 33, 65}) {
    const std::ptrdiff_t rows = 5, ld = cols + 3;
    auto x = random_floats(std::size_t(rows * ld), 1, -3, 3);
    auto res = random_floats(std::size_t(rows * ld), 2);
    auto bias = random_floats(std::size_t(cols), 3);
    std::vector<float> y(std::size_t(rows * ld), 42.0f);
    k::map<Arch>(
        rows, cols, [](auto a, auto b, auto r) { return k::gelu_erf(a + b) + r; }, y.data(), ld,
        k::input{x.data(), ld}, k::input{bias.data(), 0}, k::input{res.data(), ld});
    for (std::ptrdiff_t r = 0; r < rows; ++r) {
      for (std::ptrdiff_t j = 0; j < cols; ++j) {
        const double a = double(x[std::size_t(r * ld + j)]) + bias[std::size_t(j)];
        const double want =
            0.5 * a * (1 + std::erf(a / std::sqrt(2.0))) + res[std::size_t(r * ld + j)];
        CHECK(ft::compare(y[std::size_t(r * ld + j)], want, ft::rel_tol(1e-5)));
      }
      for (std::ptrdiff_t j = cols; j < ld; ++j) CHECK(y[std::size_t(r * ld + j)] == 42.0f);
    }
  }
}

TEST_CASE_TEMPLATE("map in place over a contiguous range", Arch, FUSEDSL_CPU_ARCHS) {
  auto x = random_floats(37, 4);
  const auto x0 = x;
  k::map<Arch>(
      37, [](auto a) { return a * a + decltype(a)(1.0f); }, x.data(), x.data());
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(ft::compare(x[i], x0[i] * x0[i] + 1.0f, ft::rel_tol(1e-6)));
}

TEST_CASE("map rejects negative sizes and null inputs") {
  float y[4];
  CHECK_THROWS_AS(k::map(
                      -1, 4, [](auto a) { return a; }, y, 4, k::input{y, 4}),
                  std::invalid_argument);
  CHECK_THROWS_AS(k::map(
                      1, 4, [](auto a) { return a; }, y, 4, k::input{nullptr, 4}),
                  std::invalid_argument);
}

TEST_CASE("instruction_set names the kernels' instruction set, which the target flags choose") {
  const std::string set = fusedsl::cpu::instruction_set();
  constexpr int width = k::simd<k::native_arch>::width;
#if defined(FUSEDSL_CPU_FORCE_SCALAR)
  CHECK(set == "scalar");
  CHECK(width == 1);
#elif defined(__AVX512F__)
  CHECK(set == "avx512f");
  CHECK(width == 16);
#elif defined(__AVX2__) && defined(__FMA__)
  CHECK(set == "fma3+avx2");
  CHECK(width == 8);
#elif defined(__SSE2__)
  CHECK(set == "sse2");
  CHECK(width == 4);
#elif defined(__aarch64__) && defined(__ARM_NEON)
  CHECK(set == "arm64+neon");
  CHECK(width == 4);
#else
  CHECK(set == "scalar");
  CHECK(width == 1);
#endif
}
