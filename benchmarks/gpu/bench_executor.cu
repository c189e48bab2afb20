// The device executor (fd::cuda::executor) on programs written in the DSL and planned by
// fd::compile: the bf16 seed transformer and one layer of the large config, each bound by name and
// run as one captured CUDA graph. Reported next to the hand-wired fused program of
// bench_transformer.cu (same kernels, wired by hand) when check.sh runs both.
// Usage: fusedsl_gpu_executor [results.jsonl]
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "fusedsl/backend/cuda/executor.hpp"
#include "fusedsl/models/transformer.hpp"

namespace fd = fusedsl;
namespace fb = fusedsl::cuda::bench;

namespace {

// FLOPs of a post-LN block: Q, K, V, O projections, the FFN, and QK^T plus PV.
constexpr double model_flops(double L, double D, double F, double layers) {
  return layers * (2.0 * L * D * (4.0 * D + 2.0 * F) + 4.0 * L * L * D);
}

template <class Model>
void run_model(const char* name, fb::report& rep, cudaStream_t stream, double flops, int iters) {
  fd::cuda::executor<typename Model::program_type> ex(Model::program, stream);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<fd::dynamic_tensor> data;
  const auto infos = ex.bindings();
  data.reserve(infos.size());
  for (const auto& info : infos) {
    data.emplace_back(info.type, info.shape);
    for (std::int64_t i = 0; i < info.shape.size(); ++i) {
      float v = nd(rng) * (info.kind == fd::graph::op_kind::input ? 20.0f : 1.0f);
      if (info.name.find("gamma") != std::string::npos) v += 1.0f;
      data.back().template data<fd::bf16>()[i] = fd::bf16(v);
    }
    ex.bind(info.name, data.back().ref());
  }
  ex.run();  // eager + capture
  ex.synchronize();
  std::printf("%s: %zu launches per call, %.1f MiB of device memory (plan arena %lld B)\n", name,
              ex.launches_per_call(), static_cast<double>(ex.device_bytes()) / (1 << 20),
              static_cast<long long>(Model::program.memory.arena_bytes));
  const double t_graph = fb::median_ms(
      stream, [&] { ex.run(); }, iters);
  const double t_eager = fb::median_ms(
      stream, [&] { ex.run_eager(); }, iters);
  rep.add(std::string(name) + " executor, one CUDA graph", t_graph, flops, 0,
          std::to_string(ex.launches_per_call()) + " kernels in 1 graph launch");
  rep.add(std::string(name) + " executor, eager launches", t_eager, flops, 0,
          std::to_string(ex.launches_per_call()) + " launches");
  // Bitwise stability of replays: the graph is deterministic (no atomics in any kernel).
  const int n_out = Model::program_type::graph.n_outputs;
  const fd::graph::node& o = Model::program_type::graph[Model::program_type::graph.outputs[0]];
  fd::dynamic_tensor a(o.type, o.shape), b(o.type, o.shape);
  ex.run();
  ex.read_output(0, a.ref());
  ex.synchronize();
  ex.run();
  ex.read_output(0, b.ref());
  ex.synchronize();
  const bool same = std::memcmp(a.raw(), b.raw(), a.ref().bytes()) == 0;
  rep.check_line(std::string(name) + " replays bitwise equal (" + std::to_string(n_out) + " out)",
                 same ? 0.0 : 1.0, 0.0);
}

using seed_bf16 = fd::models::transformer<128, 128, 4, 512, 2, fd::nn::post_ln, false, fd::bf16>;
using large_bf16 =
    fd::models::transformer<2048, 1024, 16, 4096, 1, fd::nn::post_ln, false, fd::bf16>;

}  // namespace

int main(int argc, char** argv) {
  return fb::bench_main(argc, argv, [](fb::report& rep, cudaStream_t stream) {
    run_model<seed_bf16>("seed 2-layer d128 h4 ffn512 seq128 (DSL)", rep, stream,
                         model_flops(128, 128, 512, 2), 200);
    run_model<large_bf16>("large layer d1024 h16 ffn4096 seq2048 (DSL)", rep, stream,
                          model_flops(2048, 1024, 4096, 1), 20);
  });
}
