// The seed and medium transformers, fused (cpu::executor) against unfused (the Eigen reference
// backend, every node materialised), as ratios measured in one run:
//   peak_fraction           model FLOPs / time / the FMA peak measured at start-up (same process)
//   peak_fraction_paired    one thread: rounds of one call then an FMA-chain run of the same
//                           length, both in thread CPU time (fma_peak.hpp); steadiest under load
//   speedup_vs_reference    reference time / this case's time (the reference case runs first)
// One-thread cases are timed in thread CPU time (other tenants' time slices left out), two-thread
// cases in wall time.
// Run: build/release/benchmarks/model/model_bench --benchmark_out=model.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <string>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/models/transformer.hpp"

namespace fd = fusedsl;

namespace {
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
    for (std::int64_t i = 0; i < b.shape.size(); ++i)
      w.tensors.back().template data<float>()[i] = (b.name.find("gamma") != std::string::npos ? 1.0f : 0.0f) + nd(rng);
  }
  return w;
}

template <class Model>
void reference(benchmark::State& state, const char* name) {
  using P = typename Model::program_type;
  const weights w = random_weights<P>(1);
  fd::reference::evaluator ev(fd::graph::graph_view(P::graph));
  for (std::size_t i = 0; i < w.names.size(); ++i) ev.bind(w.names[i], const_cast<fd::dynamic_tensor&>(w.tensors[i]).ref());
  for (auto _ : state) benchmark::DoNotOptimize(ev.run());
  state.counters["flops"] = benchmark::Counter(Model::flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction"] =
      benchmark::Counter(Model::flops() / g_peak, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction_paired"] =
      fusedsl_bench::paired_peak_fraction([&] { benchmark::DoNotOptimize(ev.run()); }, Model::flops(), g_peak, 5);
  (void)name;
}

template <class Model>
void fused(benchmark::State& state) {
  using P = typename Model::program_type;
  const weights w = random_weights<P>(1);
  fd::cpu::executor<P> ex(P{}, fd::cpu::threads{int(state.range(0))});
  for (std::size_t i = 0; i < w.names.size(); ++i) ex.bind(w.names[i], const_cast<fd::dynamic_tensor&>(w.tensors[i]).ref());
  fd::dynamic_tensor out(fd::dtype::f32, P::graph[P::graph.outputs[0]].shape);
  ex.bind_output(0, out.ref());
  for (auto _ : state) {
    ex.run();
    benchmark::ClobberMemory();
  }
  state.counters["flops"] = benchmark::Counter(Model::flops(), benchmark::Counter::kIsIterationInvariantRate);
  // Against the peak of the cores in use (the peak is measured on one core).
  state.counters["peak_fraction"] = benchmark::Counter(Model::flops() / (g_peak * double(state.range(0))),
                                                       benchmark::Counter::kIsIterationInvariantRate);
  state.counters["interpreted_groups"] = ex.stats().interpreted_groups;
  if (state.range(0) == 1)
    state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction([&] { ex.run(); }, Model::flops(), g_peak,
                                                                                  Model::flops() < 1e9 ? 50 : 10);
}

// Times of the reference cases, taken from their own runs (the mean over repetitions), for the
// speedup counters: thread CPU time against one-thread cases, wall time against those named
// real_time (two threads).
inline void add_speedup(std::vector<benchmark::BenchmarkReporter::Run>& copy) {
  struct sums {
    double cpu = 0, wall = 0;
    int count = 0;
  };
  static std::map<std::string, sums> reference_runs;
  for (auto& r : copy) {
    const std::string name = r.benchmark_name();
    const std::string model = name.substr(0, name.find('_'));
    const bool aggregate = r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate;
    if (name.find("reference") != std::string::npos) {
      if (aggregate) continue;
      sums& s = reference_runs[model];
      s.cpu += r.GetAdjustedCPUTime(), s.wall += r.GetAdjustedRealTime(), s.count += 1;
      continue;
    }
    const auto ref = reference_runs.find(model);
    if (ref == reference_runs.end() || (aggregate && r.aggregate_name != "mean" && r.aggregate_name != "median")) continue;
    const bool wall = name.find("real_time") != std::string::npos;
    const double ref_sec = (wall ? ref->second.wall : ref->second.cpu) / ref->second.count;
    r.counters["speedup_vs_reference"] = ref_sec / (wall ? r.GetAdjustedRealTime() : r.GetAdjustedCPUTime());
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
  for (int i = 1; i < argc; ++i) to_file = to_file || std::string(argv[i]).rfind("--benchmark_out=", 0) == 0;
  benchmark::Initialize(&argc, argv);
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops_one_core", std::to_string(g_peak * 1e-9));
  using seed = fd::models::seed;
  using medium = fd::models::medium;
  benchmark::RegisterBenchmark("seed_reference", reference<seed>, "seed")->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("seed_fused", fused<seed>)->Arg(1)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("seed_fused", fused<seed>)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("medium_reference", reference<medium>, "medium")->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("medium_fused", fused<medium>)->Arg(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("medium_fused", fused<medium>)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
  with_speedup<benchmark::ConsoleReporter> console;
  with_speedup<benchmark::JSONReporter> file;
  if (to_file) benchmark::RunSpecifiedBenchmarks(&console, &file);
  else benchmark::RunSpecifiedBenchmarks(&console);
  benchmark::Shutdown();
  return 0;
}
