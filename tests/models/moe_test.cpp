// models/moe.hpp: the routed mixture of experts computes the dense layer's function where no token
// is dropped, and drops exactly the tokens past an expert's capacity, in token order; its expert
// GEMMs run over E x capacity rows.
#include "fusedsl/models/moe.hpp"

#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/compile.hpp"
#include "../common/compare.hpp"

namespace fd = fusedsl;

namespace {

constexpr std::int64_t T = 24, D = 16, E = 4, F = 24;
constexpr auto x = fd::input<"x", float, T, D>();
constexpr auto gates = fd::input<"gates", float, T, E>();

template <std::int64_t C>
constexpr auto routed() {
  return fd::compile(fd::models::moe_routed<E, F, C>(x, gates));
}
constexpr auto dense = fd::compile(fd::models::moe_dense<E, F>(x, gates));

std::vector<float> random_values(std::int64_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(std::size_t(n), 0.0f);
  for (float& f : v) f = nd(rng);
  return v;
}

// Top-2 gates: token t picks experts (t % E) and ((t / 2 + 1) % E) when they differ, else one,
// with weights that sum to 1.
std::vector<float> top2_gates() {
  std::vector<float> g(std::size_t(T * E), 0.0f);
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t a = t % E, b = (t / 2 + 1) % E;
    g[std::size_t(t * E + a)] = a == b ? 1.0f : 0.7f;
    if (a != b) g[std::size_t(t * E + b)] = 0.3f;
  }
  return g;
}

struct weights {
  std::vector<float> gate, up, down;
  weights()
      : gate(random_values(E * D * F, 2, 0.25f)),
        up(random_values(E * D * F, 3, 0.25f)),
        down(random_values(E * F * D, 4, 0.2f)) {}
};

fd::tensor_ref view(const std::vector<float>& v, fd::dims shape) {
  return fd::tensor_ref{const_cast<float*>(v.data()), fd::dtype::f32, shape};
}

template <class Program>
std::vector<float> run(const Program& p, const std::vector<float>& xv, const std::vector<float>& g,
                       const weights& w) {
  fd::cpu::executor ex(p);
  std::vector<float> y(std::size_t(T * D));
  ex.bind("x", view(xv, fd::make_dims(T, D)));
  ex.bind("gates", view(g, fd::make_dims(T, E)));
  ex.bind("experts.gate", view(w.gate, fd::make_dims(E, D, F)));
  ex.bind("experts.up", view(w.up, fd::make_dims(E, D, F)));
  ex.bind("experts.down", view(w.down, fd::make_dims(E, F, D)));
  ex.bind_output(0, fd::tensor_ref{y.data(), fd::dtype::f32, fd::make_dims(T, D)});
  ex.run();
  CHECK(ex.stats().interpreted_groups == 0);
  return y;
}

// The rows of the expert GEMMs of a program: m of each batched GEMM part over E experts.
template <class Program>
std::vector<std::int64_t> expert_rows() {
  std::vector<std::int64_t> rows;
  const auto& plan = fd::cpu::executor<Program>::kernels_plan();
  for (const auto& d : plan.desc)
    for (int q = 0; q < d.n_gemm; ++q)
      if (d.gemm[std::size_t(q)].b_slices == E) rows.push_back(d.gemm[std::size_t(q)].m);
  return rows;
}

}  // namespace

TEST_CASE("routed experts with room for every token compute the dense layer's function") {
  const weights w;
  const auto xv = random_values(T * D, 1, 1.0f);
  const auto g = top2_gates();
  const auto want = run(dense, xv, g, w);
  const auto got = run(routed<T>(), xv, g, w);
  CHECK(fd::test::compare(got, want, fd::test::abs_tol(1e-5)));
  // the same against the reference backend, for the routed program's own graph
  fd::reference::evaluator ref{fd::graph::graph_view(routed<T>().graph)};
  ref.bind("x", view(xv, fd::make_dims(T, D)))
      .bind("gates", view(g, fd::make_dims(T, E)))
      .bind("experts.gate", view(w.gate, fd::make_dims(E, D, F)))
      .bind("experts.up", view(w.up, fd::make_dims(E, D, F)))
      .bind("experts.down", view(w.down, fd::make_dims(E, F, D)));
  const auto outs = ref.run();
  std::vector<float> r(std::size_t(T * D));
  for (std::int64_t i = 0; i < T * D; ++i) r[std::size_t(i)] = outs.at(0).data<float>()[i];
  CHECK(fd::test::compare(got, r, fd::test::abs_tol(1e-5)));
}

TEST_CASE("an expert past its capacity drops the later tokens routed to it, in token order") {
  constexpr std::int64_t C = 5;  // 42 (token, expert) pairs routed (12, 9, 9, 12), 20 kept
  const weights w;
  const auto xv = random_values(T * D, 5, 1.0f);
  const auto g = top2_gates();
  // by hand: the gates of the tokens each expert keeps (its first C), zero for the others
  std::vector<float> kept = g;
  int dropped = 0;
  for (std::int64_t e = 0; e < E; ++e) {
    std::int64_t seen = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      if (g[std::size_t(t * E + e)] == 0.0f) continue;
      if (seen++ >= C) {
        kept[std::size_t(t * E + e)] = 0.0f;
        ++dropped;
      }
    }
  }
  CHECK(dropped == 22);
  const auto want = run(dense, xv, kept, w);
  const auto got = run(routed<C>(), xv, g, w);
  CHECK(fd::test::compare(got, want, fd::test::abs_tol(1e-5)));
  // and the expert GEMMs run over E x C rows, not E x T
  for (std::int64_t m : expert_rows<decltype(routed<C>())>()) CHECK(m == C);
  CHECK(expert_rows<decltype(routed<C>())>().size() == 3);
  for (std::int64_t m : expert_rows<decltype(dense)>()) CHECK(m == T);
}

TEST_CASE("the router keeps each token's two largest gates; equal ones by the lower expert") {
  constexpr auto p = fd::compile(fd::models::moe_top2_gates<E>(x));
  const auto xv = random_values(T * D, 8, 1.0f);
  const auto gates_of = [&](const std::vector<float>& router) {
    fd::cpu::executor ex(p);
    std::vector<float> g(std::size_t(T * E));
    ex.bind("x", view(xv, fd::make_dims(T, D)));
    ex.bind("router.w", view(router, fd::make_dims(D, E)));
    ex.bind_output(0, fd::tensor_ref{g.data(), fd::dtype::f32, fd::make_dims(T, E)});
    ex.run();
    return g;
  };
  // a zero router: every expert's gate is 1/E; experts 0 and 1 are kept, at 1/2 each
  std::vector<float> want(std::size_t(T * E), 0.0f);
  for (std::int64_t t = 0; t < T; ++t)
    want[std::size_t(t * E)] = want[std::size_t(t * E + 1)] = 0.5f;
  CHECK(fd::test::compare(gates_of(std::vector<float>(std::size_t(D * E), 0.0f)), want,
                          fd::test::exact()));
  // a random router against the two largest of a softmax computed here in double
  const auto router = random_values(D * E, 9, 0.5f);
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> logit(std::size_t(E), 0.0);
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t d = 0; d < D; ++d)
        logit[std::size_t(e)] +=
            double(xv[std::size_t(t * D + d)]) * router[std::size_t(d * E + e)];
    std::int64_t a = 0, b = 1;
    if (logit[1] > logit[0]) std::swap(a, b);
    for (std::int64_t e = 2; e < E; ++e) {
      if (logit[std::size_t(e)] > logit[std::size_t(a)]) {
        b = a;
        a = e;
      } else if (logit[std::size_t(e)] > logit[std::size_t(b)]) {
        b = e;
      }
    }
    // the renormalised pair is a two-way softmax of the two logits
    const double ea = 1.0, eb = std::exp(logit[std::size_t(b)] - logit[std::size_t(a)]);
    for (std::int64_t e = 0; e < E; ++e)
      want[std::size_t(t * E + e)] = e == a   ? float(ea / (ea + eb))
                                     : e == b ? float(eb / (ea + eb))
                                              : 0.0f;
  }
  CHECK(fd::test::compare(gates_of(router), want, fd::test::abs_tol(1e-6)));
}
