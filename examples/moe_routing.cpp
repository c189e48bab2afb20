// A mixture-of-experts layer with top-2 routing (models/moe.hpp): the router's gates, then the
// experts computed either on every token (dense) or only on the tokens routed to each of them, up
// to a static capacity per expert (GShard, Switch). With room for every token the two agree; with
// less, the expert GEMMs shrink to experts x capacity rows and the latest tokens past an expert's
// capacity are dropped.
//   moe_routing      prints each program's expert GEMMs and the largest difference between the
//                    routed and the dense layer (exit status 1 if they differ)
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/fusedsl.hpp"
#include "fusedsl/models/moe.hpp"

namespace fd = fusedsl;

constexpr std::int64_t T = 32, D = 32, E = 4, F = 64;
constexpr auto x = fd::input<"x", float, T, D>();
constexpr auto gates = fd::models::moe_top2_gates<E>(x);

constexpr auto dense = fd::compile(fd::models::moe_dense<E, F>(x, gates));
constexpr auto routed_all = fd::compile(fd::models::moe_routed<E, F, T>(x, gates));
// 0.75 x an even share of the 2 x 32 routed rows: the busiest experts drop tokens
constexpr auto routed_12 = fd::compile(fd::models::moe_routed<E, F, 12>(x, gates));

// Runs a program on the same seeded x and weights; prints its expert GEMMs' rows.
template <class Program>
std::vector<float> run(const char* name, const Program& p) {
  fd::cpu::executor ex(p);
  std::vector<std::vector<float>> storage;
  for (const auto& b : ex.bindings()) {  // the same values for a name in every program
    std::mt19937 rng(unsigned(std::hash<std::string>{}(b.name)));
    std::normal_distribution<float> nd(0.0f, b.kind == fd::graph::op_kind::input ? 1.0f : 0.2f);
    storage.emplace_back(std::size_t(b.shape.size()));
    for (float& v : storage.back()) v = nd(rng);
    ex.bind(b.name, fd::tensor_ref{storage.back().data(), fd::dtype::f32, b.shape});
  }
  std::vector<float> y(std::size_t(T * D));
  ex.bind_output(0, fd::tensor_ref{y.data(), fd::dtype::f32, fd::make_dims(T, D)});
  ex.run();
  int gemms = 0;
  std::int64_t rows = 0;
  for (const auto& d : decltype(ex)::kernels_plan().desc)
    for (int q = 0; q < d.n_gemm; ++q)
      if (d.gemm[std::size_t(q)].b_slices == E) {  // a GEMM over the stacked experts' weights
        ++gemms;
        rows = d.gemm[std::size_t(q)].m;
      }
  std::printf("%s: %d expert GEMMs of %lld experts x %lld rows, %d kernels\n", name, gemms,
              (long long)E, (long long)rows, Program::kernel_count());
  return y;
}

int main() {
  const auto want = run("dense top-2", dense);
  const auto all = run("routed, capacity 32", routed_all);
  const auto some = run("routed, capacity 12", routed_12);
  double diff = 0, changed = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::fmax(diff, std::fabs(double(all[i]) - double(want[i])));
    changed += some[i] != want[i];
  }
  std::printf("max |routed (capacity 32) - dense| = %.3g\n", diff);
  std::printf("capacity 12: %.0f of %lld outputs differ from the dense layer's (dropped tokens)\n",
              changed, (long long)(T * D));
  return diff < 1e-5 ? 0 : 1;
}
