// AMX-BF16 GEMM (gemm_amx: A rounded to bf16 at each call, bf16 weights, f32 accumulation) vs the
// f32 packed kernel (kernels::gemm) on the transformer shapes, one thread, with the FMA peak
// measured in the same run.
//
// Counters of BM_gemm_amx:
//   f32_peak_fraction_best / _paired  FLOP/s over the f32 FMA peak (can exceed 1: the tiles are
//                                     not FMA units)
//   amx_peak_fraction_best            FLOP/s over the AMX-BF16 peak, taken as 16x the measured f32
//                                     FMA peak: 1024 FLOP/cycle/core for TDPBF16PS (16x16x32 x 2
//                                     FLOP per 16 cycles) against 64 FLOP/cycle/core for two
//                                     AVX-512 FMA ports, at the clock the FMA peak ran at
//   speedup_vs_f32_best / _paired     the f32 kernel's time over gemm_amx's on the same shape:
//                                     fastest calls of each, and the median over 41 rounds of the
//                                     two called alternately (same conditions for both)
// The C of both is f32, with no epilogue; B is packed once outside the timing, as in the executor.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fastest_call.hpp"
#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/kernels/amx.hpp"  // first: <immintrin.h> under the GCC 12 warning fix

namespace {

using fusedsl_bench::fastest_call;

namespace k = fusedsl::cpu::kernels;
double g_peak = 0;  // f32 FMA FLOP/s, measured in main before the benchmarks run
constexpr double amx_over_fma = 1024.0 / 64.0;

// One shape with both kernels' operands ready: f32 panels for kernels::gemm, bf16 VNNI panels
// for gemm_amx, each kernel's workspace.
struct gemm_case {
  std::ptrdiff_t m, n, kk;
  std::vector<float> a, b, c, packed_f32, ws_f32;
  std::vector<k::bf16_bits> packed_bf16, ws_bf16;
  k::packed_b<> pb_f32;
  k::packed_b_bf16 pb_bf16;

  explicit gemm_case(const benchmark::State& s) : m(s.range(0)), n(s.range(1)), kk(s.range(2)) {
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    a.resize(std::size_t(m * kk));
    b.resize(std::size_t(kk * n));
    for (auto* operand : {&a, &b})
      for (auto& x : *operand) x = uniform(gen);
    c.resize(std::size_t(m * n));
    packed_f32.resize(k::packed_b_floats(kk, n));
    ws_f32.resize(k::gemm_workspace_floats(kk));
    packed_bf16.resize(k::packed_b_bf16_elements(kk, n));
    ws_bf16.resize(k::gemm_amx_workspace_elements(m, kk));
    pb_f32 = k::pack_b(kk, n, b.data(), n, false, packed_f32.data());
    pb_bf16 = k::pack_b_bf16(kk, n, b.data(), n, false, packed_bf16.data());
  }
  double flops() const { return 2.0 * double(m) * double(n) * double(kk); }
  void f32() {
    k::gemm(m, n, kk, a.data(), kk, false, pb_f32, c.data(), n, k::gemm_epilogue{}, ws_f32.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  void amx() {
    k::gemm_amx(m, n, kk, a.data(), kk, false, pb_bf16, c.data(), n, k::gemm_epilogue{},
                ws_bf16.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
};

std::string shape_key(const benchmark::State& s) {
  return std::to_string(s.range(0)) + "x" + std::to_string(s.range(1)) + "x" +
         std::to_string(s.range(2));
}
std::map<std::string, double> g_f32_best;  // fastest f32 call per shape, from BM_gemm_f32

void BM_fma_peak(benchmark::State& state) {
  constexpr long iters = 1 << 16;
  const double best =
      fastest_call(state, [] { benchmark::DoNotOptimize(fusedsl_bench::fma_chains(iters)); });
  state.counters["peak_fraction_best"] =
      fusedsl_bench::fma_chain_flops_per_iter() * iters / best / g_peak;
}
BENCHMARK(BM_fma_peak);

// The f32 kernel, one thread (registered first: gemm_amx's cases report their speedup over it).
void BM_gemm_f32(benchmark::State& state) {
  gemm_case g(state);
  const double best = fastest_call(state, [&] { g.f32(); });
  g_f32_best[shape_key(state)] = best;
  state.counters["f32_peak_fraction_best"] = g.flops() / best / g_peak;
  state.counters["f32_peak_fraction_paired"] =
      fusedsl_bench::paired_peak_fraction([&] { g.f32(); }, g.flops(), g_peak);
}

void BM_gemm_amx(benchmark::State& state) {
  if (!k::amx_available()) {
    state.SkipWithError("AMX-BF16 is not available (build, CPU or kernel): nothing to measure");
    return;
  }
  gemm_case g(state);
  const double best = fastest_call(state, [&] { g.amx(); });
  state.counters["f32_peak_fraction_best"] = g.flops() / best / g_peak;
  state.counters["amx_peak_fraction_best"] = g.flops() / best / (amx_over_fma * g_peak);
  state.counters["f32_peak_fraction_paired"] =
      fusedsl_bench::paired_peak_fraction([&] { g.amx(); }, g.flops(), g_peak);
  const auto f = g_f32_best.find(shape_key(state));
  if (f != g_f32_best.end()) state.counters["speedup_vs_f32_best"] = f->second / best;
  // Alternate calls of both kernels, in thread CPU time; the median of the per-round ratios (one
  // disturbed call moves a ratio of sums far: it did, by up to 2x, in the first runs).
  std::vector<double> ratios;
  for (int r = 0; r < 41; ++r) {
    const double t0 = fusedsl_bench::thread_seconds();
    g.f32();
    const double t1 = fusedsl_bench::thread_seconds();
    g.amx();
    const double t2 = fusedsl_bench::thread_seconds();
    ratios.push_back((t1 - t0) / (t2 - t1));
  }
  std::nth_element(ratios.begin(), ratios.begin() + 20, ratios.end());
  state.counters["speedup_vs_f32_paired"] = ratios[20];
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k"});
  b->Args({128, 512, 128})->Args({128, 128, 512})->Args({512, 512, 512})->Args({512, 2048, 512});
}
BENCHMARK(BM_gemm_f32)->Apply(shapes);
BENCHMARK(BM_gemm_amx)->Apply(shapes);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak * 1e-9));
  benchmark::AddCustomContext("amx_bf16_peak_gflops_derived",
                              std::to_string(amx_over_fma * g_peak * 1e-9));
  benchmark::AddCustomContext("amx_available", k::amx_available() ? "yes" : "no");
  benchmark::RunSpecifiedBenchmarks();
  fusedsl_bench::warn_if_peak_was_low(g_peak);
  benchmark::Shutdown();
}
