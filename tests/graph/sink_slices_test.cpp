// graph::sink_slices: a slice that is its operand's only reader moves through the ops computing
// that operand, so the rows nobody reads are not computed; where another node reads the operand
// the slice stays. The sliced program computes the rows of the whole one (CPU executor and
// reference backend, NaN and inf rows included), and 300 random programs sliced at random compute
// the same values before and after the rewrite.
#include "fusedsl/graph/sink_slices.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../backend/cpu/executor/random_programs.hpp"
#include "../common/compare.hpp"
#include "../common/graph_util.hpp"
#include "../common/test_util.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/compile.hpp"

namespace {

using fd::graph::op_kind;

using fd::test::count;
// The extent along `axis` of the which-th node of kind k, in table order; -1 past the count.
template <class G>
constexpr std::int64_t extent_of(const G& g, op_kind k, int which, int axis) {
  for (int i = 0; i < g.size(); ++i)
    if (g[i].op == k && which-- == 0) return g[i].shape[axis];
  return -1;
}
// Its rows (axis 0).
template <class G>
constexpr std::int64_t rows_of(const G& g, op_kind k, int which) {
  return extent_of(g, k, which, 0);
}

constexpr std::int64_t L = 10, D = 12;
constexpr auto x = fd::input<"x", float, L, D>();
constexpr auto ln_g = fd::param<"g", float, D>();
constexpr auto ln_b = fd::param<"b", float, D>();
constexpr auto w = fd::param<"w", float, D, 20>();

// A ViT-like block: a class token before the patches, pre-norm attention and feed-forward, a final
// layernorm; the classifier reads one row of it.
constexpr auto block() {
  constexpr auto tokens =
      fd::concat<0>(fd::param<"cls", float, 1, D>(), x) + fd::param<"pos", float, L + 1, D>();
  constexpr auto n1 =
      fd::layernorm(tokens, fd::param<"ln1.g", float, D>(), fd::param<"ln1.b", float, D>());
  constexpr auto h = tokens + fd::nn::attention<"attn", 2>(n1);
  constexpr auto n2 =
      fd::layernorm(h, fd::param<"ln2.g", float, D>(), fd::param<"ln2.b", float, D>());
  constexpr auto y = h + fd::nn::feed_forward<"ffn", 32, fd::nn::activation::gelu>(n2);
  return fd::layernorm(y, ln_g, ln_b);
}

std::uint32_t seed_of(const std::string& name) {
  std::uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ std::uint32_t(std::uint8_t(c))) * 16777619u;
  return h;
}

// Seeded values in [-scale, scale) for every binding of a program, by name (the same name gets the
// same values in every program); a test may change them before a run.
struct values_by_name {
  std::map<std::string, std::vector<float>> v;
  float scale = 1.0f;
  std::vector<float>& of(std::string_view name, const fd::dims& shape) {
    auto [it, fresh] = v.try_emplace(std::string(name));
    if (fresh) {
      std::mt19937 rng(seed_of(it->first));
      std::uniform_real_distribution<float> u(-scale, scale);
      it->second.resize(std::size_t(shape.size()));
      for (float& f : it->second) f = u(rng);
    }
    return it->second;
  }
  // Binds every input and param among `nodes` (a node table of region 0) on `backend`.
  template <class Backend, class Nodes>
  void bind_all(Backend& backend, const Nodes& nodes) {
    for (const fd::graph::node& n : nodes)
      if (n.op == op_kind::input || n.op == op_kind::param)
        backend.bind(n.name.view(),
                     fd::tensor_ref{of(n.name.view(), n.shape).data(), fd::dtype::f32, n.shape});
  }
};

template <class Program>
std::vector<float> run_cpu(const Program& p, values_by_name& vals) {
  fd::cpu::executor ex(p);
  vals.bind_all(ex, p.graph.nodes);
  const auto& out = p.graph[p.graph.outputs[0]];
  std::vector<float> y(std::size_t(out.shape.size()));
  ex.bind_output(0, fd::tensor_ref{y.data(), fd::dtype::f32, out.shape});
  ex.run();
  CHECK(ex.stats().interpreted_groups == 0);
  return y;
}

// The first output of a node table (a program's graph or a builder's), by the reference backend.
template <class Nodes>
std::vector<float> run_reference(const fd::graph::graph_view& g, const Nodes& nodes,
                                 values_by_name& vals) {
  fd::reference::evaluator ref{g};
  vals.bind_all(ref, nodes);
  return test::values(ref.run().at(0));
}
template <class Program>
std::vector<float> run_reference(const Program& p, values_by_name& vals) {
  return run_reference(fd::graph::graph_view(p.graph), p.graph.nodes, vals);
}

// Rows [lo, hi) of a row-major [rows, cols] result.
std::vector<float> rows(const std::vector<float>& all, std::int64_t cols, std::int64_t lo,
                        std::int64_t hi) {
  return std::vector<float>(all.begin() + lo * cols, all.begin() + hi * cols);
}

}  // namespace

TEST_CASE("a row slice of a layernorm normalises only that row") {
  constexpr auto& g = fd::flatten(fd::slice<0, 2, 5>(fd::layernorm(x, ln_g, ln_b)));
  static_assert(count(g, op_kind::layernorm) == 1 && rows_of(g, op_kind::layernorm, 0) == 3);
  static_assert(g[g.outputs[0]].op == op_kind::layernorm);
  // the slice now reads the input
  static_assert(count(g, op_kind::slice) == 1 && g[g[g.outputs[0]].in[0]].op == op_kind::slice);
  // a slice along the normalised axis cannot pass the layernorm
  constexpr auto& cols = fd::flatten(fd::slice<1, 0, 4>(fd::layernorm(x, ln_g, ln_b)));
  static_assert(cols[cols.outputs[0]].op == op_kind::slice);
}

TEST_CASE("a slice of a matmul's rows slices A; of its columns, B") {
  constexpr auto& r = fd::flatten(fd::slice<0, 0, 1>(fd::matmul(fd::relu(x), w) + fd::lit<1.0>));
  static_assert(rows_of(r, op_kind::matmul, 0) == 1 && rows_of(r, op_kind::relu, 0) == 1);
  constexpr auto& c = fd::flatten(fd::slice<1, 4, 9>(fd::matmul(x, w)));
  static_assert(c[c.outputs[0]].op == op_kind::matmul && c[c.outputs[0]].shape[1] == 5);
  static_assert(c[c[c.outputs[0]].in[1]].op == op_kind::slice);  // of the weight
  // through a transposed operand: A^T's rows are A's columns
  constexpr auto& t =
      fd::flatten(fd::slice<0, 1, 3>(fd::matmul(fd::transpose(fd::input<"a", float, D, L>()), w)));
  static_assert(t[t.outputs[0]].op == op_kind::matmul && t[t.outputs[0]].trans_a);
  static_assert(t[t[t.outputs[0]].in[0]].shape == fd::make_dims(D, 2));
}

TEST_CASE("a node another op reads too is computed whole, once") {
  constexpr auto e = fd::exp(x);
  constexpr auto& g = fd::flatten(fd::slice<0, 0, 2>(e) + fd::slice<0, 8, 10>(e));
  static_assert(count(g, op_kind::exp) == 1 && rows_of(g, op_kind::exp, 0) == L);
  static_assert(count(g, op_kind::slice) == 2);
  // two identical slices are one reader
  constexpr auto& same = fd::flatten(fd::slice<0, 0, 2>(e) * fd::slice<0, 0, 2>(e));
  static_assert(rows_of(same, op_kind::exp, 0) == 2);
}

TEST_CASE("through reshapes that keep the axis whole, transposes, broadcasts and concats") {
  // [L, D] -> [L, 3, 4] -> [3, L, 4]; slice L: the reshape keeps axis 0 whole
  constexpr auto heads = fd::permute<1, 0, 2>(fd::reshape<L, 3, 4>(fd::exp(x)));
  constexpr auto& g = fd::flatten(fd::slice<1, 4, 6>(heads));
  static_assert(rows_of(g, op_kind::exp, 0) == 2);
  // [L, D] -> [L * D]: the first 12 elements are not an axis of x; the slice stays
  constexpr auto& flat = fd::flatten(fd::slice<0, 0, 12>(fd::reshape<L * D>(fd::exp(x))));
  static_assert(rows_of(flat, op_kind::exp, 0) == L);
  // a broadcast operand is not sliced; the concat's parts outside the range are not read
  constexpr auto bc = fd::broadcast_to<L, D>(fd::param<"row", float, 1, D>());
  constexpr auto cat = fd::concat<0>(fd::exp(x) * bc, fd::tanh(x));
  constexpr auto& c = fd::flatten(fd::slice<0, 3, 7>(cat));
  static_assert(count(c, op_kind::concat) == 0 && count(c, op_kind::tanh) == 0);
  static_assert(rows_of(c, op_kind::exp, 0) == 4 && count(c, op_kind::broadcast) <= 1);
  constexpr auto& across = fd::flatten(fd::slice<0, 8, 12>(cat));
  static_assert(rows_of(across, op_kind::exp, 0) == 2 && rows_of(across, op_kind::tanh, 0) == 2);
  static_assert(rows_of(across, op_kind::concat, 0) == 4);
}

TEST_CASE("the class token of a ViT block: one row of the final layernorm and feed-forward") {
  constexpr auto out = block();
  constexpr auto whole = fd::compile(out);
  constexpr auto first = fd::compile(fd::slice<0, 0, 1>(out));
  constexpr auto middle = fd::compile(fd::slice<0, 3, 7>(out));
  // the final layernorm, the second one and both feed-forward GEMMs run on the class token only
  static_assert(count(first.graph, op_kind::layernorm) == 3);
  static_assert(rows_of(first.graph, op_kind::layernorm, 1) == 1);
  static_assert(rows_of(first.graph, op_kind::layernorm, 2) == 1);
  static_assert(rows_of(whole.graph, op_kind::layernorm, 2) == L + 1);
  // and, once the second layernorm's and the residual's slices of h are one (a second pass), the
  // attention too: its query projection, scores, softmax and output projection on that row; only
  // the keys' and values' projections read every token
  static_assert(count(first.graph, op_kind::matmul) == 8);
  static_assert(rows_of(first.graph, op_kind::matmul, 0) == L + 1);
  static_assert(rows_of(first.graph, op_kind::matmul, 1) == L + 1);
  static_assert(rows_of(first.graph, op_kind::matmul, 2) == 1);
  static_assert(rows_of(first.graph, op_kind::matmul, 5) == 1);
  static_assert(extent_of(first.graph, op_kind::softmax, 0, 1) == 1);  // [heads, 1, L + 1]
  values_by_name vals;
  const auto all = run_cpu(whole, vals);
  CHECK(ft::compare(run_cpu(first, vals), rows(all, D, 0, 1), ft::allclose(1e-5, 1e-5)));
  CHECK(ft::compare(run_cpu(middle, vals), rows(all, D, 3, 7), ft::allclose(1e-5, 1e-5)));
  CHECK(ft::compare(run_reference(middle, vals), rows(all, D, 3, 7), ft::allclose(1e-5, 1e-5)));
}

TEST_CASE("rows with NaN and inf stay where they are") {
  constexpr auto f = fd::softmax(fd::matmul(x, w) * fd::lit<0.5>);
  constexpr auto whole = fd::compile(f);
  constexpr auto part = fd::compile(fd::slice<0, 2, 6>(f));
  static_assert(rows_of(part.graph, op_kind::matmul, 0) == 4);
  values_by_name vals;
  vals.of("x", fd::make_dims(L, D));
  auto& xv = vals.v["x"];
  xv[std::size_t(3 * D + 1)] = std::numeric_limits<float>::quiet_NaN();  // row 3: all NaN
  xv[std::size_t(4 * D + 2)] = std::numeric_limits<float>::infinity();   // row 4: inf
  xv[std::size_t(8 * D)] = std::numeric_limits<float>::quiet_NaN();      // row 8: outside
  const auto all = run_cpu(whole, vals);
  const auto want = rows(all, 20, 2, 6);
  CHECK(std::isnan(want[std::size_t(20)]));
  CHECK(ft::compare(run_cpu(part, vals), want, ft::allclose(1e-6, 1e-5), ft::nans::expected));
  CHECK(ft::compare(run_reference(part, vals), want, ft::allclose(1e-6, 1e-5), ft::nans::expected));
}

namespace {

// A random program (tests/backend/cpu/executor/random_programs.hpp: elementwise ops, reductions,
// layout ops, gathers), then on its first output either nothing, a softmax, a layernorm or a
// matmul, then a slice of a random range of a random axis as the only output.
struct sliced_program {
  fd::graph::builder b;
  bool sliced = false;  // the slice range is a strict part of its axis
};

sliced_program random_sliced(unsigned seed) {
  sliced_program p;
  fd::graph::builder& b = p.b;
  fd::test::lcg r{seed * 7919ull + 3};
  int t = fd::test::emit_random_program(b, seed)[0];
  const fd::dims s = b.at(t).shape;
  const std::int64_t last = s.back();
  switch (r.below(4)) {
    case 1:
      t = b.softmax(t, -1);
      break;
    case 2:
      t = b.norm(op_kind::layernorm, t, b.param("g", fd::dtype::f32, fd::make_dims(last)),
                 b.param("b", fd::dtype::f32, fd::make_dims(last)), 1e-5);
      break;
    case 3:
      t = b.matmul(t, b.param("w", fd::dtype::f32, fd::make_dims(last, 6)));
      break;
    default:
      break;
  }
  const fd::dims ts = b.at(t).shape;
  const int axis = r.below(ts.rank);
  const std::int64_t lo = r.below(int(ts[axis])), hi = lo + 1 + r.below(int(ts[axis] - lo));
  p.sliced = hi - lo < ts[axis];
  b.mark_output(b.slice(t, axis, lo, hi));
  fd::graph::prune(b);
  return p;
}

}  // namespace

// Bit for bit, but where a matmul takes fewer rows: the reference backend's matmul is Eigen's GEMM,
// whose blocking (so its rounding) depends on the matrix's size.
TEST_CASE("random programs sliced: the rewritten graph computes the same values") {
  int sunk = 0, programs = 0;
  for (unsigned seed = 1; seed <= 300; ++seed) {
    CAPTURE(seed);
    sliced_program p = random_sliced(seed);
    if (!p.sliced) continue;
    ++programs;
    fd::graph::builder q = p.b;
    fd::graph::sink_slices(q);
    const auto slice_reads_leaf = [](const fd::graph::builder& g) {
      const auto& out = g[g.outputs[0]];
      return out.op != op_kind::slice || fd::graph::is_leaf(g[out.in[0]].op);
    };
    if (slice_reads_leaf(q) && !slice_reads_leaf(p.b)) ++sunk;
    values_by_name values{{}, 2.0f};
    const auto want = run_reference(fd::graph::view_of(p.b), p.b.nodes, values);
    const auto got = run_reference(fd::graph::view_of(q), q.nodes, values);
    bool product = false;
    for (const auto& n : p.b.nodes) product = product || n.op == op_kind::matmul;
    CHECK(ft::compare(got, want, product ? ft::rel_tol(1e-5) : ft::exact(), ft::nans::expected));
  }
  // most programs had their slice moved down to the leaves
  CHECK(programs > 200);
  CHECK(sunk > programs / 2);
  MESSAGE(sunk << " of " << programs << " sliced programs rewritten down to a leaf");
}
