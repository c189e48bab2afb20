// Row kernels and vectorised exp: fusedsl vs Eigen's array expressions on transformer-sized rows.
#include "fusedsl/backend/cpu/kernels/row.hpp"

#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <random>
#include <vector>

namespace {

namespace k = fusedsl::cpu::kernels;
using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void set_bytes(benchmark::State& state, std::ptrdiff_t rows, std::ptrdiff_t cols) {
  state.SetItemsProcessed(state.iterations() * rows * cols);
}

// args: rows, cols
void BM_softmax_fusedsl(benchmark::State& state) {
  const std::ptrdiff_t r = state.range(0), c = state.range(1);
  mat x = mat::Random(r, c) * 8.0f, y(r, c);
  for (auto _ : state) {
    k::softmax_rows(r, c, x.data(), c, y.data(), c);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, r, c);
}

void BM_softmax_eigen(benchmark::State& state) {
  const std::ptrdiff_t r = state.range(0), c = state.range(1);
  mat x = mat::Random(r, c) * 8.0f, y(r, c);
  for (auto _ : state) {
    const Eigen::VectorXf m = x.rowwise().maxCoeff();
    y = (x.colwise() - m).array().exp().matrix();
    const Eigen::VectorXf s = y.rowwise().sum();
    y = s.cwiseInverse().asDiagonal() * y;
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, r, c);
}

void BM_layernorm_fusedsl(benchmark::State& state) {
  const std::ptrdiff_t r = state.range(0), c = state.range(1);
  mat x = mat::Random(r, c), y(r, c);
  Eigen::VectorXf g = Eigen::VectorXf::Random(c), b = Eigen::VectorXf::Random(c);
  for (auto _ : state) {
    k::layernorm_rows(r, c, x.data(), c, g.data(), b.data(), 1e-5f, y.data(), c);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, r, c);
}

void BM_layernorm_eigen(benchmark::State& state) {
  const std::ptrdiff_t r = state.range(0), c = state.range(1);
  mat x = mat::Random(r, c), y(r, c);
  Eigen::RowVectorXf g = Eigen::RowVectorXf::Random(c), b = Eigen::RowVectorXf::Random(c);
  for (auto _ : state) {
    const Eigen::VectorXf mean = x.rowwise().mean();
    y = x.colwise() - mean;
    const Eigen::VectorXf rstd =
        ((y.array().square().rowwise().sum() / float(c)) + 1e-5f).rsqrt().matrix();
    y = (rstd.asDiagonal() * y).array().rowwise() * g.array();
    y.rowwise() += b;
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, r, c);
}

// A vector function over n values: exp (Cody-Waite reduction, clamps) or exp2 (one-op reduction,
// what the softmax and GELU use).
template <class F>
void run_vector_function(benchmark::State& state, F f) {
  const std::ptrdiff_t n = state.range(0);
  std::vector<float> x(std::size_t(n), 0.5f), y(x.size());
  using S = k::simd<k::native_arch>;
  for (auto _ : state) {
    for (std::ptrdiff_t i = 0; i + S::width <= n; i += S::width)
      S::store(&y[std::size_t(i)], f(S::load(&x[std::size_t(i)])));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_exp_fusedsl(benchmark::State& state) {
  run_vector_function(state, [](auto v) { return k::vexp(v); });
}

void BM_exp2_fusedsl(benchmark::State& state) {
  run_vector_function(state, [](auto v) { return k::vexp2(v); });
}

void BM_exp_std(benchmark::State& state) {
  const std::ptrdiff_t n = state.range(0);
  std::vector<float> x(std::size_t(n), 0.5f), y(x.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::exp(x[i]);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void rows(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols"})->Args({128, 128})->Args({128, 512})->Args({512, 2048});
}
BENCHMARK(BM_softmax_fusedsl)->Apply(rows);
BENCHMARK(BM_softmax_eigen)->Apply(rows);
BENCHMARK(BM_layernorm_fusedsl)->Apply(rows);
BENCHMARK(BM_layernorm_eigen)->Apply(rows);
BENCHMARK(BM_exp_fusedsl)->Arg(4096);
BENCHMARK(BM_exp2_fusedsl)->Arg(4096);
BENCHMARK(BM_exp_std)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
