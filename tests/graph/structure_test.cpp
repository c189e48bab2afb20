// The constexpr node table: merged subexpressions, node counts of transformer blocks, topological
// order, pruning of dead nodes, the bindings of a stack, and the text and DOT printers. Most checks
// are static_asserts on the constexpr graph.
#include "../common/graph_util.hpp"
#include "../common/test_util.hpp"

namespace {

using fd::graph::op_kind;

using fd::test::count;

// Every operand precedes its node, and a block body precedes the repeat node that runs it.
template <class G>
constexpr bool topologically_ordered(const G& g) {
  for (int i = 0; i < g.size(); ++i) {
    for (int k = 0; k < g[i].n_in; ++k)
      if (g[i].in[std::size_t(k)] >= i) return false;
    if (g[i].op == op_kind::repeat && g.regions[std::size_t(g[i].body)].result >= i) return false;
  }
  return true;
}

// Every node is an output, a region's placeholder or result, or an operand of another node.
template <class G>
constexpr bool no_dead_nodes(const G& g) {
  for (int i = 0; i < g.size(); ++i) {
    bool used = false;
    for (int o = 0; o < g.n_outputs; ++o) used = used || g.outputs[std::size_t(o)] == i;
    for (int r = 1; r < g.n_regions; ++r)
      used = used || g.regions[std::size_t(r)].result == i ||
             g.regions[std::size_t(r)].placeholder == i;
    for (int j = i + 1; j < g.size(); ++j)
      for (int k = 0; k < g[j].n_in; ++k) used = used || g[j].in[std::size_t(k)] == i;
    if (!used) return false;
  }
  return true;
}

constexpr auto x = fd::input<"x", float, 128, 128>();
constexpr auto y = fd::input<"y", float, 128, 128>();

}  // namespace

TEST_CASE("identical subexpressions merge into one node") {
  constexpr auto& g = fd::flatten(fd::exp(x) * fd::exp(x) + x * y);
  static_assert(g.size() == 6);  // x, exp, mul, y, mul, add
  static_assert(count(g, op_kind::exp) == 1);
  static_assert(count(g, op_kind::input) == 2);

  // The same param named twice is one node; two outputs share their common part.
  constexpr auto w = fd::param<"w", float, 128, 128>();
  constexpr auto& g2 =
      fd::flatten(fd::matmul(x, w) + fd::matmul(x, w), fd::relu(fd::matmul(x, w)));
  static_assert(count(g2, op_kind::param) == 1);
  static_assert(count(g2, op_kind::matmul) == 1);
  static_assert(g2.n_outputs == 2);
  CHECK(g2.size() == 5);  // x, w, matmul, add, relu
}

TEST_CASE("a post-LN block flattens to 47 nodes: 8 matmuls, 16 params, 2 layernorms, 1 softmax") {
  constexpr auto& g = fd::flatten(fd::nn::transformer_block<fd::nn::post_ln, 4, 512>(x));
  static_assert(count(g, op_kind::matmul) == 8);  // q, k, v, o, scores, p @ v, fc1, fc2
  static_assert(count(g, op_kind::param) ==
                16);  // 4 x (w, b) attention, 2 x (w, b) ffn, 2 x (gamma, beta)
  static_assert(count(g, op_kind::layernorm) == 2);
  static_assert(count(g, op_kind::softmax) == 1);
  static_assert(count(g, op_kind::add) == 8);      // 6 biases, 2 residuals
  static_assert(count(g, op_kind::reshape) == 4);  // split q, k, v; merge
  static_assert(count(g, op_kind::transpose) == 4);
  static_assert(count(g, op_kind::mul) == 1);  // the 1/sqrt(dh) scale
  static_assert(count(g, op_kind::constant) == 1);
  static_assert(count(g, op_kind::gelu_tanh) == 1);
  static_assert(count(g, op_kind::input) == 1);
  static_assert(g.size() == 47);
  static_assert(topologically_ordered(g));
  static_assert(no_dead_nodes(g));
  CHECK(g.n_outputs == 1);
}

TEST_CASE("causal grouped-query attention adds the mask and the head grouping, nothing else") {
  constexpr auto& g =
      fd::flatten(fd::nn::transformer_block<fd::nn::pre_ln, 4, 512, 2, true>(x));
  // 47 + 2 reshapes for the grouping (queries into kv groups, the output back to heads)
  // + 7 for the mask (reshape, 2 iotas, ge, -inf, select, reshape back).
  static_assert(g.size() == 47 + 2 + 7);
  static_assert(count(g, op_kind::reshape) == 4 + 2 + 2);
  static_assert(count(g, op_kind::iota) == 2);
  static_assert(count(g, op_kind::select) == 1);
  static_assert(count(g, op_kind::ge) == 1);
  static_assert(topologically_ordered(g));
  static_assert(no_dead_nodes(g));
  CHECK(g.size() == 56);
}

TEST_CASE("a stack is one body region and one repeat node, whatever its depth") {
  constexpr auto blk = fd::nn::transformer_block<fd::nn::post_ln, 4, 512>;
  constexpr auto& g2 = fd::flatten(fd::nn::stack<"layers", 2>(blk, x));
  constexpr auto& g12 = fd::flatten(fd::nn::stack<"layers", 12>(blk, x));
  static_assert(g2.size() ==
                49);  // x and repeat in the main graph; placeholder and 46 nodes in the body
  static_assert(g12.size() == g2.size());
  static_assert(g2.n_regions == 2);
  static_assert(count(g12, op_kind::repeat) == 1);
  static_assert(g12[g12.outputs[0]].op == op_kind::repeat && g12[g12.outputs[0]].count == 12);
  static_assert(g2[g2.regions[1].placeholder].op == op_kind::placeholder);
  static_assert(topologically_ordered(g12));
  static_assert(no_dead_nodes(g12));
  int body = 0;
  for (int i = 0; i < g2.size(); ++i) body += g2[i].region == 1 ? 1 : 0;
  CHECK(body == 47);
}

TEST_CASE("required_bindings names each layer's params <prefix>.<i>.<param>, in reading order") {
  constexpr auto blk = fd::nn::transformer_block<fd::nn::post_ln, 4, 512>;
  const auto specs =
      fd::reference::required_bindings(fd::flatten(fd::nn::stack<"layers", 3>(blk, x)));
  REQUIRE(specs.size() == 1 + 3 * 16);
  CHECK(specs[0].name == "x");
  CHECK(specs[0].kind == op_kind::input);
  CHECK(specs[1].name == "layers.0.attn.q.w");
  CHECK(specs[1].shape == fd::make_dims(128, 128));
  CHECK(specs[16].name == "layers.0.ln2.beta");
  CHECK(specs[17].name == "layers.1.attn.q.w");
  CHECK(specs.back().name == "layers.2.ln2.beta");
  for (std::size_t i = 1; i < specs.size(); ++i) CHECK(specs[i].kind == op_kind::param);
  bool fc1 = false;
  for (const auto& s : specs)
    fc1 = fc1 || (s.name == "layers.2.ffn.fc1.w" && s.shape == fd::make_dims(128, 512));
  CHECK(fc1);
}

TEST_CASE("prune drops nodes no output reads and renumbers the rest in order") {
  constexpr auto pruned = [] {
    fd::graph::builder b;
    const int a = b.input("a", fd::dtype::f32, fd::make_dims(4));
    const int dead = b.unary(op_kind::log, a);
    const int e = b.unary(op_kind::exp, a);
    (void)b.binary(op_kind::add, dead, e);  // dead too: nothing reads it
    b.mark_output(b.unary(op_kind::tanh, e));
    fd::graph::prune(b);
    return b;
  };
  static_assert(pruned().size() == 3);  // a, exp, tanh
  static_assert(pruned()[1].op == op_kind::exp && pruned()[1].in[0] == 0);
  static_assert(pruned()[2].op == op_kind::tanh && pruned()[2].in[0] == 1);
  static_assert(pruned().outputs[0] == 2);
  CHECK(pruned().size() == 3);  // the same code at run time
}

TEST_CASE("to_text prints one line per node with dtype, shape, operands and outputs") {
  constexpr auto a = fd::input<"a", float, 4, 8>();
  constexpr auto w = fd::param<"w", float, 8, 3>();
  const std::string text = fd::graph::to_text(fd::flatten(fd::softmax(fd::matmul(a, w))));
  CHECK(text.find("graph {\n") == 0);
  CHECK(text.find("  %0 = input \"a\" f32[4,8]\n") != std::string::npos);
  CHECK(text.find("  %1 = param \"w\" f32[8,3]\n") != std::string::npos);
  CHECK(text.find("  %2 = matmul f32[4,3] (%0, %1)\n") != std::string::npos);
  CHECK(text.find("  %3 = softmax axis=1 f32[4,3] (%2)  -> output 0\n") != std::string::npos);
}

TEST_CASE("to_dot draws nodes, edges, and a stack's body as a cluster") {
  constexpr auto blk = fd::nn::block([](auto h) { return h + fd::relu(h); });
  constexpr auto a = fd::input<"a", float, 4, 8>();
  const std::string dot = fd::graph::to_dot(fd::flatten(fd::nn::stack<"l", 3>(blk, a)));
  CHECK(dot.find("digraph fusedsl {") == 0);
  CHECK(dot.find("subgraph cluster_region1 {") != std::string::npos);
  CHECK(dot.find("n2 [label=\"%2 relu\\nf32[4,8]\"];") != std::string::npos);
  CHECK(dot.find("n1 [label=\"%1 placeholder\\nf32[4,8]\", style=rounded];") != std::string::npos);
  CHECK(dot.find("n1 -> n2;") != std::string::npos);  // placeholder -> relu
  CHECK(dot.find("[style=dashed, label=\"x3\"]") != std::string::npos);
}
