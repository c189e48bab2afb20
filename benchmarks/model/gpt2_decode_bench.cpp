// GPT-2 small (12 layers, 768 wide, 12 heads, vocab 50257, 1024 positions) decoding one sequence
// with its KV cache (runtime/gpt2_generator.hpp), one thread, random weights N(0, 0.02) written as
// a safetensors checkpoint in memory. Ratios measured in one run:
//   stream_copy               a STREAM-like copy of two 512 MiB f32 arrays: the memory bandwidth
//                             (bytes read + written per second), measured first
//   decode/ctx:N/weights:W    one decode step with N tokens in the cache, W = f32, bf16 or int8
//                             weights (bf16 and int8: a bf16 KV cache; int8: the matrices
//                             quantized per output channel when the f32 checkpoint is bound)
//   decode_f32_cache/ctx:N/weights:bf16  bf16 weights over an f32 KV cache
//   decode_paged/weights:W/batch:B/ctx:N  one paged batch step (runtime/gpt2_paged.hpp) of B
//                             sequences with N tokens each in pages of 16 positions, W = f32 or
//                             bf16 weights (bf16: the pages too); its tokens_per_second counts
//                             the B tokens
//   prefill/len:512           the prompt's forward pass over a bucket of 512 tokens
// Counters:
//   tokens_per_second
//   bytes_per_token           weight bytes (the LM head's table once) + cache bytes read (keys and
//                             values of every layer at N + 1 positions); paged: bytes_per_step,
//                             the weights once and every sequence's cache
//   roofline_fraction         bytes_per_token / time over the stream_copy bandwidth
//   read_fraction             the same over what one core reads alone (measure_read_bandwidth)
//   peak_fraction             prefill: matmul FLOPs (causal attention counted in full) over time
//                             over the FMA peak measured at start-up
// Run: build/release/benchmarks/model/gpt2_decode_bench --benchmark_out=gpt2_decode.json
//        --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/io/safetensors_writer.hpp"
#include "fusedsl/runtime/gpt2_generator.hpp"
#include "fusedsl/runtime/gpt2_paged.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;

namespace {

double g_bandwidth = 0;       // bytes / s of stream_copy
double g_read_bandwidth = 0;  // bytes / s read by one core (measure_read_bandwidth)
double g_peak = 0;

using small_f32 = fm::gpt2_small_config;
// bf16 weights and a bf16 KV cache (as transformers runs a bf16 model: its cache in the model's
// dtype).
using small_bf16_weights = fm::gpt2_config<12, 768, 12, 50257, 1024, fd::bf16>;
using small_bf16 = small_bf16_weights::with_cache<fd::bf16>;
// int8 weights (linear layers and the tied embedding; scales, biases and norms f32), bf16 cache.
using small_int8 = fm::gpt2_config<12, 768, 12, 50257, 1024, std::int8_t>::with_cache<fd::bf16>;

// GPT-2 small's tensors under their Hugging Face names, N(0, 0.02) (LayerNorm weights 1).
struct checkpoint {
  std::string bytes;
  fd::io::safetensors_file file;
  static std::string make() {
    constexpr std::int64_t D = 768, F = 3072, V = 50257, P = 1024;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes = {
        {"wte.weight", {V, D}}, {"wpe.weight", {P, D}}, {"ln_f.weight", {D}}, {"ln_f.bias", {D}}};
    for (int i = 0; i < 12; ++i) {
      const std::string h = "h." + std::to_string(i) + ".";
      for (const char* ln : {"ln_1", "ln_2"}) {
        shapes.push_back({h + ln + ".weight", {D}});
        shapes.push_back({h + ln + ".bias", {D}});
      }
      shapes.push_back({h + "attn.c_attn.weight", {D, 3 * D}});
      shapes.push_back({h + "attn.c_attn.bias", {3 * D}});
      shapes.push_back({h + "attn.c_proj.weight", {D, D}});
      shapes.push_back({h + "attn.c_proj.bias", {D}});
      shapes.push_back({h + "mlp.c_fc.weight", {D, F}});
      shapes.push_back({h + "mlp.c_fc.bias", {F}});
      shapes.push_back({h + "mlp.c_proj.weight", {F, D}});
      shapes.push_back({h + "mlp.c_proj.bias", {D}});
    }
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    std::vector<std::vector<float>> values;
    values.reserve(shapes.size());
    std::vector<fd::io::safetensors_entry> entries;
    for (const auto& [name, shape] : shapes) {
      std::int64_t n = 1;
      for (std::int64_t s : shape) n *= s;
      std::vector<float> v(static_cast<std::size_t>(n));
      const bool gain = name.find("ln_") != std::string::npos && name.ends_with(".weight");
      for (float& x : v) x = gain ? 1.0f : nd(rng);
      values.push_back(std::move(v));
      entries.push_back(
          fd::io::make_safetensors_entry(name, std::span<const float>(values.back()), shape));
    }
    return fd::io::serialize_safetensors(entries);
  }
  checkpoint()
      : bytes(make()),
        file(fd::io::safetensors_file::parse(
            std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), "gpt2-small")) {}
};

checkpoint& weights() {
  static checkpoint c;
  return c;
}

template <class Cfg>
auto& generator() {
  static auto g = std::make_unique<fm::gpt2_generator<Cfg, 128, 512, 1024>>(weights().file);
  return *g;
}

void stream_copy(benchmark::State& state) {
  const std::size_t n = std::size_t(1) << 27;  // 512 MiB of f32 each
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n * sizeof(float));
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  const double bytes = 2.0 * double(n) * sizeof(float);
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("read + write");
}

// The rate of a read-only pass over 512 MiB on one core, for the decode cases' read_fraction: a
// vector sum over the two halves at once (two streams, eight accumulators), the best of five
// passes. On some CPUs it is well under the copy's rate (read + written bytes; the copy's stores
// bypass the cache).
double measure_read_bandwidth() {
  namespace k = fusedsl::cpu::kernels;
  using S = k::simd<k::native_arch>;
  constexpr std::size_t W = S::width;
  const std::size_t n = std::size_t(1) << 27, half = n / 2;
  std::vector<float> a(n, 1.0f);
  const float* lo = a.data();
  const float* hi = a.data() + half;
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const double t0 = fusedsl_bench::wall_seconds();
    S::vec s[8] = {S::vec(0.0f), S::vec(0.0f), S::vec(0.0f), S::vec(0.0f),
                   S::vec(0.0f), S::vec(0.0f), S::vec(0.0f), S::vec(0.0f)};
    for (std::size_t i = 0; i + 4 * W <= half; i += 4 * W)
      for (std::size_t j = 0; j < 4; ++j) {
        s[j] = s[j] + S::load(lo + i + j * W);
        s[4 + j] = s[4 + j] + S::load(hi + i + j * W);
      }
    float total = S::reduce_add(((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
    benchmark::DoNotOptimize(total);
    const double t = fusedsl_bench::wall_seconds() - t0;
    best = std::max(best, double(n) * sizeof(float) / t);
  }
  return best;
}

// The rate of the copy, measured here once for the decode cases' counters.
double measure_bandwidth() {
  const std::size_t n = std::size_t(1) << 27;
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const double t0 = fusedsl_bench::wall_seconds();
    std::memcpy(b.data(), a.data(), n * sizeof(float));
    benchmark::DoNotOptimize(b.data());
    const double t = fusedsl_bench::wall_seconds() - t0;
    best = std::max(best, 2.0 * double(n) * sizeof(float) / t);
  }
  return best;
}

// Untimed calls for about `seconds` before a case's timed loop, so that the first case run does
// not also pay for the first touch of its pages and the clock's ramp (Debian 12's Google
// Benchmark 1.7 has no MinWarmUpTime).
template <class F>
void warm_up(F&& call, double seconds = 0.3) {
  const double t0 = fusedsl_bench::wall_seconds();
  do call();
  while (fusedsl_bench::wall_seconds() - t0 < seconds);
}

template <class Cfg>
void decode(benchmark::State& state) {
  auto& g = generator<Cfg>();
  const std::int64_t ctx = state.range(0);
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(ctx));
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = std::int32_t((i * 7919) % 50257);
  g.prefill(prompt);
  warm_up([&] {
    g.truncate(ctx);
    benchmark::DoNotOptimize(g.step(464).data());
  });
  for (auto _ : state) {
    g.truncate(ctx);
    benchmark::DoNotOptimize(g.step(464).data());
  }
  const double bytes = Cfg::weight_bytes() + Cfg::cache_bytes_per_position() * double(ctx + 1);
  state.counters["tokens_per_second"] =
      benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes_per_token"] = bytes;
  state.counters["bandwidth"] = g_bandwidth;
  state.counters["roofline_fraction"] =
      benchmark::Counter(bytes / g_bandwidth, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["read_fraction"] =
      benchmark::Counter(bytes / g_read_bandwidth, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["interpreted_groups"] = g.interpreted_groups();
}

// 8 sequences of up to 160 positions, pages of 16 positions, a pool of 80 pages.
template <class Cfg>
using paged = fm::gpt2_paged_decoder<Cfg, 8, 160, 16, 80, 128>;

template <class Cfg>
void decode_paged(benchmark::State& state) {
  using decoder = paged<Cfg>;
  static auto dec = std::make_unique<decoder>(weights().file);
  const std::int64_t batch = state.range(0), ctx = state.range(1);
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(ctx));
  std::vector<std::vector<std::int32_t>> pages(static_cast<std::size_t>(batch));
  std::vector<typename decoder::row> rows;
  for (std::int64_t s = 0; s < batch; ++s) {
    // Sequence s owns pages s, s + B, s + 2B, ...: interleaved through the pool.
    for (std::int64_t j = 0; j < decoder::pages_for(ctx + 1); ++j)
      pages[std::size_t(s)].push_back(std::int32_t(s + j * batch));
    for (std::size_t i = 0; i < prompt.size(); ++i)
      prompt[i] = std::int32_t((i * 7919 + std::size_t(s) * 31) % 50257);
    dec->prefill(prompt, pages[std::size_t(s)]);
    rows.push_back({464, ctx, pages[std::size_t(s)]});
  }
  warm_up([&] { dec->step(rows); });
  for (auto _ : state) {
    dec->step(rows);  // position ctx again each time: the same cost every step
    benchmark::DoNotOptimize(dec->logits(0).data());
  }
  const double bytes =
      Cfg::weight_bytes() + double(batch) * Cfg::cache_bytes_per_position() * double(ctx + 1);
  state.counters["tokens_per_second"] =
      benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes_per_step"] = bytes;
  state.counters["bandwidth"] = g_bandwidth;
  state.counters["roofline_fraction"] =
      benchmark::Counter(bytes / g_bandwidth, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["interpreted_groups"] = dec->interpreted_groups();
}

void prefill(benchmark::State& state) {
  auto& g = generator<small_f32>();
  const std::int64_t len = state.range(0);
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(len));
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = std::int32_t((i * 7919) % 50257);
  for (auto _ : state) benchmark::DoNotOptimize(g.prefill(prompt).data());
  const double d = 768, f = 3072, t = double(len);
  const double flops =
      12 * (2 * t * d * 3 * d + 2 * t * d * d + 2 * t * d * f * 2 + 2 * 2 * t * t * d) +
      2 * d * 50257;
  state.counters["peak_fraction"] =
      benchmark::Counter(flops / g_peak, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_gflops"] = g_peak / 1e9;
}

// The decode cases' contexts (128 and 1023 tokens in the cache), unit and time.
void decode_contexts(benchmark::internal::Benchmark* b) {
  b->ArgName("ctx")->Arg(128)->Arg(1024 - 1)->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK(stream_copy)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(decode<small_f32>)->Name("decode/weights:f32")->Apply(decode_contexts);
BENCHMARK(decode<small_bf16>)->Name("decode/weights:bf16")->Apply(decode_contexts);
BENCHMARK(decode<small_int8>)->Name("decode/weights:int8")->Apply(decode_contexts);
BENCHMARK(decode<small_bf16_weights>)
    ->Name("decode_f32_cache/weights:bf16")
    ->Apply(decode_contexts);
BENCHMARK(decode_paged<small_f32>)
    ->Name("decode_paged/weights:f32")
    ->ArgNames({"batch", "ctx"})
    ->Args({8, 128})
    ->Args({1, 128})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);
BENCHMARK(decode_paged<small_bf16>)
    ->Name("decode_paged/weights:bf16")
    ->ArgNames({"batch", "ctx"})
    ->Args({8, 128})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);
BENCHMARK(prefill)->ArgName("len")->Arg(512)->Unit(benchmark::kMillisecond)->MinTime(2.0);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_bandwidth = measure_bandwidth();
  g_read_bandwidth = measure_read_bandwidth();
  g_peak = fusedsl_bench::measure_fma_peak();
  benchmark::AddCustomContext("stream_copy_bytes_per_second", std::to_string(g_bandwidth));
  benchmark::AddCustomContext("read_bytes_per_second", std::to_string(g_read_bandwidth));
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak / 1e9));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
