// GEMM: fusedsl's packed kernel vs Eigen on the transformer shapes, as fractions of the FMA peak
// measured in the same run. BM_gemm_fusedsl and BM_gemm_eigen run on the same terms: each call
// packs its operands (fusedsl's pack_b inside the timed call, as Eigen's product packs inside
// its own); BM_gemm_fusedsl_prepacked packs B once before the loop, as the executor packs weights
// when they are bound. benchmarks/cpu/torch_mm_bench.py times torch.mm (MKL) at the same shapes
// against the peak this run measured.
// fusedsl first: its simd.hpp includes <immintrin.h> under the GCC 12 warning fix.
#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "fastest_call.hpp"
#include "fma_peak.hpp"

#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <random>
#include <vector>

namespace {

namespace k = fusedsl::cpu::kernels;
using fusedsl_bench::fastest_call;
double g_peak = 0;  // FLOP/s, measured in main before the benchmarks run

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// Eigen's fastest call per shape, recorded by BM_gemm_eigen (registered first).
std::map<std::string, double> g_eigen_best;
std::string shape_key(const benchmark::State& s) {
  return std::to_string(s.range(0)) + "x" + std::to_string(s.range(1)) + "x" +
         std::to_string(s.range(2));
}

// `best`: the fastest call in seconds (fastest_call.hpp).
void set_counters(benchmark::State& state, double flops, double best) {
  state.counters["peak_fraction_best"] = flops / best / g_peak;
  state.counters["GFLOPs"] =
      benchmark::Counter(flops * double(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak_fraction"] =
      benchmark::Counter(flops * double(state.iterations()) / g_peak, benchmark::Counter::kIsRate);
}

void BM_fma_peak(benchmark::State& state) {
  constexpr long iters = 1 << 16;
  const double best =
      fastest_call(state, [] { benchmark::DoNotOptimize(fusedsl_bench::fma_chains(iters)); });
  set_counters(state, fusedsl_bench::fma_chain_flops_per_iter() * iters, best);
}
BENCHMARK(BM_fma_peak);

// The micro-kernel alone on L1-resident operands (one mr x k A panel, one k x nr B panel, k =
// arg): the ceiling the full GEMM approaches; the gap to it is packing, tails, C write-back.
void BM_gemm_microkernel_l1(benchmark::State& state) {
  using mk = k::detail::micro_kernel<k::native_arch>;
  const std::ptrdiff_t kk = state.range(0);
  auto a = random_vector(std::size_t(mk::MR * kk), 1),
       b = random_vector(std::size_t(kk * mk::NR), 2);
  std::vector<float> c(std::size_t(mk::MR * mk::NR));
  auto call = [&] {
    typename mk::tile acc;
    mk::compute_rows<mk::MR>(kk, a.data(), 1, mk::MR, b.data(), mk::NR, acc);
    k::detail::store_tile<k::native_arch>(acc, mk::MR, mk::NR, 0, 0, c.data(), mk::NR,
                                          k::no_epilogue{});
    benchmark::DoNotOptimize(c.data());
  };
  const double best = fastest_call(state, call);
  const double flops = 2.0 * mk::MR * mk::NR * double(kk);
  set_counters(state, flops, best);
  state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction(
      [&] {
        for (int r = 0; r < 64; ++r) call();
      },
      64 * flops, g_peak);
}
BENCHMARK(BM_gemm_microkernel_l1)->Arg(128)->Arg(512);

// args: m, n, k. `prepacked`: B packed once before the loop; else inside every timed call.
void gemm_fusedsl(benchmark::State& state, bool prepacked) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  auto a = random_vector(std::size_t(m * kk), 1), b = random_vector(std::size_t(kk * n), 2);
  std::vector<float> c(std::size_t(m * n)), packed(k::packed_b_floats(kk, n)),
      ws(k::gemm_workspace_floats(kk));
  const auto packed_once = k::pack_b(kk, n, b.data(), n, false, packed.data());
  auto call = [&] {
    const auto pb = prepacked ? packed_once : k::pack_b(kk, n, b.data(), n, false, packed.data());
    k::gemm(m, n, kk, a.data(), kk, false, pb, c.data(), n, k::gemm_epilogue{}, ws.data());
    benchmark::DoNotOptimize(c.data());
  };
  const double best = fastest_call(state, call);
  set_counters(state, 2.0 * double(m * n * kk), best);
  state.counters["peak_fraction_paired"] =
      fusedsl_bench::paired_peak_fraction(call, 2.0 * double(m * n * kk), g_peak);
  const auto e = g_eigen_best.find(shape_key(state));
  if (!prepacked && e != g_eigen_best.end())
    state.counters["speedup_vs_eigen_best"] = e->second / best;
}
// On Eigen's terms: pack_b inside the timed call.
void BM_gemm_fusedsl(benchmark::State& state) {
  gemm_fusedsl(state, false);
}
// As the executor runs a matmul with bound weights: B packed once, outside the timed calls.
void BM_gemm_fusedsl_prepacked(benchmark::State& state) {
  gemm_fusedsl(state, true);
}

// Two threads through the pool (rows of C split): same kernel, B prepacked; fractions of twice
// one core's peak.
void BM_gemm_fusedsl_2threads(benchmark::State& state) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  auto a = random_vector(std::size_t(m * kk), 1), b = random_vector(std::size_t(kk * n), 2);
  std::vector<float> c(std::size_t(m * n)), packed(k::packed_b_floats(kk, n)),
      ws(k::gemm_workspace_floats(kk, 2));
  const auto pb = k::pack_b(kk, n, b.data(), n, false, packed.data());
  k::thread_pool pool(2);
  const double best = fastest_call(state, [&] {
    k::gemm(m, n, kk, a.data(), kk, false, pb, c.data(), n, k::gemm_epilogue{}, ws.data(), &pool);
    benchmark::DoNotOptimize(c.data());
  });
  state.counters["peak_fraction_of_2_cores_best"] =
      2.0 * double(m * n * kk) / best / (2 * g_peak);
  const double flops = 2.0 * double(m * n * kk) * double(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak_fraction_of_2_cores"] =
      benchmark::Counter(flops / (2 * g_peak), benchmark::Counter::kIsRate);
}

// Few rows against a B that comes from memory, as the weights of a batch-1 encoder or of a decode
// step do (all-MiniLM-L6-v2's are 43 MB, more than a core's share of the caches keeps from one
// call to the next): each call takes the next of enough copies of the packed B to fill 256 MiB.
// args: m, n, k, threads (2: the polling pool, threads{2, 50us}); wall time. b_bytes_per_second:
// the packed B's bytes over the time, each read once per call.
void BM_gemm_fusedsl_cold_b(benchmark::State& state) {
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  const int threads = int(state.range(3));
  auto a = random_vector(std::size_t(m * kk), 1), b = random_vector(std::size_t(kk * n), 2);
  std::vector<float> c(std::size_t(m * n)), ws(k::gemm_workspace_floats(kk, threads));
  const std::size_t floats = k::packed_b_floats(kk, n);
  const std::size_t copies = std::max<std::size_t>(2, (std::size_t(256) << 20) / (floats * 4));
  std::vector<float> packed(floats * copies);
  std::vector<k::packed_b<>> pb;
  for (std::size_t i = 0; i < copies; ++i)
    pb.push_back(k::pack_b(kk, n, b.data(), n, false, packed.data() + i * floats));
  std::optional<k::thread_pool> pool;
  if (threads > 1) pool.emplace(threads, std::chrono::microseconds(50));
  std::size_t at = 0;
  auto call = [&] {
    k::gemm(m, n, kk, a.data(), kk, false, pb[at], c.data(), n, k::gemm_epilogue{}, ws.data(),
            pool ? &*pool : nullptr);
    at = at + 1 == copies ? 0 : at + 1;
    benchmark::DoNotOptimize(c.data());
  };
  for (std::size_t i = 0; i < copies; ++i) call();  // every copy touched once
  for (auto _ : state) call();
  const double calls = double(state.iterations()), flops = 2.0 * double(m * n * kk);
  state.counters["GFLOPs"] = benchmark::Counter(flops * calls * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak_fraction"] =
      benchmark::Counter(flops * calls / (threads * g_peak), benchmark::Counter::kIsRate);
  state.counters["b_bytes_per_second"] =
      benchmark::Counter(double(floats * 4) * calls, benchmark::Counter::kIsRate);
  if (threads == 1)
    state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction(
        [&] {
          for (int r = 0; r < 16; ++r) call();
        },
        16 * flops, g_peak);
}

void BM_gemm_eigen(benchmark::State& state) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const std::ptrdiff_t m = state.range(0), n = state.range(1), kk = state.range(2);
  mat a = mat::Random(m, kk), b = mat::Random(kk, n), c(m, n);
  const double best = fastest_call(state, [&] {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  });
  set_counters(state, 2.0 * double(m * n * kk), best);
  g_eigen_best[shape_key(state)] = best;
  state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction(
      [&] {
        c.noalias() = a * b;
        benchmark::DoNotOptimize(c.data());
      },
      2.0 * double(m * n * kk), g_peak);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k"});
  b->Args({128, 512, 128})->Args({128, 128, 512})->Args({512, 512, 512});
}
// The medium transformer config (d 512, FFN 2048, seq 512): FFN up and down.
void medium_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k"});
  b->Args({512, 2048, 512})->Args({512, 512, 2048});
}
BENCHMARK(BM_gemm_eigen)->Apply(shapes);  // first: fusedsl's cases report their speedup over it
BENCHMARK(BM_gemm_fusedsl)->Apply(shapes);
BENCHMARK(BM_gemm_fusedsl_prepacked)->Apply(shapes);
BENCHMARK(BM_gemm_eigen)->Apply(medium_shapes);
BENCHMARK(BM_gemm_fusedsl)->Apply(medium_shapes);
BENCHMARK(BM_gemm_fusedsl_prepacked)->Apply(medium_shapes);
BENCHMARK(BM_gemm_fusedsl_2threads)->Apply(shapes)->UseRealTime();
// all-MiniLM-L6-v2 at 32 tokens (Q, K, V and the attention's output; FFN up; FFN down), GPT-2
// small at 128 tokens (FFN up) and its decode step (Q, K and V in one product), on one thread and
// two.
BENCHMARK(BM_gemm_fusedsl_cold_b)
    ->ArgNames({"m", "n", "k", "threads"})
    ->ArgsProduct({{32}, {384}, {384}, {1, 2}})
    ->ArgsProduct({{32}, {1536}, {384}, {1, 2}})
    ->ArgsProduct({{32}, {384}, {1536}, {1, 2}})
    ->ArgsProduct({{128}, {3072}, {768}, {1, 2}})
    ->ArgsProduct({{1}, {2304}, {768}, {1, 2}})
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak * 1e-9));
  // Read by benchmarks/cpu_targets.py: output without this key named the prepacked rows
  // BM_gemm_fusedsl.
  benchmark::AddCustomContext("gemm_fusedsl_pack_b",
                              "BM_gemm_fusedsl: inside each timed call; "
                              "BM_gemm_fusedsl_prepacked: once, before the loop");
  benchmark::RunSpecifiedBenchmarks();
  fusedsl_bench::warn_if_peak_was_low(g_peak);
  benchmark::Shutdown();
}
