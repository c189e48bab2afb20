// Flash attention vs the unfused form (Eigen: materialised scores, separate softmax, matmul) at
// seq 2048, head dim 64. Reports each case's fraction of the FMA peak and the fused kernel's
// speedup over the unfused one, both measured in this run.
#include "fusedsl/backend/cpu/kernels/attention.hpp"
#include "fusedsl/backend/cpu/kernels/attention_amx.hpp"
#include "fastest_call.hpp"
#include "fma_peak.hpp"

#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <chrono>
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

namespace k = fusedsl::cpu::kernels;
using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
double g_peak = 0;
std::map<std::string, double> g_unfused_seconds;  // mean per call, by case name
std::map<std::string, double> g_unfused_best;     // fastest call, by case name

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

double attention_flops(std::ptrdiff_t l, std::ptrdiff_t d, std::ptrdiff_t heads, bool causal) {
  const double full = 4.0 * double(l) * double(l) * double(d) * double(heads);
  return causal ? full * (double(l) + 1) / (2.0 * double(l)) : full;
}

std::string case_name(std::ptrdiff_t l, bool causal) {
  return std::to_string(l) + (causal ? "/causal" : "/full");
}

// args: seq, head_dim, heads, causal
void BM_attention_unfused_eigen(benchmark::State& state) {
  const std::ptrdiff_t l = state.range(0), d = state.range(1), heads = state.range(2);
  const bool causal = state.range(3) != 0;
  std::vector<mat> q, kk, v, o(std::size_t(heads), mat(l, d));
  for (std::ptrdiff_t h = 0; h < heads; ++h)
    q.push_back(mat::Random(l, d)), kk.push_back(mat::Random(l, d)), v.push_back(mat::Random(l, d));
  mat s(l, l);  // the L x L buffer the fused kernel avoids
  const float scale = 1.0f / std::sqrt(float(d));
  auto one_head = [&](std::size_t h) {
    s.noalias() = q[h] * kk[h].transpose();
    s *= scale;
    if (causal) s.triangularView<Eigen::StrictlyUpper>().setConstant(-INFINITY);
    const Eigen::VectorXf m = s.rowwise().maxCoeff();
    s = (s.colwise() - m).array().exp().matrix();
    const Eigen::VectorXf sum = s.rowwise().sum();
    o[h].noalias() = sum.cwiseInverse().asDiagonal() * (s * v[h]);
  };
  auto all_heads = [&] {
    for (std::ptrdiff_t h = 0; h < heads; ++h) one_head(std::size_t(h));
  };
  // One untimed call first: the first touch of the 16 MiB score buffer's fresh pages can cost
  // more than the call itself, and a short run (--benchmark_min_time=0.2) would report it.
  all_heads();
  const auto t = fusedsl_bench::time_calls(state, [&] {
    all_heads();
    benchmark::DoNotOptimize(o[0].data());
  });
  const double best = t.fastest;
  g_unfused_seconds[case_name(l, causal)] = t.thread_seconds / double(state.iterations());
  g_unfused_best[case_name(l, causal)] = best;
  state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction(
      [&] {
        one_head(0);
        benchmark::DoNotOptimize(o[0].data());
      },
      attention_flops(l, d, 1, causal), g_peak, 5);
  state.counters["peak_fraction_best"] = attention_flops(l, d, heads, causal) / best / g_peak;
  const double f = attention_flops(l, d, heads, causal) * double(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(f * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak_fraction"] = benchmark::Counter(f / g_peak, benchmark::Counter::kIsRate);
  state.counters["score_buffer_MiB"] = double(l * l * 4) / (1 << 20);
}

// Random Q, K, V and O of `heads` heads in [seq][heads][head_dim] layout, from the case's args
// (seq, head_dim, heads, causal), with the arguments the fused kernels take.
struct attention_case {
  std::ptrdiff_t l, d, heads;
  bool causal;
  std::vector<float> q, kk, v, o;
  k::attention_args a;
  k::attention_shape s;

  explicit attention_case(const benchmark::State& state)
      : l(state.range(0)), d(state.range(1)), heads(state.range(2)), causal(state.range(3) != 0),
        q(random_vector(std::size_t(l * heads * d), 1)), kk(random_vector(q.size(), 2)),
        v(random_vector(q.size(), 3)), o(q.size()), s{l, l, heads, heads, d} {
    a = k::attention_args_by_rows(s, q.data(), kk.data(), v.data(), o.data(), heads * d, heads * d);
    a.causal = causal;
  }
  double flops() const { return attention_flops(l, d, heads, causal); }
  std::string name() const { return case_name(l, causal); }
};

void BM_attention_fusedsl(benchmark::State& state) {
  attention_case c(state);
  std::vector<float> ws(k::attention_workspace_floats(c.d));
  const auto path = k::attention_path(state.range(4));
  k::flash_attention(c.s, c.a, ws.data(), nullptr, path);  // untimed: first touch of the buffers
  const auto t = fusedsl_bench::time_calls(state, [&] {
    k::flash_attention(c.s, c.a, ws.data(), nullptr, path);
    benchmark::DoNotOptimize(c.o.data());
  });
  const double best = t.fastest;
  state.counters["peak_fraction_best"] = c.flops() / best / g_peak;
  const double f = c.flops() * double(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(f * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak_fraction"] = benchmark::Counter(f / g_peak, benchmark::Counter::kIsRate);
  state.counters["workspace_KiB"] = double(ws.size() * 4) / 1024;
  state.counters["peak_fraction_paired"] = fusedsl_bench::paired_peak_fraction(
      [&] {
        k::flash_attention(c.s, c.a, ws.data(), nullptr, path);
        benchmark::DoNotOptimize(c.o.data());
      },
      c.flops(), g_peak, 10);
  const auto ref = g_unfused_seconds.find(c.name());
  if (ref != g_unfused_seconds.end()) {
    state.counters["speedup_vs_unfused"] =
        ref->second / (t.thread_seconds / double(state.iterations()));
    state.counters["speedup_vs_unfused_best"] = g_unfused_best[c.name()] / best;
  }
}

// The same on AMX-BF16 tiles (Q, K, V, P rounded to bf16; opt-in arithmetic): fractions of the
// f32 FMA peak, and the speedup over the f32 kernel as the median over rounds of one f32 call then
// one AMX call (thread CPU time).
void BM_attention_amx(benchmark::State& state) {
  if (!k::amx_available()) {
    state.SkipWithError("AMX-BF16 is not available in this build or on this CPU");
    return;
  }
  attention_case c(state);
  std::vector<float> ws(k::attention_workspace_floats(c.d));
  std::vector<k::bf16_bits> ws_amx(k::attention_amx_workspace_elements(c.d, c.l));
  k::flash_attention_amx(c.s, c.a, ws_amx.data());  // untimed: first touch of the buffers
  const auto t = fusedsl_bench::time_calls(state, [&] {
    k::flash_attention_amx(c.s, c.a, ws_amx.data());
    benchmark::DoNotOptimize(c.o.data());
  });
  const double best = t.fastest;
  const double flops = c.flops();
  state.counters["peak_fraction_best"] = flops / best / g_peak;
  const double f = flops * double(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(f * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak_fraction"] = benchmark::Counter(f / g_peak, benchmark::Counter::kIsRate);
  state.counters["workspace_KiB"] = double(ws_amx.size() * 2) / 1024;
  std::vector<double> ratio;
  for (int r = 0; r < 41; ++r) {
    double t0 = fusedsl_bench::thread_seconds();
    k::flash_attention(c.s, c.a, ws.data());
    const double t1 = fusedsl_bench::thread_seconds();
    k::flash_attention_amx(c.s, c.a, ws_amx.data());
    const double t2 = fusedsl_bench::thread_seconds();
    benchmark::DoNotOptimize(c.o.data());
    ratio.push_back((t1 - t0) / (t2 - t1));
  }
  std::sort(ratio.begin(), ratio.end());
  state.counters["speedup_vs_f32_kernel_paired"] = ratio[ratio.size() / 2];
  const auto ref = g_unfused_seconds.find(c.name());
  if (ref != g_unfused_seconds.end())
    state.counters["speedup_vs_unfused"] =
        ref->second / (t.thread_seconds / double(state.iterations()));
}

// seq 2048 (a long sequence: the flash path), the seed model's attention (seq 128, 4 heads of 32)
// and the medium model's (seq 512, 8 heads of 64).
void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"seq", "d", "heads", "causal"});
  b->Args({2048, 64, 1, 0})->Args({2048, 64, 1, 1})->Args({128, 32, 4, 0})->Args({256, 64, 2, 1})
      ->Args({512, 64, 8, 0});
  b->Unit(benchmark::kMicrosecond);
}
// The fused kernel also with its path forced (0 automatic, 1 flash, 2 whole_rows) on short ones.
void fused_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"seq", "d", "heads", "causal", "path"});
  b->Args({2048, 64, 1, 0, 0})->Args({2048, 64, 1, 1, 0});
  for (int path : {0, 1})
    b->Args({128, 32, 4, 0, path})->Args({256, 64, 2, 1, path})->Args({512, 64, 8, 0, path});
  b->Unit(benchmark::kMicrosecond);
}
// Mean times are thread CPU time, fastest calls wall time (see fma_peak.hpp). The unfused reference
// runs first so the fused case can report its speedup.
BENCHMARK(BM_attention_unfused_eigen)->Apply(shapes);
BENCHMARK(BM_attention_fusedsl)->Apply(fused_shapes);
BENCHMARK(BM_attention_amx)->Apply(shapes);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak * 1e-9));
  benchmark::RunSpecifiedBenchmarks();
  fusedsl_bench::warn_if_peak_was_low(g_peak);
  benchmark::Shutdown();
}
