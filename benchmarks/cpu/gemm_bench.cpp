// GEMM: fusedsl's packed kernel vs Eigen on the transformer shapes, as fractions of the FMA peak
// measured in the same run.
// fusedsl first: its simd.hpp includes <immintrin.h> under the GCC 12 warning fix.
#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "fma_peak.hpp"

#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <random>
#include <vector>

namespace {

namespace k = fusedsl::cpu::kernels;
double g_peak = 0;  // FLOP/s, measured in main before the benchmarks run

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

void set_counters(benchmark::State& state, double flops) {
  state.counters["GFLOPs"] =
      benchmark::Counter(flops * double(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak_fraction"] =
      benchmark::Counter(flops * double(state.iterations()) / g_peak, benchmark::Counter::kIsRate);
}

void BM_fma_peak(benchmark::State& state) {
  constexpr long iters = 1 << 16;
  for (auto _ : state) benchmark::DoNotOptimize(fusedsl_bench::fma_chains(iters));
  set_counters(state, fusedsl_bench::fma_chain_flops_per_iter() * iters);
}
BENCHMARK(BM_fma_peak);

// args: m, n, k
void BM_gemm_fusedsl(benchmark::State& state) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  auto a = random_vector(std::size_t(m * kk), 1), b = random_vector(std::size_t(kk * n), 2);
  std::vector<float> c(std::size_t(m * n)), packed(k::packed_b_floats(kk, n)),
      ws(k::gemm_workspace_floats(kk));
  const auto pb = k::pack_b(kk, n, b.data(), n, false, packed.data());
  for (auto _ : state) {
    k::gemm(m, n, kk, a.data(), kk, false, pb, c.data(), n, k::gemm_epilogue{}, ws.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 2.0 * double(m * n * kk));
}

void BM_gemm_eigen(benchmark::State& state) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  mat a = mat::Random(m, kk), b = mat::Random(kk, n), c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 2.0 * double(m * n * kk));
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k"});
  b->Args({128, 512, 128})->Args({128, 128, 512})->Args({512, 512, 512});
}
BENCHMARK(BM_gemm_fusedsl)->Apply(shapes);
BENCHMARK(BM_gemm_eigen)->Apply(shapes);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak * 1e-9));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
