// graph::expand: row composites become exactly their documented primitives, everything else is
// copied, block bodies stay regions; it runs in constant evaluation and at run time alike.
#include "fusedsl/graph/expand.hpp"
#include "../common/graph_util.hpp"
#include "../common/test_util.hpp"

namespace {

using fd::graph::op_kind;

template <class G>
constexpr bool only_primitives(const G& g) {
  for (int i = 0; i < g.size(); ++i)
    if (fd::graph::is_row_composite(g[i].op)) return false;
  return true;
}

using fd::test::count;

template <class G, std::size_t N>
constexpr bool ops_are(const G& g, const std::array<op_kind, N>& ops) {
  if (std::size_t(g.size()) != N) return false;
  for (std::size_t i = 0; i < N; ++i)
    if (g[int(i)].op != ops[i]) return false;
  return true;
}

constexpr auto x = fd::input<"x", float, 4, 8>();

}  // namespace

TEST_CASE("softmax expands to max, guarded shift, exp, sum, guarded divide") {
  constexpr auto& g = fd::flatten(fd::softmax(x));
  constexpr auto& e = fd::graph::expand<g>();
  static_assert(ops_are(e, std::array{op_kind::input, op_kind::reduce_max, op_kind::constant,
                                      op_kind::eq, op_kind::constant, op_kind::select, op_kind::sub,
                                      op_kind::exp, op_kind::reduce_sum, op_kind::eq,
                                      op_kind::constant, op_kind::select, op_kind::div}));
  static_assert(e[1].keepdims && e[1].axis == 1 && e[1].shape == fd::make_dims(4, 1));
  static_assert(e[2].value == -std::numeric_limits<double>::infinity() && e[2].weak);
  static_assert(e[9].in[1] == 4);  // s == 0 reuses the constant 0
  static_assert(e.outputs[0] == 12 && e.n_outputs == 1);
  CHECK(fd::graph::to_text(e).find("div f32[4,8] (%7, %11)  -> output 0") != std::string::npos);
}

TEST_CASE("log_softmax expands to (x - m') - log(s')") {
  constexpr auto& g = fd::flatten(fd::log_softmax<0>(x));
  constexpr auto& e = fd::graph::expand<g>();
  static_assert(only_primitives(e));
  static_assert(e[e.outputs[0]].op == op_kind::sub);
  static_assert(e[e[e.outputs[0]].in[1]].op == op_kind::log);
  static_assert(e[1].axis == 0);
  static_assert(count(e, op_kind::div) == 0);
}

TEST_CASE(
    "layernorm expands to mean, centre, variance, rsqrt(var + eps), scale and shift; rmsnorm "
    "without centring") {
  constexpr auto gm = fd::param<"g", float, 8>();
  constexpr auto bt = fd::param<"b", float, 8>();
  constexpr auto& g = fd::flatten(fd::layernorm<1e-3>(x, gm, bt), fd::rmsnorm(x, gm));
  constexpr auto& e = fd::graph::expand<g>();
  static_assert(only_primitives(e));
  static_assert(count(e, op_kind::reduce_mean) == 3);  // mean and variance; mean square
  static_assert(count(e, op_kind::rsqrt) == 2);
  static_assert(count(e, op_kind::sub) == 1);
  static_assert(e.n_outputs == 2);
  static_assert(e[e.outputs[0]].op == op_kind::add);  // ... * gamma + beta
  static_assert(e[e.outputs[1]].op == op_kind::mul);  // ... * gamma
  constexpr bool eps_kept = [] {
    bool ln = false, rms = false;
    for (int i = 0; i < e.size(); ++i) {
      ln = ln || (e[i].op == op_kind::constant && e[i].value == 1e-3);
      rms = rms || (e[i].op == op_kind::constant && e[i].value == 1e-6);
    }
    return ln && rms;
  }();
  static_assert(eps_kept);
}

TEST_CASE("expanding a stack keeps its body a region and expands the composites inside it") {
  constexpr auto blk = fd::nn::transformer_block<fd::nn::post_ln, 4, 64>;
  constexpr auto a = fd::input<"x", float, 16, 32>();
  constexpr auto& g = fd::flatten(fd::nn::stack<"layers", 4>(blk, a));
  constexpr auto& e = fd::graph::expand<g>();
  static_assert(only_primitives(e));
  static_assert(e.n_regions == 2);
  static_assert(count(e, op_kind::repeat) == 1 && e[e.outputs[0]].op == op_kind::repeat);
  static_assert(e[e.regions[1].placeholder].op == op_kind::placeholder &&
                e[e.regions[1].placeholder].region == 1);
  static_assert(e[e.regions[1].result].region == 1);
  // The softmax becomes 12 nodes (+11); each layernorm 10 (+9), the second sharing the first's eps.
  static_assert(e.size() == g.size() + 11 + 9 + 8);
  CHECK(fd::reference::required_bindings(e) == fd::reference::required_bindings(g));
}

TEST_CASE("expand gives the same table at run time as in constant evaluation") {
  constexpr auto blk = fd::nn::transformer_block<fd::nn::pre_ln, 4, 64, 2, true>;
  constexpr auto a = fd::input<"x", float, 16, 32>();
  constexpr auto& g = fd::flatten(blk(a));
  constexpr auto& e = fd::graph::expand<g>();
  const fd::graph::builder b = fd::graph::expand(g);
  REQUIRE(b.size() == e.size());
  for (int i = 0; i < e.size(); ++i) CHECK(b[i].same_as(e[i]));
  CHECK(fd::graph::to_text(fd::graph::view_of(b)) == fd::graph::to_text(e));
}

TEST_CASE(
    "the reference backend computes softmax bit for bit as the primitives written out by hand") {
  constexpr double ninf = -std::numeric_limits<double>::infinity();
  constexpr auto m = fd::max<1, true>(x);
  constexpr auto m_safe = fd::where(fd::eq(m, fd::lit<ninf>), fd::lit<0.0>, m);
  constexpr auto ex = fd::exp(x - m_safe);
  constexpr auto s = fd::sum<1, true>(ex);
  constexpr auto by_hand = ex / fd::where(fd::eq(s, fd::lit<0.0>), fd::lit<1.0>, s);
  auto xv = test::random_tensor<float, 4, 8>(3, -5, 5);
  xv(2, 0) = -std::numeric_limits<float>::infinity();
  auto a = fd::reference::run(fd::flatten(fd::softmax(x)), {{"x", xv}});
  auto b = fd::reference::run(fd::flatten(by_hand), {{"x", xv}});
  for (int i = 0; i < 32; ++i) CHECK(a[0].data<float>()[i] == b[0].data<float>()[i]);
}
