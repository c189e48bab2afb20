// Rotary position embeddings as users write them, one thread, as ratios measured in one run:
// GPT-J's shapes (16 heads of 256, rotary on the first 64 dims of each head), 256 tokens.
//   copy_floor          y = x over the same [L, H, Dh] f32 array, a vectorised loop: the traffic
//                       floor (a rotary embedding reads x and writes y once)
//   rotary_halves       GPT-NeoX / LLaMA: the rotated dims split into two halves (rotate_half)
//   rotary_interleaved  GPT-J: the rotated dims as interleaved pairs (x0, x1), (x2, x3), ...,
//                       written with reshape to [..., pairs, 2], slices of extent 1 and a concat
// Counters:
//   floor_fraction          the case's bytes per second over copy_floor's (copy_floor runs first)
//   time_vs_halves          rotary_interleaved's time per call over rotary_halves' (halves run
//                           before it)
//   groups, interpreted_groups   fusion groups, and those the interpreter ran (0: all generated)
// Run: build/release/benchmarks/model/rotary_bench --benchmark_out=rotary.json
//        --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/fusedsl.hpp"

namespace fd = fusedsl;

namespace {

constexpr std::int64_t L = 256, H = 16, Dh = 256, R = 64;
constexpr double bytes = 2.0 * double(L * H * Dh) * 4.0;  // x read, y written

constexpr auto x = fd::input<"x", float, L, H, Dh>();
constexpr auto cos_in = fd::input<"cos", float, L, R / 2>();
constexpr auto sin_in = fd::input<"sin", float, L, R / 2>();
constexpr auto pass = fd::slice<2, R, Dh>(x);

constexpr auto halves() {
  constexpr auto c = fd::reshape<L, 1, R / 2>(cos_in);
  constexpr auto s = fd::reshape<L, 1, R / 2>(sin_in);
  constexpr auto t1 = fd::slice<2, 0, R / 2>(x);
  constexpr auto t2 = fd::slice<2, R / 2, R>(x);
  return fd::compile(fd::concat<2>(t1 * c - t2 * s, t2 * c + t1 * s, pass));
}

constexpr auto interleaved() {
  constexpr auto c = fd::reshape<L, 1, R / 2, 1>(cos_in);
  constexpr auto s = fd::reshape<L, 1, R / 2, 1>(sin_in);
  constexpr auto pairs = fd::reshape<L, H, R / 2, 2>(fd::slice<2, 0, R>(x));
  constexpr auto even = fd::slice<3, 0, 1>(pairs);
  constexpr auto odd = fd::slice<3, 1, 2>(pairs);
  constexpr auto rotated = fd::concat<3>(even * c - odd * s, odd * c + even * s);
  return fd::compile(fd::concat<2>(fd::reshape<L, H, R>(rotated), pass));
}

using halves_program = decltype(halves());
using interleaved_program = decltype(interleaved());

double g_floor_rate = 0;   // bytes / s of copy_floor
double g_halves_time = 0;  // s per call of rotary_halves

template <class Program>
struct bound {
  static_assert(fd::cpu::executor<Program>::kernels_plan().n_refused == 0,
                "every group of a benchmarked program runs a generated kernel");
  fd::cpu::executor<Program> ex{Program{}, fd::cpu::threads{1}};
  std::vector<fd::dynamic_tensor> storage;
  fd::dynamic_tensor out{fd::dtype::f32, fd::make_dims(L, H, Dh)};

  bound() {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (const auto& b : ex.bindings()) {
      storage.emplace_back(b.type, b.shape);
      for (std::int64_t i = 0; i < b.shape.size(); ++i) storage.back().data<float>()[i] = u(rng);
      ex.bind(b.name, storage.back().ref());
    }
    ex.bind_output(0, out.ref());
  }
};

void copy_floor(benchmark::State& state) {
  std::vector<float> a(std::size_t(L * H * Dh), 1.0f), y(a.size());
  using V = fd::cpu::kernels::vec_t<fd::cpu::kernels::native_arch>;
  constexpr int W = fd::cpu::kernels::simd<fd::cpu::kernels::native_arch>::width;
  const auto t0 = fusedsl_bench::thread_seconds();
  long calls = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < a.size(); i += W) V::load_unaligned(&a[i]).store_unaligned(&y[i]);
    benchmark::DoNotOptimize(y.data());
    ++calls;
  }
  g_floor_rate = bytes * double(calls) / (fusedsl_bench::thread_seconds() - t0);
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

template <class Program>
double timed(benchmark::State& state) {
  bound<Program> p;
  const auto t0 = fusedsl_bench::thread_seconds();
  long calls = 0;
  for (auto _ : state) {
    p.ex.run();
    ++calls;
  }
  const double t = (fusedsl_bench::thread_seconds() - t0) / double(calls);
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["floor_fraction"] = g_floor_rate > 0 ? bytes / t / g_floor_rate : 0.0;
  state.counters["groups"] = Program::fusion.n_groups;
  state.counters["interpreted_groups"] = p.ex.stats().interpreted_groups;
  return t;
}

void rotary_halves(benchmark::State& state) {
  g_halves_time = timed<halves_program>(state);
}

void rotary_interleaved(benchmark::State& state) {
  const double t = timed<interleaved_program>(state);
  state.counters["time_vs_halves"] = g_halves_time > 0 ? t / g_halves_time : 0.0;
}

}  // namespace

BENCHMARK(copy_floor)->Unit(benchmark::kMicrosecond);
BENCHMARK(rotary_halves)->Unit(benchmark::kMicrosecond);
BENCHMARK(rotary_interleaved)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
