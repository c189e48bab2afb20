// Fusion rules on small graphs, including the cases that must not fuse.
#include <doctest/doctest.h>

#include "fusedsl/compile.hpp"

namespace fd = fusedsl;
using fd::graph::op_kind;
using fd::plan::group_kind;

namespace {
template <class P>
int group_of_op(const P&, op_kind k, int nth = 0) {
  for (int i = 0; i < P::graph.size(); ++i)
    if (P::graph[i].op == k && nth-- == 0) return P::fusion.group_of[std::size_t(i)];
  return -2;
}
template <class P>
int count_kind(const P&, group_kind k) {
  int n = 0;
  for (int g = 0; g < P::fusion.n_groups; ++g) n += P::fusion.groups[std::size_t(g)].kind == k;
  return n;
}

constexpr auto x = fd::input<"x", float, 16, 24>();
constexpr auto y = fd::input<"y", float, 16, 24>();
constexpr auto w = fd::param<"w", float, 24, 8>();
constexpr auto b = fd::param<"b", float, 8>();
}  // namespace

TEST_CASE("an elementwise chain is one loop kernel") {
  constexpr auto p = fd::compile(fd::exp(x * y + fd::lit<1.0>) - fd::tanh(x));
  static_assert(p.kernel_count() == 1);
  static_assert(p.fusion.groups[0].kind == group_kind::loop);
  CHECK(p.stats().fused_bytes == 0);  // nothing but the output is written
}

TEST_CASE("a value read by two kernels is materialised once, not recomputed") {
  constexpr auto h = fd::matmul(x, w);
  constexpr auto shared = fd::exp(h);  // read by a reduction and by a loop
  constexpr auto p = fd::compile(fd::sum<-1>(shared), shared * fd::lit<2.0>);
  // matmul (+exp epilogue: its only consumer), a reduce kernel and a loop kernel.
  CHECK(p.kernel_count() == 3);
  const int ge = group_of_op(p, op_kind::exp);
  CHECK(ge == group_of_op(p, op_kind::matmul));
  CHECK(ge != group_of_op(p, op_kind::reduce_sum));
  CHECK(ge != group_of_op(p, op_kind::mul));
}

TEST_CASE("matmul takes bias, activation and residual as its epilogue") {
  constexpr auto z = fd::input<"z", float, 16, 8>();
  constexpr auto p = fd::compile(fd::gelu(fd::matmul(x, w) + b) + z);
  static_assert(p.kernel_count() == 1);
  static_assert(p.fusion.groups[0].kind == group_kind::matmul);
}

TEST_CASE("an epilogue stops at a broadcast to a larger shape and at a second consumer") {
  constexpr auto h = fd::matmul(x, w);
  constexpr auto big = fd::input<"big", float, 2, 16, 8>();
  constexpr auto p = fd::compile(h + big);  // the add is larger than the matmul's output
  CHECK(p.kernel_count() == 2);
  constexpr auto h2 = fd::relu(fd::matmul(x, w));
  constexpr auto p2 = fd::compile(h2 + b, h2 * b);  // relu has two consumers: it is the root
  CHECK(group_of_op(p2, op_kind::relu) == group_of_op(p2, op_kind::matmul));
  CHECK(group_of_op(p2, op_kind::add) != group_of_op(p2, op_kind::matmul));
}

TEST_CASE("a transposed operand is read in place, not copied") {
  constexpr auto wt = fd::param<"wt", float, 8, 24>();
  constexpr auto p = fd::compile(fd::matmul(x, fd::transpose(wt)));
  static_assert(p.kernel_count() == 1);
  static_assert(p.graph.size() == 3);  // x, wt, matmul(trans_b): no transpose node is left
  CHECK(p.graph[2].trans_b);
}

TEST_CASE("matmuls sharing the left operand with parameter right operands run as one kernel") {
  constexpr auto w2 = fd::param<"w2", float, 24, 8>();
  constexpr auto p = fd::compile(fd::matmul(x, w) + b, fd::matmul(x, w2));
  static_assert(p.kernel_count() == 1);
  CHECK(p.fusion.groups[0].n_roots == 2);
}

TEST_CASE("softmax, layernorm and rmsnorm are row kernels with their epilogue") {
  constexpr auto g = fd::param<"g", float, 24>();
  constexpr auto p =
      fd::compile(fd::softmax(x) * fd::lit<3.0>, fd::layernorm(y, g, g), fd::rmsnorm(y, g));
  CHECK(count_kind(p, group_kind::row) == 3);
  CHECK(group_of_op(p, op_kind::mul) == group_of_op(p, op_kind::softmax));
}

TEST_CASE("a reduction takes its elementwise prologue") {
  constexpr auto p = fd::compile(fd::mean<0>(x * x));
  static_assert(p.kernel_count() == 1);
  CHECK(p.fusion.groups[0].kind == group_kind::reduce);
}

TEST_CASE("hand-written attention is recognised as one flash-style kernel") {
  constexpr auto q = fd::input<"q", float, 4, 32, 16>();
  constexpr auto k = fd::input<"k", float, 4, 32, 16>();
  constexpr auto v = fd::input<"v", float, 4, 32, 16>();
  constexpr auto mask = fd::iota<int, 0, 32, 32>() >= fd::iota<int, 1, 32, 32>();
  constexpr auto s = fd::matmul<false, true>(q, k) * fd::lit<0.25>;
  constexpr auto p = fd::compile(fd::matmul(fd::softmax(fd::where(mask, s, fd::neg_inf)), v));
  static_assert(p.kernel_count() == 1);
  static_assert(p.fusion.groups[0].kind == group_kind::attention);
  // The [4,32,32] scores never reach memory.
  CHECK(p.stats().fused_bytes == 0);
  // With an explicit transpose of K, and an additive mask.
  constexpr auto kt = fd::permute<0, 2, 1>(k);
  constexpr auto m = fd::input<"m", float, 32, 32>();
  constexpr auto p2 = fd::compile(fd::matmul(fd::softmax(fd::matmul(q, kt) + m), v));
  static_assert(p2.kernel_count() == 1);  // the transpose is folded into how K is read
  CHECK(count_kind(p2, group_kind::attention) == 1);
}

TEST_CASE("attention whose scores are also returned is not fused") {
  constexpr auto q = fd::input<"q", float, 32, 16>();
  constexpr auto k = fd::input<"k", float, 32, 16>();
  constexpr auto s = fd::matmul<false, true>(q, k);
  constexpr auto p = fd::compile(fd::matmul(fd::softmax(s), k), s);
  CHECK(count_kind(p, group_kind::attention) == 0);
}

TEST_CASE("the seed transformer block is 7 kernels per layer") {
  constexpr auto xx = fd::input<"x", float, 128, 128>();
  constexpr auto p = fd::compile(
      fd::nn::stack<"layers", 2>(fd::nn::transformer_block<fd::nn::post_ln, 4, 512>, xx));
  static_assert(p.fusion.kernels_in_region(1) == 7);
  static_assert(p.stats().kernels_per_layer <= 8);
  CHECK(count_kind(p, group_kind::attention) == 1);
  CHECK(count_kind(p, group_kind::repeat) == 1);
}
