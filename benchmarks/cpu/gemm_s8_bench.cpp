// The int8 GEMM (u8 activations x s8 weights, kernels/gemm_s8.hpp) against the f32 GEMM on the
// same shapes, one thread, B packed once (weights), as ratios measured in the same run:
//   BM_gemm_f32       kernels::gemm, f32 C
//   BM_gemm_u8s8_s32  exact s32 C
//   BM_gemm_u8s8_f32  dequantized f32 C (row and column scales, a zero point, a bias)
//   BM_quantize_then_gemm  f32 A quantized per row by a separate pass, then BM_gemm_u8s8_f32's call
//   BM_gemm_dynamic   f32 A quantized per row as the GEMM packs it (gemm_dynamic_u8s8_f32)
// Counters: GMACs (multiply-adds per second), speedup_vs_f32 (the f32 case's fastest call over
// this case's, same shape; the f32 case runs first), peak_fraction_f32 (2 * MACs per second over
// the f32 FMA peak measured at start-up: the f32 kernel's ceiling, for scale), isa (1 VNNI,
// 2 AVX2 widening, 3 plain loops).
// Run: build/ci/benchmarks/cpu/cpu_gemm_s8_bench --benchmark_out=gemm_s8.json
//        --benchmark_out_format=json --benchmark_repetitions=3
// fusedsl first: its simd.hpp includes <immintrin.h> under the GCC 12 warning fix.
#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "fusedsl/backend/cpu/kernels/gemm_s8.hpp"
#include "fastest_call.hpp"
#include "fma_peak.hpp"

#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

namespace k = fusedsl::cpu::kernels;
using fusedsl_bench::fastest_call;
double g_peak = 0;                    // f32 FLOP/s, measured in main
std::map<std::string, double> g_f32;  // fastest f32 call per shape

std::string key(const benchmark::State& s) {
  return std::to_string(s.range(0)) + "x" + std::to_string(s.range(1)) + "x" +
         std::to_string(s.range(2));
}

constexpr int isa() {
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
  return 1;
#elif defined(__AVX2__)
  return 2;
#else
  return 3;
#endif
}

void set_counters(benchmark::State& state, double macs, double best) {
  state.counters["GMACs"] = macs / best * 1e-9;
  state.counters["peak_fraction_f32"] = 2.0 * macs / best / g_peak;
  state.counters["isa"] = isa();
  const auto f = g_f32.find(key(state));
  if (f != g_f32.end()) state.counters["speedup_vs_f32"] = f->second / best;
}

void BM_gemm_f32(benchmark::State& state) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> a(std::size_t(m * kk)), b(std::size_t(kk * n)), c(std::size_t(m * n)),
      packed(k::packed_b_floats(kk, n)), ws(k::gemm_workspace_floats(kk));
  for (auto& x : a) x = d(rng);
  for (auto& x : b) x = d(rng);
  const auto pb = k::pack_b(kk, n, b.data(), n, false, packed.data());
  const double best = fastest_call(state, [&] {
    k::gemm(m, n, kk, a.data(), kk, false, pb, c.data(), n, k::gemm_epilogue{}, ws.data());
    benchmark::DoNotOptimize(c.data());
  });
  g_f32[key(state)] = best;
  set_counters(state, double(m * n * kk), best);
}

struct s8_operands {
  std::vector<std::uint8_t> a;
  std::vector<std::int8_t> b, packed;
  std::vector<std::int32_t> sums;
  k::packed_b_s8 pb;
  s8_operands(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t kk)
      : a(std::size_t(m * kk)), b(std::size_t(kk * n)), packed(k::packed_b_s8_bytes(kk, n)),
        sums(std::size_t(n)) {
    std::mt19937 rng(2);
    for (auto& x : a) x = std::uint8_t(rng() % 256);
    for (auto& x : b) x = std::int8_t(int(rng() % 256) - 128);
    pb = k::pack_b_s8(kk, n, b.data(), n, false, packed.data(), sums.data());
  }
};

void BM_gemm_u8s8_s32(benchmark::State& state) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  const s8_operands o(m, n, kk);
  std::vector<std::int32_t> c(std::size_t(m * n));
  const double best = fastest_call(state, [&] {
    k::gemm_u8s8_s32(m, n, kk, o.a.data(), kk, o.pb, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  });
  set_counters(state, double(m * n * kk), best);
}

void BM_gemm_u8s8_f32(benchmark::State& state) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  const s8_operands o(m, n, kk);
  std::vector<float> c(std::size_t(m * n)), a_scale(std::size_t(m), 0.02f),
      b_scale(std::size_t(n), 0.01f), bias(std::size_t(n), 0.5f);
  const k::s8_dequant q{a_scale.data(), 128, b_scale.data(), bias.data()};
  const double best = fastest_call(state, [&] {
    k::gemm_u8s8_f32(m, n, kk, o.a.data(), kk, o.pb, q, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  });
  set_counters(state, double(m * n * kk), best);
}

// f32 activations: the rows quantized to u8 by a separate pass (quantize_rows_u8, then
// gemm_u8s8_f32), or as the GEMM packs them (gemm_dynamic_u8s8_f32). The f32 GEMM takes the same
// f32 rows, so speedup_vs_f32 is what a dynamically quantized linear layer gains.
std::vector<float> f32_rows(std::ptrdiff_t m, std::ptrdiff_t kk) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(std::size_t(m * kk));
  for (auto& v : x) v = d(rng);
  return x;
}

void BM_quantize_then_gemm(benchmark::State& state) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  const s8_operands o(m, n, kk);
  const std::vector<float> x = f32_rows(m, kk);
  std::vector<std::uint8_t> xq(x.size()), zero(static_cast<std::size_t>(m));
  std::vector<float> c(std::size_t(m * n)), a_scale(static_cast<std::size_t>(m)),
      b_scale(std::size_t(n), 0.01f), bias(std::size_t(n), 0.5f);
  k::s8_dequant q;
  q.a_scale = a_scale.data();
  q.a_zeros = zero.data();
  q.b_scale = b_scale.data();
  q.bias = bias.data();
  const double best = fastest_call(state, [&] {
    k::quantize_rows_u8(m, kk, x.data(), kk, xq.data(), kk, a_scale.data(), zero.data());
    k::gemm_u8s8_f32(m, n, kk, xq.data(), kk, o.pb, q, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  });
  set_counters(state, double(m * n * kk), best);
}

void BM_gemm_dynamic(benchmark::State& state) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  const s8_operands o(m, n, kk);
  const std::vector<float> x = f32_rows(m, kk);
  std::vector<float> c(std::size_t(m * n)), b_scale(std::size_t(n), 0.01f),
      bias(std::size_t(n), 0.5f);
  const double best = fastest_call(state, [&] {
    k::gemm_dynamic_u8s8_f32(m, n, kk, x.data(), kk, o.pb, b_scale.data(), c.data(), n,
                             k::s8_bias{bias.data()});
    benchmark::DoNotOptimize(c.data());
  });
  set_counters(state, double(m * n * kk), best);
}

// all-MiniLM-L6-v2's projections at 128 tokens (d 384, FFN 1536) and one decode row of GPT-2
// small's MLP (768 -> 3072).
void shapes(benchmark::internal::Benchmark* b) {
  b->Args({128, 384, 384})->Args({128, 1536, 384})->Args({128, 384, 1536})->Args({1, 3072, 768});
}

}  // namespace

BENCHMARK(BM_gemm_f32)->Apply(shapes);  // first: the int8 cases report their speedup over it
BENCHMARK(BM_gemm_u8s8_s32)->Apply(shapes);
BENCHMARK(BM_gemm_u8s8_f32)->Apply(shapes);
BENCHMARK(BM_quantize_then_gemm)->Apply(shapes);
BENCHMARK(BM_gemm_dynamic)->Apply(shapes);

int main(int argc, char** argv) {
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak * 1e-9));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
