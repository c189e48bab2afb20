// The seed 2-layer transformer (d 128, 4 heads, FFN 512, seq 128) and one layer of the large
// config (d 1024, 16 heads, FFN 4096, seq 2048), bf16: fusedsl's fused kernels as one CUDA graph
// against cuBLAS plus separate unfused kernels. Outputs are checked before anything is timed.
// Usage: fusedsl_gpu_transformer [results.jsonl]
#include <cstdio>
#include <memory>

#include "transformer.cuh"

namespace fc = fusedsl::cuda;
namespace fb = fusedsl::cuda::bench;
namespace ft = fusedsl::cuda::testing;

namespace {

// Median time of each step launched alone: where the time of a program goes.
void step_breakdown(const char* name, const char* variant, const fc::graph_runner& run,
                    cudaStream_t stream, int iters) {
  std::printf("%s, %s: per-step times\n", name, variant);
  double total = 0.0;
  for (std::size_t i = 0; i < run.size(); ++i) {
    const double ms = fb::median_ms(
        stream, [&] { run.run_step(i); }, iters, 3);
    total += ms;
    std::printf("    %2zu %-14s %8.2f us\n", i, run.step_name(i).c_str(), ms * 1e3);
  }
  std::printf("    sum of steps alone: %.2f us\n", total * 1e3);
}

template <int L, int D, int H, int F, int Layers, int AttnBlockM = 64>
void run_model(const char* name, fb::report& rep, cudaStream_t stream, const fb::cublas_api& cublas,
               bool cpu_check, int iters) {
  using model_t = fb::transformer<L, D, H, F, Layers, AttnBlockM>;
  auto model = std::make_unique<model_t>(stream, 1234u);
  fc::graph_runner fused(stream), unfused(stream);
  model->add_fused(fused);
  std::printf("%s: fused program has %zu launches\n", name, fused.size());

  model->poison_outputs();
  fused.run_eager();
  const auto fused_eager = model->fused_output();
  std::vector<double> expect;
  if (cpu_check) {
    expect = model->cpu_reference();
    rep.check_line(std::string(name) + " fused vs CPU double reference",
                   ft::rel_l2(fused_eager, expect), 1e-2);
  }
  fused.capture();
  model->poison_outputs();
  fused.replay();
  rep.check_line(std::string(name) + " fused graph replay == fused eager",
                 ft::rel_l2(model->fused_output(), fused_eager), 0.0);

  const double flops = model_t::flops_per_call();
  const double t_fused_eager = fb::median_ms(
      stream, [&] { fused.run_eager(); }, iters);
  const double t_fused_graph = fb::median_ms(
      stream, [&] { fused.replay(); }, iters);
  rep.add(std::string(name) + " fused, eager launches", t_fused_eager, flops, 0,
          std::to_string(fused.size()) + " launches");
  rep.add(std::string(name) + " fused, one CUDA graph", t_fused_graph, flops, 0, "1 graph launch");
  step_breakdown(name, "fused", fused, stream, iters);

  if (!cublas.ok()) {
    std::printf("%s: cuBLAS baseline skipped: %s\n", name, cublas.why_not.c_str());
    return;
  }
  model->add_unfused(unfused, cublas);
  unfused.run_eager();
  const auto base = model->unfused_output();
  if (cpu_check)
    rep.check_line(std::string(name) + " cuBLAS+unfused vs CPU double reference",
                   ft::rel_l2(base, expect), 1e-2);
  rep.check_line(std::string(name) + " fused vs cuBLAS+unfused", ft::rel_l2(fused_eager, base),
                 1e-2);
  const double t_unfused_eager = fb::median_ms(
      stream, [&] { unfused.run_eager(); }, iters);
  rep.add(std::string(name) + " cuBLAS + unfused kernels, eager", t_unfused_eager, flops, 0,
          std::to_string(unfused.size()) + " launches");
  step_breakdown(name, "cuBLAS + unfused", unfused, stream, iters);
  unfused.capture();
  const double t_unfused_graph = fb::median_ms(
      stream, [&] { unfused.replay(); }, iters);
  rep.add(std::string(name) + " cuBLAS + unfused kernels, one CUDA graph", t_unfused_graph, flops,
          0, "");
  std::printf(
      "%s: fused graph is %.2fx faster than cuBLAS+unfused eager, %.2fx than cuBLAS+unfused as a "
      "graph\n",
      name, t_unfused_eager / t_fused_graph, t_unfused_graph / t_fused_graph);
}

}  // namespace

int main(int argc, char** argv) {
  return fb::bench_main(argc, argv, [](fb::report& rep, cudaStream_t stream) {
    fb::cublas_api cublas(stream);
    std::printf("cuBLAS: %s\n", cublas.ok() ? "loaded" : cublas.why_not.c_str());
    run_model<128, 128, 4, 512, 2>("seed 2-layer d128 h4 ffn512 seq128", rep, stream, cublas, true,
                                   200);
    run_model<2048, 1024, 16, 4096, 1>("large layer d1024 h16 ffn4096 seq2048", rep, stream, cublas,
                                       false, 20);
    run_model<2048, 1024, 16, 4096, 1, 128>("large layer (attention block_m 128)", rep, stream,
                                            cublas, false, 20);
    run_model<2048, 1024, 16, 4096, 1, 0>("large layer (default attention: wgmma on Hopper)", rep,
                                          stream, cublas, false, 20);
  });
}
