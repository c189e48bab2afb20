// Property tests: the planner's output passes the verifier on many generated graphs (varied
// shapes, depths and fan-out), built at run time with the same constexpr code.
#include <doctest/doctest.h>

#include <random>

#include "fusedsl/expr/flatten.hpp"
#include "fusedsl/plan/verify.hpp"

namespace fd = fusedsl;
using fd::graph::builder;
using fd::graph::op_kind;

namespace {
constexpr std::size_t cap = 160;

// A random DAG of elementwise ops, matmuls, reductions, softmaxes and layout ops over [r, c]
// values.
fd::graph::graph<cap> random_graph(std::mt19937& rng, int& n_nodes) {
  builder b;
  const std::int64_t r = 1 + rng() % 9, c = 1 + rng() % 13;
  std::vector<int> vals{b.input("x", fd::dtype::f32, fd::make_dims(r, c)),
                        b.input("y", fd::dtype::f32, fd::make_dims(r, c))};
  const int wsq = b.param("w", fd::dtype::f32, fd::make_dims(c, c));
  const int steps = 4 + int(rng() % 40);
  for (int s = 0; s < steps && b.size() < int(cap) - 8; ++s) {
    const int a = vals[rng() % vals.size()], a2 = vals[rng() % vals.size()];
    int v = a;
    switch (rng() % 8) {
      case 0: v = b.binary(op_kind::add, a, a2); break;
      case 1: v = b.unary(op_kind::exp, a); break;
      case 2: v = b.matmul(a, wsq); break;
      case 3: v = b.softmax(a, -1); break;
      case 4: v = b.binary(op_kind::mul, b.reduce(op_kind::reduce_max, a, 1, true), a2); break;
      case 5: v = b.unary(op_kind::tanh, b.binary(op_kind::sub, a, b.constant(0.5))); break;
      case 6: v = b.reshape(b.transpose(a, std::array<int, 2>{1, 0}), fd::make_dims(r, c)); break;
      case 7: v = b.matmul(a, a2, false, true); v = b.matmul(v, a); break;
    }
    vals.push_back(v);
  }
  // Several outputs, so that some values have consumers both inside and outside the graph.
  b.mark_output(vals.back());
  if (rng() % 2) b.mark_output(vals[vals.size() / 2]);
  fd::graph::prune(b);
  n_nodes = b.size();
  return b.template freeze<cap>();
}
}  // namespace

TEST_CASE("plans of 300 generated graphs pass the verifier") {
  std::mt19937 rng(20261129);
  int checked = 0;
  for (int t = 0; t < 300; ++t) {
    int n = 0;
    const auto g = random_graph(rng, n);
    const auto f = fd::plan::fuse(g);
    const auto m = fd::plan::plan_memory(g, f);
    const auto v = fd::plan::verify(g, f, m);
    INFO("graph " << t << ": " << (v.error ? v.error : "") << " at %" << v.node);
    REQUIRE(v.ok());
    // Each kernel writes at least one value, and the arena never exceeds fused, unplanned bytes.
    std::int64_t fused = 0;
    for (int i = 0; i < n; ++i)
      if (m.in_arena(i)) fused += m.size[std::size_t(i)];
    CHECK(m.arena_bytes <= fused);
    ++checked;
  }
  CHECK(checked == 300);
}
