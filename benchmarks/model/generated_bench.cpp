// Programs outside the transformer composites, run by kernels generated from their fusion groups,
// one thread, as ratios measured in one run:
//   elementwise_fused      gelu_tanh(a * b + c) * d over four [512, 2048] f32 inputs
//   elementwise_floor      y = a * b + c * d over the same five arrays, a vectorised loop: the
//                          traffic floor (the fused case moves the same bytes)
//   elementwise_eigen      Eigen Tensor's expression of the fused case's math (one pass)
//   ffn_gelu               feed_forward<"ffn", 1376> on x [256, 512] (the packed GEMM's shape)
//   ffn_swiglu_two_gemms   down(silu(gate(x)) * up(x)), the same shapes, gate and up as two GEMMs
//                          (cpu::gemm_pairs{false}: up's product stored, then read by gate's
//                          epilogue)
//   ffn_swiglu             the same with gate and up as one GEMM pair (the default)
//   ffn_swiglu_row_two_gemms, ffn_swiglu_row
//                          the same FFN on one row (a decode step's shape), both ways
//   llama_block            RMSNorm, RoPE, 8 heads of 64 with 2 kv heads, causal, SwiGLU 1376;
//                          seq 256, d 512 (llama_block_two_gemms: its SwiGLU as two GEMMs)
//   bert_block             post-LN, 12 heads of 32, FFN 1536, erf GELU, eps 1e-12, a key-padding
//                          mask; batch 4, seq 128, d 384
// Counters:
//   bytes_per_second / floor_fraction   elementwise: traffic rate, and the fused rate over the
//                                       floor case's (the floor runs first)
//   speedup_vs_eigen                    elementwise_fused against elementwise_eigen
//   peak_fraction                       matmul FLOPs (attention's included, causal not halved)
//                                       over time over the FMA peak measured at start-up
//   gflops_fraction_of_ffn              ffn_swiglu's GFLOP/s over ffn_gelu's
//   speedup_vs_two_gemms                ffn_swiglu, ffn_swiglu_row and llama_block against their
//                                       two-GEMM runs
//   paired_gemms                        GEMM pairs run per call
//   interpreted_groups                  groups the interpreter ran (0: every group generated)
// Run: build/release/benchmarks/model/generated_bench --benchmark_out=generated.json
//        --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/fusedsl.hpp"
#include "fusedsl/models/llama.hpp"

#include <unsupported/Eigen/CXX11/Tensor>

namespace fd = fusedsl;

namespace {

double g_peak = 0;
double g_floor_rate = 0;   // bytes / s of elementwise_floor
double g_eigen_time = 0;   // s per call of elementwise_eigen
double g_ffn_rate = 0;     // FLOP / s of ffn_gelu
double g_swiglu_two_gemms = 0;  // s per call of ffn_swiglu_two_gemms
double g_swiglu_row_two_gemms = 0;  // s per call of ffn_swiglu_row_two_gemms
double g_llama_two_gemms = 0;   // s per call of llama_block_two_gemms

template <class Program>
struct bound {
  static_assert(fd::cpu::executor<Program>::kernels_plan().n_refused == 0,
                "every group of a benchmarked program runs a generated kernel");
  fd::cpu::executor<Program> ex;
  std::vector<fd::dynamic_tensor> storage;
  std::vector<fd::dynamic_tensor> outs;

  explicit bound(unsigned seed, fd::cpu::gemm_pairs pairs = {true})
      : ex(Program{}, fd::cpu::threads{1}, pairs) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    for (const auto& b : ex.bindings()) {
      storage.emplace_back(b.type, b.shape);
      fd::dynamic_tensor& t = storage.back();
      for (std::int64_t i = 0; i < b.shape.size(); ++i) {
        const float v =
            nd(rng) * (b.kind == fd::graph::op_kind::input ? 20.0f : 1.0f) +
            (b.name.find("norm") != std::string::npos || b.name.find("gamma") != std::string::npos);
        if (b.type == fd::dtype::f32) t.data<float>()[i] = v;
        else if (b.type == fd::dtype::boolean) t.data<bool>()[i] = (i % 128) < 100;  // padded tails
        else if (b.type == fd::dtype::i32) t.data<std::int32_t>()[i] = std::int32_t(i % 7);
      }
      ex.bind(b.name, t.ref());
    }
    for (int o = 0; o < Program::graph.n_outputs; ++o) {
      const auto& n = Program::graph[Program::graph.outputs[std::size_t(o)]];
      outs.emplace_back(n.type, n.shape);
      ex.bind_output(o, outs.back().ref());
    }
  }
};

// ---- elementwise ----
constexpr std::int64_t R = 512, C = 2048;
constexpr auto ea = fd::input<"a", float, R, C>();
constexpr auto eb = fd::input<"b", float, R, C>();
constexpr auto ec = fd::input<"c", float, R, C>();
constexpr auto ed = fd::input<"d", float, R, C>();
using elementwise_program = decltype(fd::compile(fd::gelu_tanh(ea * eb + ec) * ed));
constexpr double elementwise_bytes = 5.0 * double(R * C) * 4.0;

void elementwise_floor(benchmark::State& state) {
  std::vector<float> a(R * C, 1.0f), b(R * C, 0.5f), c(R * C, 0.25f), d(R * C, 2.0f), y(R * C);
  using V = fd::cpu::kernels::vec_t<fd::cpu::kernels::native_arch>;
  constexpr int W = fd::cpu::kernels::simd<fd::cpu::kernels::native_arch>::width;
  const auto t0 = fusedsl_bench::thread_seconds();
  long calls = 0;
  for (auto _ : state) {
    for (std::int64_t i = 0; i < R * C; i += W) {
      const V x = V::load_unaligned(&a[std::size_t(i)]) * V::load_unaligned(&b[std::size_t(i)]) +
                  V::load_unaligned(&c[std::size_t(i)]) * V::load_unaligned(&d[std::size_t(i)]);
      x.store_unaligned(&y[std::size_t(i)]);
    }
    benchmark::DoNotOptimize(y.data());
    ++calls;
  }
  g_floor_rate = elementwise_bytes * double(calls) / (fusedsl_bench::thread_seconds() - t0);
  state.counters["bytes_per_second"] =
      benchmark::Counter(elementwise_bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void elementwise_eigen(benchmark::State& state) {
  using T = Eigen::Tensor<float, 2, Eigen::RowMajor>;
  T a(R, C), b(R, C), c(R, C), d(R, C), y(R, C);
  a.setConstant(1.0f), b.setConstant(0.5f), c.setConstant(0.25f), d.setConstant(2.0f);
  const auto t0 = fusedsl_bench::thread_seconds();
  long calls = 0;
  for (auto _ : state) {
    const auto u = a * b + c;
    // 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))) * d
    y = (u * 0.5f * ((u + u * u * u * 0.044715f) * 0.7978845608f).tanh() + u * 0.5f) * d;
    benchmark::DoNotOptimize(y.data());
    ++calls;
  }
  g_eigen_time = (fusedsl_bench::thread_seconds() - t0) / double(calls);
  state.counters["bytes_per_second"] =
      benchmark::Counter(elementwise_bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void elementwise_fused(benchmark::State& state) {
  bound<elementwise_program> p(1);
  const auto t0 = fusedsl_bench::thread_seconds();
  long calls = 0;
  for (auto _ : state) {
    p.ex.run();
    ++calls;
  }
  const double t = (fusedsl_bench::thread_seconds() - t0) / double(calls);
  state.counters["bytes_per_second"] =
      benchmark::Counter(elementwise_bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["floor_fraction"] = g_floor_rate > 0 ? elementwise_bytes / t / g_floor_rate : 0.0;
  state.counters["speedup_vs_eigen"] = g_eigen_time > 0 ? g_eigen_time / t : 0.0;
  state.counters["interpreted_groups"] = p.ex.stats().interpreted_groups;
}

// ---- feed-forward: GELU FFN and SwiGLU at the same shapes ----
constexpr std::int64_t FL = 256, FD = 512, FH = 1376;
constexpr auto fx = fd::input<"x", float, FL, FD>();
using ffn_program = decltype(fd::compile(fd::nn::feed_forward<"ffn", FH>(fx)));
using swiglu_program = decltype(fd::compile(fd::nn::linear<"down", FD, false>(
    fd::silu(fd::nn::linear<"gate", FH, false>(fx)) * fd::nn::linear<"up", FH, false>(fx))));
constexpr auto fx1 = fd::input<"x", float, 1, FD>();
using swiglu_row_program = decltype(fd::compile(fd::nn::linear<"down", FD, false>(
    fd::silu(fd::nn::linear<"gate", FH, false>(fx1)) * fd::nn::linear<"up", FH, false>(fx1))));
constexpr double ffn_flops = 2.0 * 2.0 * double(FL * FD * FH);
constexpr double swiglu_row_flops = 3.0 * 2.0 * double(FD * FH);
constexpr double swiglu_flops = 3.0 * 2.0 * double(FL * FD * FH);

template <class Program>
double timed(benchmark::State& state, bound<Program>& p, double flops) {
  const auto t0 = fusedsl_bench::thread_seconds();
  long calls = 0;
  for (auto _ : state) {
    p.ex.run();
    ++calls;
  }
  const double t = (fusedsl_bench::thread_seconds() - t0) / double(calls);
  state.counters["peak_fraction"] = flops / t / g_peak;
  state.counters["interpreted_groups"] = p.ex.stats().interpreted_groups;
  state.counters["fast_groups"] = p.ex.stats().fast_groups;
  state.counters["paired_gemms"] = p.ex.stats().paired_gemms;
  return flops / t;
}

// Program timed with its GEMM pairs run apart (keeping the time per call in `two_gemms`) or as
// pairs (reporting the speedup over that time); the FLOP rate.
template <class Program>
double apart_or_paired(benchmark::State& state, unsigned seed, double flops, bool paired,
                       double& two_gemms) {
  bound<Program> p(seed, fd::cpu::gemm_pairs{paired});
  const double rate = timed(state, p, flops);
  if (paired)
    state.counters["speedup_vs_two_gemms"] = two_gemms * rate / flops;
  else
    two_gemms = flops / rate;
  return rate;
}

void ffn_gelu(benchmark::State& state) {
  bound<ffn_program> p(2);
  g_ffn_rate = timed(state, p, ffn_flops);
}

void ffn_swiglu_two_gemms(benchmark::State& state) {
  apart_or_paired<swiglu_program>(state, 3, swiglu_flops, false, g_swiglu_two_gemms);
}

void ffn_swiglu(benchmark::State& state) {
  const double rate =
      apart_or_paired<swiglu_program>(state, 3, swiglu_flops, true, g_swiglu_two_gemms);
  state.counters["gflops_fraction_of_ffn"] = g_ffn_rate > 0 ? rate / g_ffn_rate : 0.0;
}

void ffn_swiglu_row_two_gemms(benchmark::State& state) {
  apart_or_paired<swiglu_row_program>(state, 6, swiglu_row_flops, false, g_swiglu_row_two_gemms);
}

void ffn_swiglu_row(benchmark::State& state) {
  apart_or_paired<swiglu_row_program>(state, 6, swiglu_row_flops, true, g_swiglu_row_two_gemms);
}

// ---- a LLaMA-style block ----
using llama_model = fd::models::llama_block_model<256, 512, 8, 2, 1376>;
using llama_program = llama_model::program_type;
constexpr double llama_flops = llama_model::flops();

void llama_block_two_gemms(benchmark::State& state) {
  apart_or_paired<llama_program>(state, 4, llama_flops, false, g_llama_two_gemms);
}

void llama_block(benchmark::State& state) {
  apart_or_paired<llama_program>(state, 4, llama_flops, true, g_llama_two_gemms);
}

// ---- a BERT-style block with a key-padding mask ----
constexpr std::int64_t BB = 4, BL = 128, BD = 384, BH = 12, BF = 1536;
constexpr auto bx = fd::input<"x", float, BB, BL, BD>();
constexpr auto bmask = fd::input<"mask", bool, BB, BL>();
constexpr auto bert =
    fd::nn::transformer_block<fd::nn::post_ln, BH, BF, BH, false, fd::nn::activation::gelu, 1e-12>;
using bert_program = decltype(fd::compile(bert(bx, bmask)));
constexpr double bert_flops =
    double(BB) * (2.0 * double(BL * BD * BD) * 4.0 + 2.0 * 2.0 * double(BL * BL * BD) +
                  2.0 * 2.0 * double(BL * BD * BF));

void bert_block(benchmark::State& state) {
  bound<bert_program> p(5);
  timed(state, p, bert_flops);
}

}  // namespace

BENCHMARK(elementwise_floor)->Unit(benchmark::kMicrosecond)->MinTime(0.3);
BENCHMARK(elementwise_eigen)->Unit(benchmark::kMicrosecond)->MinTime(0.3);
BENCHMARK(elementwise_fused)->Unit(benchmark::kMicrosecond)->MinTime(0.3);
BENCHMARK(ffn_gelu)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(ffn_swiglu_two_gemms)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(ffn_swiglu)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(ffn_swiglu_row_two_gemms)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(ffn_swiglu_row)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(llama_block_two_gemms)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(llama_block)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(bert_block)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak * 1e-9));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
