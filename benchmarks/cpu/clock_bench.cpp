// Does the FMA rate depend on what ran just before? The same FMA-chain bursts (fma_peak.hpp's
// fma_chains, 1000 iterations each) are timed after ~1 ms of one of five preludes: pure FMA
// chains, the GEMM micro-kernel on L1-resident panels, FMAs fed by 512-bit loads, a spin on the
// thread clock, and FMAs fed by broadcast loads (the micro-kernel's A operand). If the core runs
// some mix at a lower clock, the bursts after it are slower, and every "fraction of the FMA peak"
// taken against the start-up peak carries that factor (docs/performance.md, "Machine and
// method"). Without AVX-512 the preludes with loads run plain FMA chains.
//
// Counter `peak_fraction`: the bursts' FLOP rate over the FMA peak measured at start-up (best of
// 25 runs of pure FMA chains), both in thread CPU time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/kernels/gemm.hpp"

namespace k = fusedsl::cpu::kernels;

namespace {

double g_peak = 0;

using mk = k::detail::micro_kernel<k::native_arch>;

// ~1 ms of the micro-kernel: 12 x 32 tiles, k = 128, A read in place, everything in L1.
void run_microkernel(const std::vector<float>& a, const std::vector<float>& b,
                     std::vector<float>& c) {
  for (int rep = 0; rep < 2000; ++rep) {
    typename mk::tile acc;
    mk::compute_rows<mk::MR>(128, a.data(), 128, 1, b.data(), mk::NR, acc);
    k::detail::store_tile<k::native_arch, k::activation::none>(acc, mk::MR, mk::NR, 0, 0, c.data(),
                                                               mk::NR, k::gemm_epilogue{});
    benchmark::DoNotOptimize(c.data());
  }
}

#if defined(__AVX512F__)
// ~1 ms of 16 FMA chains whose second operand, for chain j of iteration `it`, is operand(it, j):
// a 512-bit load or a broadcast load from L1.
template <class Operand>
float fma_fed_by(long iters, const Operand& operand) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_ps(float(j) * 1e-3f);
  const __m512 b = _mm512_set1_ps(1e-6f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(acc[j], operand(it, j), b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
}
float fma_with_loads(long iters, const float* p) {  // no broadcasts
  return fma_fed_by(iters, [p](long it, int j) { return _mm512_loadu_ps(p + ((it * 16 + j) & 15) * 16); });
}
float fma_with_broadcasts(long iters, const float* p) {  // the micro-kernel's A operand
  return fma_fed_by(iters, [p](long it, int j) { return _mm512_set1_ps(p[(it & 15) * 16 + j]); });
}
#else
float fma_with_loads(long iters, const float*) { return fusedsl_bench::fma_chains(iters); }
float fma_with_broadcasts(long iters, const float*) { return fusedsl_bench::fma_chains(iters); }
#endif

enum prelude { pure_fma, gemm_microkernel, fma_512bit_loads, spin, fma_broadcasts };

void BM_fma_bursts_after(benchmark::State& state) {
  const auto what = prelude(state.range(0));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(std::size_t(mk::MR * 128)), b(std::size_t(128 * mk::NR)),
      c(std::size_t(mk::MR * mk::NR)), ones(256, 0.9999f);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  volatile float sink = 0;
  constexpr int bursts = 100;
  constexpr long iters = 1000;
  std::vector<double> times;
  for (auto _ : state) {
    switch (what) {
      case pure_fma:
        sink = sink + fusedsl_bench::fma_chains(iters * 150);
        break;
      case gemm_microkernel:
        run_microkernel(a, b, c);
        break;
      case fma_512bit_loads:
        sink = sink + fma_with_loads(iters * 150, ones.data());
        break;
      case fma_broadcasts:
        sink = sink + fma_with_broadcasts(iters * 150, ones.data());
        break;
      case spin: {
        const double t = fusedsl_bench::thread_seconds();
        while (fusedsl_bench::thread_seconds() - t < 1e-3) {
        }
        break;
      }
    }
    const double t0 = fusedsl_bench::thread_seconds();
    for (int i = 0; i < bursts; ++i) sink = sink + fusedsl_bench::fma_chains(iters);
    const double sec = fusedsl_bench::thread_seconds() - t0;
    times.push_back(sec);
    state.SetIterationTime(sec);
  }
  std::sort(times.begin(), times.end());
  const double flops = bursts * double(iters) * fusedsl_bench::fma_chain_flops_per_iter();
  state.counters["peak_fraction"] = flops / times[times.size() / 2] / g_peak;  // median
  state.counters["peak_fraction_best"] = flops / times.front() / g_peak;
}
BENCHMARK(BM_fma_bursts_after)
    ->ArgName("prelude")
    ->DenseRange(0, 4)
    ->UseManualTime()
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak * 1e-9));
  benchmark::AddCustomContext("preludes", "0 pure FMA, 1 GEMM micro-kernel, 2 FMA + 512-bit loads, 3 spin, 4 FMA + broadcast loads");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
