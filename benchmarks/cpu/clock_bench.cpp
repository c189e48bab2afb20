// Does the FMA rate depend on what ran just before? The same FMA-chain bursts (fma_peak.hpp's
// fma_chains, 1000 iterations each) are timed after ~1 ms of one of six preludes: pure FMA
// chains, the GEMM micro-kernel on L1-resident panels, FMAs fed by 512-bit loads, a spin on the
// thread clock, FMAs fed by broadcast loads (the micro-kernel's A operand), and the micro-kernel's
// tile with A stored pre-broadcast (full loads instead of broadcasts). If the core runs
// some mix at a lower clock, the bursts after it are slower, and every "fraction of the FMA peak"
// taken against the start-up peak carries that factor (docs/performance.md, "How fractions of
// the peak are measured"). Without AVX-512 the preludes with loads run plain FMA chains.
//
// Counter `peak_fraction`: the bursts' FLOP rate over the FMA peak measured at start-up (best of
// 25 runs of pure FMA chains), both in thread CPU time; `prelude_peak_fraction`: the prelude's
// own rate (not for the spin). All operands are 64-byte aligned, as the executor's buffers are
// (an unaligned 512-bit load spans two cache lines and halves the load ports' rate).
//
// BM_microkernel_windows: the micro-kernel alone (L1-resident panels) for ~0.5 s in windows of
// ~0.2 ms, each window's rate over the start-up peak: median, 10th and 90th percentiles, and the
// share of windows at >= 0.93 of the peak. A core whose vector rate is throttled (a power or
// frequency limit) shows it as a wide spread between the 10th and 90th percentiles.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <span>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "fusedsl/core/tensor.hpp"

namespace k = fusedsl::cpu::kernels;

namespace {

double g_peak = 0;

using mk = k::detail::micro_kernel<k::native_arch>;

// n floats in a 64-byte aligned, zero-filled fusedsl::aligned_buffer, as the executor's arena and
// packed weights are.
struct aligned_floats {
  explicit aligned_floats(std::size_t n) : storage(n * sizeof(float)), count(n) {}
  float* data() { return reinterpret_cast<float*>(storage.data()); }
  std::span<float> span() { return {data(), count}; }
  fusedsl::aligned_buffer storage;
  std::size_t count;
};

// ~1 ms of the micro-kernel: 12 x 32 tiles, k = 128, A read in place, everything in L1.
void run_microkernel(aligned_floats& a, aligned_floats& b, aligned_floats& c, int tiles = 2000) {
  for (int rep = 0; rep < tiles; ++rep) {
    typename mk::tile acc;
    mk::compute_rows<mk::MR>(128, a.data(), 128, 1, b.data(), mk::NR, acc);
    k::detail::store_tile<k::native_arch>(acc, mk::MR, mk::NR, 0, 0, c.data(), mk::NR,
                                          k::no_epilogue{});
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
  // One 512-bit load per FMA from 16 hot vectors. Sixteen iterations are unrolled so every address
  // is a constant offset, and the pointer goes through an empty asm every 16 FMAs so the loads
  // cannot be hoisted out of the loop (with an address depending on `it` alone GCC hoists them,
  // and the prelude becomes pure register FMAs).
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_ps(float(j) * 1e-3f);
  const __m512 b = _mm512_set1_ps(1e-6f);
  for (long it = 0; it < iters; it += 16) {
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      asm volatile("" : "+r"(p));
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j)
        acc[j] = _mm512_fmadd_ps(acc[j], _mm512_loadu_ps(p + ((r + j) & 15) * 16), b);
    }
  }
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
}
float fma_with_broadcasts(long iters, const float* p) {  // the micro-kernel's A operand
  return fma_fed_by(iters, [p](long it, int j) { return _mm512_set1_ps(p[(it & 15) * 16 + j]); });
}

// ~1 ms of the micro-kernel's 12 x 32 tile (k = 48, everything in L1) with its A operand stored
// pre-broadcast (16 copies of each value) and read by full 512-bit loads: the same arithmetic with
// no broadcast instruction at all.
constexpr int expanded_k = 48, expanded_reps = 5000;
void run_tile_expanded_a(const float* ax, const float* b, float* c) {
  for (int rep = 0; rep < expanded_reps; ++rep) {
    __m512 acc[12][2];
    for (auto& r : acc) r[0] = r[1] = _mm512_setzero_ps();
    for (int p = 0; p < expanded_k; ++p) {
      const __m512 b0 = _mm512_loadu_ps(b + p * 32), b1 = _mm512_loadu_ps(b + p * 32 + 16);
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) {
        const __m512 ai = _mm512_loadu_ps(ax + (p * 12 + i) * 16);
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      }
    }
    for (int i = 0; i < 12; ++i) {
      _mm512_storeu_ps(c + i * 32, acc[i][0]);
      _mm512_storeu_ps(c + i * 32 + 16, acc[i][1]);
    }
    benchmark::DoNotOptimize(c);
  }
}
#else
float fma_with_loads(long iters, const float*) {
  return fusedsl_bench::fma_chains(iters);
}
float fma_with_broadcasts(long iters, const float*) {
  return fusedsl_bench::fma_chains(iters);
}
constexpr int expanded_k = 48, expanded_reps = 5000;
void run_tile_expanded_a(const float*, const float*, float*) {
  fusedsl_bench::fma_chains(1000 * 150);
}
#endif

enum prelude {
  pure_fma,
  gemm_microkernel,
  fma_512bit_loads,
  spin,
  fma_broadcasts,
  tile_expanded_a
};

void BM_fma_bursts_after(benchmark::State& state) {
  const auto what = prelude(state.range(0));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  aligned_floats a(std::size_t(mk::MR * 128)), b(std::size_t(128 * mk::NR)),
      c(std::size_t(mk::MR * mk::NR)), ones(256), a_expanded(std::size_t(12 * expanded_k * 16));
  for (auto& x : a.span()) x = u(rng);
  for (auto& x : b.span()) x = u(rng);
  std::ranges::fill(ones.span(), 0.9999f);
  for (std::size_t i = 0; i < a_expanded.count; i += 16)
    std::fill_n(a_expanded.data() + i, 16, u(rng));
  volatile float sink = 0;
  constexpr int bursts = 100;
  constexpr long iters = 1000;
  // FLOPs of one prelude (0 for the spin), for its own rate.
  const double chain_flops = double(iters * 150) * fusedsl_bench::fma_chain_flops_per_iter();
  const double prelude_flops[] = {
      chain_flops,                                        // pure_fma
      2000.0 * 2 * mk::MR * mk::NR * 128,                 // gemm_microkernel
      chain_flops,                                        // fma_512bit_loads
      0.0,                                                // spin
      chain_flops,                                        // fma_broadcasts
      double(expanded_reps) * 2 * 12 * 32 * expanded_k};  // tile_expanded_a
  std::vector<double> times, prelude_times;
  for (auto _ : state) {
    const double p0 = fusedsl_bench::thread_seconds();
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
      case tile_expanded_a:
        run_tile_expanded_a(a_expanded.data(), b.data(), c.data());
        break;
    }
    const double t0 = fusedsl_bench::thread_seconds();
    prelude_times.push_back(t0 - p0);
    for (int i = 0; i < bursts; ++i) sink = sink + fusedsl_bench::fma_chains(iters);
    const double sec = fusedsl_bench::thread_seconds() - t0;
    times.push_back(sec);
    state.SetIterationTime(sec);
  }
  std::sort(times.begin(), times.end());
  const double flops = bursts * double(iters) * fusedsl_bench::fma_chain_flops_per_iter();
  state.counters["peak_fraction"] = flops / times[times.size() / 2] / g_peak;  // median
  state.counters["peak_fraction_best"] = flops / times.front() / g_peak;
  if (prelude_flops[what] > 0) {  // the prelude's own rate (median)
    std::sort(prelude_times.begin(), prelude_times.end());
    state.counters["prelude_peak_fraction"] =
        prelude_flops[what] / prelude_times[prelude_times.size() / 2] / g_peak;
  }
}
BENCHMARK(BM_fma_bursts_after)
    ->ArgName("prelude")
    ->DenseRange(0, 5)
    ->UseManualTime()
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

// The micro-kernel alone for `windows` windows of `tiles` tiles (~0.2 ms each) after 50 ms of pure
// FMA chains; each window's rate over the start-up peak.
void BM_microkernel_windows(benchmark::State& state) {
  constexpr int windows = 2500, tiles = 400;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  aligned_floats a(std::size_t(mk::MR * 128)), b(std::size_t(128 * mk::NR)),
      c(std::size_t(mk::MR * mk::NR));
  for (auto& x : a.span()) x = u(rng);
  for (auto& x : b.span()) x = u(rng);
  const double window_flops = double(tiles) * 2 * mk::MR * mk::NR * 128;
  std::vector<double> rates;
  volatile float sink = 0;
  for (auto _ : state) {
    for (int i = 0; i < 20; ++i) sink = sink + fusedsl_bench::fma_chains(1 << 20);
    double total = 0;
    for (int w = 0; w < windows; ++w) {
      const double t0 = fusedsl_bench::thread_seconds();
      run_microkernel(a, b, c, tiles);
      const double sec = fusedsl_bench::thread_seconds() - t0;
      total += sec;
      rates.push_back(window_flops / sec / g_peak);
    }
    state.SetIterationTime(total);
  }
  std::sort(rates.begin(), rates.end());
  const auto at = [&](double q) { return rates[std::size_t(q * double(rates.size() - 1))]; };
  state.counters["median"] = at(0.5);
  state.counters["p10"] = at(0.1);
  state.counters["p90"] = at(0.9);
  state.counters["fast_share"] =
      double(rates.end() - std::lower_bound(rates.begin(), rates.end(), 0.93)) /
      double(rates.size());
}
BENCHMARK(BM_microkernel_windows)->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak * 1e-9));
  benchmark::AddCustomContext(
      "preludes",
      "0 pure FMA, 1 GEMM micro-kernel, 2 FMA + 512-bit loads, 3 spin, 4 FMA + broadcast loads, 5 "
      "the micro-kernel tile with A pre-broadcast (full loads, no broadcasts)");
  benchmark::RunSpecifiedBenchmarks();
  fusedsl_bench::warn_if_peak_was_low(g_peak);
  benchmark::Shutdown();
  return 0;
}
