// Static memory planning: offsets and arena size are compile-time constants; the verifier
// accepts the planner's output and rejects corrupted plans.
#include <doctest/doctest.h>

#include "fusedsl/models/transformer.hpp"
#include "fusedsl/plan/report.hpp"

namespace fd = fusedsl;
using fd::graph::op_kind;

namespace {
constexpr auto x = fd::input<"x", float, 16, 16>();
constexpr auto w1 = fd::param<"w1", float, 16, 16>();
constexpr auto w2 = fd::param<"w2", float, 16, 16>();
constexpr auto w3 = fd::param<"w3", float, 16, 16>();
// Three matmuls in a chain: a -> b -> c -> output. a dies when b is written, so c can reuse it.
constexpr auto a = fd::exp(fd::matmul(x, w1));
constexpr auto b = fd::exp(fd::matmul(a, w2));
constexpr auto chain = fd::compile(fd::matmul(b, w3));
}  // namespace

TEST_CASE("arena offsets and size are compile-time constants") {
  constexpr auto& m = chain.memory;
  // 16x16 f32 = 1024 bytes per buffer; a and b are live together, the output is user memory.
  static_assert(chain.kernel_count() == 3);
  static_assert(chain.arena_bytes() == 2048);
  static_assert(m.offset[3] == 0 || m.offset[3] == 1024);
  static_assert(chain.check.ok());
  CHECK(m.offset[3] % 64 == 0);
}

TEST_CASE("buffers live at the same time never overlap; dead ones are reused") {
  constexpr auto c = fd::exp(fd::matmul(b, w3));
  constexpr auto d = fd::matmul(c, w1);
  constexpr auto p = fd::compile(d);
  // a, b, c: a and c are never live together, so the arena holds two buffers, not three.
  static_assert(p.arena_bytes() == 2048);
  static_assert(p.stats().fused_bytes == 3 * 1024);
}

TEST_CASE("an elementwise kernel writes in place over an operand that dies in it") {
  constexpr auto h = fd::matmul(x, w1);
  constexpr auto s =
      fd::softmax(h * fd::lit<2.0> + fd::matmul(x, w2));  // row kernel over a dead buffer
  constexpr auto p = fd::compile(fd::matmul(s, w3));
  bool in_place = false;
  for (int i = 0; i < p.graph.size(); ++i)
    in_place = in_place || p.memory.alias_of[std::size_t(i)] >= 0;
  CHECK(in_place);
  CHECK(p.check.ok());
}

TEST_CASE("a stacked block is planned once and runs in place") {
  using seed = fd::models::seed;
  constexpr auto& p = seed::program;
  constexpr auto s = p.stats();
  static_assert(s.kernels_per_layer <= 8);
  // The planner's targets (docs/memory.md): arena <= 35% of naive bytes, <= 50% of the eager peak.
  static_assert(s.arena_bytes * 100 <= 35 * s.naive_bytes);
  static_assert(s.arena_bytes * 100 <= 50 * s.eager_peak_bytes);
  int repeat = -1;
  for (int i = 0; i < p.graph.size(); ++i)
    if (p.graph[i].op == op_kind::repeat) repeat = i;
  REQUIRE(repeat >= 0);
  CHECK(p.memory.body_in_place[std::size_t(repeat)]);
  // Depth does not change the arena: the body's plan is reused by every layer.
  using deeper = fd::models::transformer<128, 128, 4, 512, 6>;
  static_assert(deeper::program.arena_bytes() == p.arena_bytes());
  static_assert(deeper::program.graph.size() == p.graph.size());
}

TEST_CASE("the verifier rejects overlapping live buffers and reads before writes") {
  auto m = chain.memory;
  auto f = chain.fusion;
  int first = -1, second = -1;
  for (int i = 0; i < chain.graph.size(); ++i)
    if (m.in_arena(i)) (first < 0 ? first : second) = i;
  REQUIRE(second >= 0);
  m.offset[std::size_t(second)] = m.offset[std::size_t(first)];
  const auto bad = fd::plan::verify(chain.graph, f, m);
  CHECK_FALSE(bad.ok());
  CHECK(std::string(bad.error) == "two buffers live at the same time overlap");

  auto f2 = chain.fusion;
  std::swap(f2.order[0], f2.order[1]);
  const auto bad2 = fd::plan::verify(chain.graph, f2, chain.memory);
  CHECK_FALSE(bad2.ok());
  CHECK(std::string(bad2.error) == "a value is read before it is written");
}

TEST_CASE("print_plan and the JSON figures name every kernel and buffer") {
  constexpr auto& p = fd::models::seed::program;
  const std::string text = fd::plan::print_plan(p.graph, p.fusion, p.memory);
  CHECK(text.find("block body (region 1): 7 kernels") != std::string::npos);
  CHECK(text.find("attention") != std::string::npos);
  const std::string json = fd::plan::to_json(p.stats(), "seed");
  CHECK(json.find("\"kernels_per_layer\": 7") != std::string::npos);
  CHECK(json.find("\"arena_bytes\": ") != std::string::npos);
  const std::string dot = fd::plan::plan_to_dot(p.graph, p.fusion);
  CHECK(dot.find("subgraph cluster_g") != std::string::npos);
}
