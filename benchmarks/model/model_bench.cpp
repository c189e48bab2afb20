// The seed and medium transformers, fused (cpu::executor) against two unfused baselines, as
// ratios measured in one run:
//   <model>_reference       the reference backend: an op-by-op interpreter (Eigen GEMMs, every
//                           node materialised), the ground truth of the tests
//   <model>_eigen           a plain Eigen implementation written by hand (eigen_transformer.hpp):
//                           Eigen GEMMs and vectorised exp/tanh, preallocated buffers, one thread
// and the fused executor: <model>_fused/1 and /2 (the default sleeping pool), and
// <model>_fused_polling/2 (the pool polls 50 us between runs, so small kernels are split too).
// Counters:
//   peak_fraction           model FLOPs / time / the FMA peak measured at start-up (same process)
//   peak_fraction_best      one thread: the fastest call (wall time) over the same peak
//   peak_fraction_paired    one thread: rounds of one call then an FMA-chain run of the same
//                           length, both in thread CPU time (fma_peak.hpp); steadiest under load
//   speedup_vs_reference    reference time / this case's time (the reference case runs first)
//   speedup_vs_eigen        plain-Eigen time / this case's time (the Eigen case runs second)
//   parallel_groups         fused cases: groups per layer whose kernels were split across the pool
// One-thread cases are timed in thread CPU time (other tenants' time slices left out), two-thread
// cases in wall time; the fastest call is taken in wall time (fma_peak.hpp, wall_seconds).
// Run (one command): build/release/benchmarks/model/model_bench
//                      --benchmark_out=model.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <stdexcept>
#include <string>

#include "fastest_call.hpp"
#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/models/bf16_weights.hpp"
#include "fusedsl/models/transformer.hpp"

// After fusedsl's headers: they include <immintrin.h> and Eigen under GCC 12's warning fixes.
#include "eigen_transformer.hpp"

namespace fd = fusedsl;

namespace {

using fusedsl_bench::fastest_call;
double g_peak = 0;

struct weights {
  std::vector<std::string> names;
  std::vector<fd::dynamic_tensor> tensors;
};

template <class Program>
weights random_weights(unsigned seed) {
  fd::cpu::executor<Program> probe;
  weights w;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (const auto& b : probe.bindings()) {
    w.names.push_back(b.name);
    w.tensors.emplace_back(b.type, b.shape);
    for (std::int64_t i = 0; i < b.shape.size(); ++i) {
      const float v = (b.name.find("gamma") != std::string::npos ? 1.0f : 0.0f) + nd(rng);
      if (b.type == fd::dtype::bf16) w.tensors.back().template data<fd::bf16>()[i] = fd::bf16(v);
      else w.tensors.back().template data<float>()[i] = v;
    }
  }
  return w;
}

template <class Model>
void reference(benchmark::State& state, const char* name) {
  using P = typename Model::program_type;
  const weights w = random_weights<P>(1);
  fd::reference::evaluator ev(fd::graph::graph_view(P::graph));
  for (std::size_t i = 0; i < w.names.size(); ++i)
    ev.bind(w.names[i], const_cast<fd::dynamic_tensor&>(w.tensors[i]).ref());
  for (auto _ : state) benchmark::DoNotOptimize(ev.run());
  state.counters["flops"] =
      benchmark::Counter(Model::flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction"] =
      benchmark::Counter(Model::flops() / g_peak, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction(
      [&] { benchmark::DoNotOptimize(ev.run()); }, Model::flops(), g_peak, 5);
  (void)name;
}

// The plain Eigen implementation on the same weights, one thread.
template <class Model>
void plain_eigen(benchmark::State& state) {
  using P = typename Model::program_type;
  const weights w = random_weights<P>(1);
  auto param = [&](const std::string& name) -> const float* {
    for (std::size_t i = 0; i < w.names.size(); ++i)
      if (w.names[i] == name) return w.tensors[i].template data<float>();
    throw std::invalid_argument("model_bench: no weight named " + name);
  };
  fusedsl_bench::eigen_transformer<Model> eigen(param);
  std::vector<float> y(std::size_t(Model::seq * Model::d_model));
  const float* x = param("x");
  const double best = fastest_call(state, [&] { eigen.run(x, y.data()); });
  state.counters["peak_fraction_best"] = Model::flops() / best / g_peak;
  state.counters["flops"] =
      benchmark::Counter(Model::flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction"] =
      benchmark::Counter(Model::flops() / g_peak, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction(
      [&] { eigen.run(x, y.data()); }, Model::flops(), g_peak, Model::flops() < 1e9 ? 50 : 10);
}

// `spin_us`: how long the pool's idle threads poll before they sleep (fd::cpu::threads::spin).
template <class Model>
void fused(benchmark::State& state, long spin_us) {
  using P = typename Model::program_type;
  static_assert(fd::cpu::executor<P>::kernels_plan().n_refused == 0,
                "every group of the benchmarked model runs a generated kernel");
  const weights w = random_weights<P>(1);
  fd::cpu::executor<P> ex(
      P{}, fd::cpu::threads{int(state.range(0)), std::chrono::microseconds(spin_us)});
  for (std::size_t i = 0; i < w.names.size(); ++i)
    ex.bind(w.names[i], const_cast<fd::dynamic_tensor&>(w.tensors[i]).ref());
  fd::dynamic_tensor out(fd::dtype::f32, P::graph[P::graph.outputs[0]].shape);
  ex.bind_output(0, out.ref());
  // The fastest call in the calling thread's CPU time: a fraction of peak for one thread only.
  const double best = fastest_call(state, [&] { ex.run(); });
  if (state.range(0) == 1) state.counters["peak_fraction_best"] = Model::flops() / best / g_peak;
  state.counters["flops"] =
      benchmark::Counter(Model::flops(), benchmark::Counter::kIsIterationInvariantRate);
  // Against the peak of the cores in use (the peak is measured on one core).
  state.counters["peak_fraction"] =
      benchmark::Counter(Model::flops() / (g_peak * double(state.range(0))),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["interpreted_groups"] = ex.stats().interpreted_groups;
  state.counters["parallel_groups"] = ex.stats().parallel_groups;
  if (state.range(0) == 1)
    state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction(
        [&] { ex.run(); }, Model::flops(), g_peak, Model::flops() < 1e9 ? 50 : 10);
}

// bf16 weights through AMX tiles (activations rounded to bf16 at each GEMM) against the same
// program on the f32 kernels (weights widened at bind), one thread, calls alternated in thread CPU
// time: fastest calls, and the median of per-round ratios. Not the f32 model: a different
// arithmetic, reported apart from the f32 targets.
template <class Model>
void bf16_weights_amx(benchmark::State& state) {
  using P = typename Model::program_type;
  if (!fd::cpu::kernels::amx_available()) {
    state.SkipWithError("AMX-BF16 is not available (build, CPU or kernel): nothing to measure");
    return;
  }
  const weights w = random_weights<P>(1);
  fd::cpu::executor<P> amx(P{}, fd::cpu::threads{1}, fd::cpu::amx_bf16{}), f32(P{});
  fd::dynamic_tensor out(fd::dtype::f32, P::graph[P::graph.outputs[0]].shape);
  for (auto* ex : {&amx, &f32}) {
    for (std::size_t i = 0; i < w.names.size(); ++i)
      ex->bind(w.names[i], const_cast<fd::dynamic_tensor&>(w.tensors[i]).ref());
    ex->bind_output(0, out.ref());
  }
  for (auto _ : state) {
    amx.run();
    benchmark::ClobberMemory();
  }
  const double flops = Model::flops();
  const int rounds = flops < 1e9 ? 51 : 11;
  state.counters["peak_fraction"] =
      benchmark::Counter(flops / g_peak, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction_paired"] =
      fusedsl_bench::paired_peak_fraction([&] { amx.run(); }, flops, g_peak, rounds);
  state.counters["amx_matmuls"] = amx.stats().amx_matmuls;
  state.counters["interpreted_groups"] = amx.stats().interpreted_groups;
  std::vector<double> ratios;
  double best_f32 = 1e30, best_amx = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const double w0 = fusedsl_bench::wall_seconds(), t0 = fusedsl_bench::thread_seconds();
    f32.run();
    const double w1 = fusedsl_bench::wall_seconds(), t1 = fusedsl_bench::thread_seconds();
    amx.run();
    const double w2 = fusedsl_bench::wall_seconds(), t2 = fusedsl_bench::thread_seconds();
    ratios.push_back((t1 - t0) / (t2 - t1));
    best_f32 = std::min(best_f32, w1 - w0), best_amx = std::min(best_amx, w2 - w1);
  }
  std::nth_element(ratios.begin(), ratios.begin() + rounds / 2, ratios.end());
  state.counters["speedup_vs_f32_kernels_paired"] = ratios[std::size_t(rounds / 2)];
  state.counters["speedup_vs_f32_kernels_best"] = best_f32 / best_amx;
  state.counters["f32_kernels_peak_fraction_best"] = flops / best_f32 / g_peak;
  state.counters["amx_peak_fraction_best_of_f32_fma"] = flops / best_amx / g_peak;
}

// Times of the baseline cases (<model>_reference, <model>_eigen), taken from their own runs (the
// mean over repetitions), for the speedup counters: thread CPU time against one-thread cases, wall
// time against those named real_time (two threads).
inline void add_speedup(std::vector<benchmark::BenchmarkReporter::Run>& copy) {
  struct sums {
    double cpu = 0, wall = 0;
    int count = 0;
  };
  static std::map<std::string, sums> baseline_runs;  // key: "<model>_<baseline>"
  static const char* const baselines[] = {"reference", "eigen"};
  for (auto& r : copy) {
    const std::string name = r.benchmark_name();
    const std::string model = name.substr(0, name.find('_'));
    const std::string kind = name.substr(name.find('_') + 1);
    const bool aggregate = r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate;
    if (kind == "reference" || kind == "eigen") {
      if (aggregate) continue;
      sums& s = baseline_runs[model + "_" + kind];
      s.cpu += r.GetAdjustedCPUTime(), s.wall += r.GetAdjustedRealTime(), s.count += 1;
      if (kind == "reference") continue;  // the Eigen case also gets its speedup over the reference
    }
    if (aggregate && r.aggregate_name != "mean" && r.aggregate_name != "median") continue;
    const bool wall = name.find("real_time") != std::string::npos;
    for (const char* b : baselines) {
      const auto base = baseline_runs.find(model + "_" + b);
      if (base == baseline_runs.end() || kind == b) continue;
      const double base_sec = (wall ? base->second.wall : base->second.cpu) / base->second.count;
      r.counters[std::string("speedup_vs_") + b] =
          base_sec / (wall ? r.GetAdjustedRealTime() : r.GetAdjustedCPUTime());
    }
  }
}

template <class Base>
class with_speedup : public Base {
 public:
  void ReportRuns(const std::vector<benchmark::BenchmarkReporter::Run>& runs) override {
    std::vector<benchmark::BenchmarkReporter::Run> copy = runs;
    add_speedup(copy);
    Base::ReportRuns(copy);
  }
};
}  // namespace

int main(int argc, char** argv) {
  bool to_file = false;
  for (int i = 1; i < argc; ++i)
    to_file = to_file || std::string(argv[i]).rfind("--benchmark_out=", 0) == 0;
  benchmark::Initialize(&argc, argv);
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops_one_core", std::to_string(g_peak * 1e-9));
  using seed = fd::models::seed;
  using medium = fd::models::medium;
  benchmark::RegisterBenchmark("seed_reference", reference<seed>, "seed")
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("seed_eigen", plain_eigen<seed>)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("seed_fused", fused<seed>, 0)->Arg(1)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("seed_fused", fused<seed>, 0)
      ->Arg(2)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  // Two threads whose pool polls for 50 us before sleeping: the seed's kernels are split too.
  benchmark::RegisterBenchmark("seed_fused_polling", fused<seed>, 50)
      ->Arg(2)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("seedbf16weights_amx",
                               bf16_weights_amx<fd::models::seed_bf16_weights>)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("medium_reference", reference<medium>, "medium")
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("medium_eigen", plain_eigen<medium>)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("medium_fused", fused<medium>, 0)
      ->Arg(1)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("medium_fused", fused<medium>, 0)
      ->Arg(2)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("medium_fused_polling", fused<medium>, 50)
      ->Arg(2)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("mediumbf16weights_amx",
                               bf16_weights_amx<fd::models::medium_bf16_weights>)
      ->Unit(benchmark::kMillisecond);
  with_speedup<benchmark::ConsoleReporter> console;
  with_speedup<benchmark::JSONReporter> file;
  if (to_file) benchmark::RunSpecifiedBenchmarks(&console, &file);
  else benchmark::RunSpecifiedBenchmarks(&console);
  fusedsl_bench::warn_if_peak_was_low(g_peak);
  benchmark::Shutdown();
  return 0;
}
