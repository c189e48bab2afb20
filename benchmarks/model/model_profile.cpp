// Where a transformer's time goes (the seed, the medium model, the race's GPT-2 small stacks or
// all-MiniLM-L6-v2's encoder in one of the embedder's buckets, random weights):
// executor::profile over many calls, one thread, printed per fusion group with its matmul FLOPs
// and its fraction of the FMA peak measured in the same run.
// Run: build/release/benchmarks/model/model_profile [calls per round]
//          [seed|medium|gpt2_seq128|gpt2_seq1024|minilm_b1_l32|minilm_b1_l64|minilm_b8_l32]
//      (default: 100 calls per round, the seed; the medium model takes ~45 ms a call, so give it
//      3, and GPT-2 at seq 1024 ~2 s, so give it 1)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/models/transformer.hpp"
#include "fusedsl/runtime/bert_bucket.hpp"
#include "race_models.hpp"

namespace fd = fusedsl;

namespace {

// Matmul FLOPs of one call of group gi (2 per multiply-add), over every matmul it holds.
template <class P>
double group_flops(int gi) {
  double f = 0;
  for (int i = 0; i < int(P::node_count); ++i) {
    const auto& n = P::graph[i];
    if (P::fusion.group_of[std::size_t(i)] != gi || n.op != fd::graph::op_kind::matmul) continue;
    const auto& a = P::graph[n.in[0]];
    const double k = double(n.trans_a ? a.shape[a.shape.rank - 2] : a.shape.back());
    f += 2.0 * double(n.shape.size()) * k;
  }
  return f;
}

// Random weights (layernorm gains near 1), token ids 0 and masks that keep every token.
template <class P>
void profile(const char* name, double model_flops, long calls) {
  static_assert(fd::cpu::executor<P>::kernels_plan().n_refused == 0,
                "every group of the profiled model runs a generated kernel");
  fd::cpu::executor<P> ex(P{}, fd::cpu::threads{1});
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<fd::dynamic_tensor> tensors;
  for (const auto& b : ex.bindings()) {
    tensors.emplace_back(b.type, b.shape);
    if (b.type == fd::dtype::boolean) {
      std::fill_n(tensors.back().template data<unsigned char>(), b.shape.size(), 1);
    } else if (b.type == fd::dtype::i32) {
      std::fill_n(tensors.back().template data<std::int32_t>(), b.shape.size(), 0);
    } else {
      const bool gain = b.name.find("gamma") != std::string::npos ||
                        b.name.find("LayerNorm.weight") != std::string::npos;
      for (std::int64_t i = 0; i < b.shape.size(); ++i)
        tensors.back().template data<float>()[i] = (gain ? 1.0f : 0.0f) + nd(rng);
    }
    ex.bind(b.name, tensors.back().ref());
  }
  fd::dynamic_tensor out(fd::dtype::f32, P::graph[P::graph.outputs[0]].shape);
  ex.bind_output(0, out.ref());
  for (int i = 0; i < 20; ++i) ex.run();  // warm caches and packed weights
  const double peak = fusedsl_bench::measure_fma_peak();
  // Rounds of `calls` calls; each figure is the best round's, as other tenants only slow us down.
  constexpr int rounds = 7;
  double total = 1e30;
  std::vector<double> best(std::size_t(P::fusion.n_groups), 1e30), iters(best.size(), 0);
  for (int r = 0; r < rounds; ++r) {
    ex.profile(true);
    const double t0 = fusedsl_bench::thread_seconds();
    for (long c = 0; c < calls; ++c) ex.run();
    total = std::min(total, (fusedsl_bench::thread_seconds() - t0) / double(calls));
    for (int gi = 0; gi < P::fusion.n_groups; ++gi) {
      const auto& pr = ex.profile_results()[std::size_t(gi)];
      if (pr.calls == 0) continue;
      best[std::size_t(gi)] =
          std::min(best[std::size_t(gi)], pr.cpu_seconds / double(calls));  // both layers
      iters[std::size_t(gi)] = double(pr.calls) / double(calls);
    }
  }
  // The FMA rate in the state the model's calls leave the core in: FMA-chain bursts (1000
  // iterations each) timed right after 20 calls (fewer if a round has fewer), against the same
  // bursts right after a long pure-FMA run (docs/performance.md, "How fractions of the peak are
  // measured": on some cores the vector rate depends on what ran).
  std::vector<double> after_model, after_fma;
  {
    volatile float sink = 0;
    for (int r = 0; r < 31; ++r) {
      for (long c = 0; c < std::min<long>(calls, 20); ++c) ex.run();
      double t0 = fusedsl_bench::thread_seconds();
      for (int b = 0; b < 50; ++b) sink = sink + fusedsl_bench::fma_chains(1000);
      after_model.push_back(fusedsl_bench::thread_seconds() - t0);
      sink = sink + fusedsl_bench::fma_chains(200000);
      t0 = fusedsl_bench::thread_seconds();
      for (int b = 0; b < 50; ++b) sink = sink + fusedsl_bench::fma_chains(1000);
      after_fma.push_back(fusedsl_bench::thread_seconds() - t0);
    }
    std::sort(after_model.begin(), after_model.end());
    std::sort(after_fma.begin(), after_fma.end());
  }
  const double burst_flops = 50 * 1000 * fusedsl_bench::fma_chain_flops_per_iter();
  const double rate_after_model = burst_flops / after_model[after_model.size() / 2];
  const double rate_after_fma = burst_flops / after_fma[after_fma.size() / 2];
  std::printf(
      "%s: %.1f us per call (thread CPU time, best of %d rounds of %ld), %.3f of the FMA peak "
      "(%.1f GFLOP/s)\n",
      name, total * 1e6, rounds, calls, model_flops / total / peak, peak * 1e-9);
  std::printf(
      "FMA bursts right after model calls: %.3f of the start-up peak (after a pure-FMA run: %.3f);"
      " the model: %.3f of the rate after its calls\n",
      rate_after_model / peak, rate_after_fma / peak, model_flops / total / rate_after_model);
  std::printf("%5s %-10s %-12s %10s %10s %8s\n", "group", "kind", "anchor", "MFLOP", "us/call",
              "peak");
  double sum = 0;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi) {
    if (iters[std::size_t(gi)] == 0) continue;
    const double per_call = best[std::size_t(gi)];
    const double flops = group_flops<P>(gi) * iters[std::size_t(gi)];
    sum += per_call;
    std::printf(
        "%5d %-10s %-12s %10.2f %10.1f %8s\n", gi,
        std::string(fd::plan::name_of(P::fusion.groups[std::size_t(gi)].kind)).c_str(),
        std::string(fd::graph::name_of(P::graph[P::fusion.groups[std::size_t(gi)].anchor].op))
            .c_str(),
        flops * 1e-6, per_call * 1e6,
        flops > 0 ? std::to_string(flops / per_call / peak).substr(0, 5).c_str() : "-");
  }
  std::printf("sum of groups: %.1f us (thread CPU time per group, best round each)\n", sum * 1e6);
}

template <class Model>
void run(const char* name, long calls) {
  profile<typename Model::program_type>(name, Model::flops(), calls);
}

// all-MiniLM-L6-v2's encoder in the bucket of B sentences of L tokens (the embedder's programs),
// every token real: the FLOPs are the model's for B sentences of L tokens.
template <std::int64_t B, std::int64_t L>
void minilm(const char* name, long calls) {
  using cfg = fd::models::minilm_l6_config;
  profile<typename fd::models::bert_bucket_program<cfg, B, L>::type>(
      name, double(B) * cfg::flops(double(L)), calls);
}

}  // namespace

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 100;
  if (calls < 1) {
    std::fprintf(stderr, "model_profile: calls per round must be a positive integer, got \"%s\"\n",
                 argv[1]);
    return 2;
  }
  const std::string model = argc > 2 ? argv[2] : "seed";
  if (model == "seed") {
    run<fd::models::seed>("seed", calls);
  } else if (model == "medium") {
    run<fd::models::medium>("medium", calls);
  } else if (model == "gpt2_seq128") {
    run<fusedsl_race::gpt2_seq128>("gpt2_seq128", calls);
  } else if (model == "gpt2_seq1024") {
    run<fusedsl_race::gpt2_seq1024>("gpt2_seq1024", calls);
  } else if (model == "minilm_b1_l32") {
    minilm<1, 32>("minilm_b1_l32", calls);
  } else if (model == "minilm_b1_l64") {
    minilm<1, 64>("minilm_b1_l64", calls);
  } else if (model == "minilm_b8_l32") {
    minilm<8, 32>("minilm_b8_l32", calls);
  } else {
    std::fprintf(
        stderr, "model_profile: unknown model \"%s\" (seed, medium, gpt2_seq128, gpt2_seq1024, "
        "minilm_b1_l32, minilm_b1_l64 or minilm_b8_l32)\n",
        model.c_str());
    return 2;
  }
  return 0;
}
