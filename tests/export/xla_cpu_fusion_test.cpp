// hlo::split_for_xla_cpu on small hand-built group computations: which values become parts of
// their own, what each part reads, and that every part keeps XLA:CPU's rules (xla_cpu_rules.hpp).
#include "fusedsl/export/xla_cpu_fusion.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "xla_cpu_rules.hpp"

namespace hlo = fusedsl::hlo;
using hlo::element_type;
using hlo::opcode;

namespace {

hlo::shape f32(std::vector<std::int64_t> d) {
  return hlo::shape::array(element_type::f32, std::move(d));
}

void check_rules(const hlo::fusion_split& s) {
  for (const hlo::fusion_part& p : s.parts) CHECK(xla_cpu_rules::check_part(p.body) == "");
}

opcode root_op(const hlo::fusion_part& p) { return p.body.root_instruction().opcode; }

std::size_t count(const hlo::computation& c, opcode op) {
  std::size_t n = 0;
  for (const auto& in : c.instructions) n += in.opcode == op;
  return n;
}

const hlo::computation sum = hlo::make_scalar_computation("sum", opcode::add, element_type::f32);

}  // namespace

TEST_CASE(
    "an elementwise group stays one part with the group's name, reading the group's parameters") {
  hlo::computation_builder b("fused_loop_0");
  auto x = b.add_parameter(f32({4, 8}), "x");
  auto y = b.add_parameter(f32({8}), "y");
  b.add_unary(opcode::exponential, b.add_binary(opcode::add, x, b.add_broadcast(y, {4, 8}, {1})));
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  REQUIRE(s.parts.size() == 1);
  CHECK(s.parts[0].body.name == "fused_loop_0");
  CHECK(s.parts[0].operands == std::vector<hlo::part_value>{{false, 0}, {false, 1}});
  CHECK(s.outputs == std::vector<hlo::part_value>{{true, 0}});
  check_rules(s);
}

TEST_CASE(
    "a tuple root gives one part per output; a parameter returned as it is stays a parameter") {
  hlo::computation_builder b("fused_loop_1");
  auto x = b.add_parameter(f32({4}), "x");
  auto n = b.add_unary(opcode::negate, x);
  b.add_tuple({n, b.add_unary(opcode::exponential, n), x});
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  REQUIRE(s.parts.size() == 2);
  CHECK(s.parts[0].body.name == "fused_loop_1.part0");
  CHECK(s.parts[1].body.name == "fused_loop_1.part1");
  CHECK(root_op(s.parts[0]) == opcode::negate);
  CHECK(s.parts[1].operands ==
        std::vector<hlo::part_value>{{true, 0}});  // exp reads the negate part
  CHECK(s.outputs == std::vector<hlo::part_value>{{true, 0}, {true, 1}, {false, 0}});
  check_rules(s);
}

TEST_CASE(
    "a reduce whose result is broadcast back is a part of its own (softmax: max, sum, divide)") {
  hlo::computation_builder b("fused_row_2");
  auto x = b.add_parameter(f32({4, 8}), "x");
  auto zero = b.add_constant(hlo::literal::scalar(element_type::f32, 0));
  auto e = b.add_unary(opcode::exponential, x);
  auto s0 = b.add_reduce(e, zero, {1}, sum);
  b.add_binary(opcode::divide, e, b.add_broadcast(s0, {4, 8}, {0}));
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  REQUIRE(s.parts.size() == 2);
  CHECK(root_op(s.parts[0]) == opcode::reduce);
  CHECK(count(s.parts[0].body, opcode::exponential) ==
        1);  // the reduce's producer is fused into it
  CHECK(root_op(s.parts[1]) == opcode::divide);
  CHECK(s.parts[1].operands == std::vector<hlo::part_value>{{false, 0}, {true, 0}});
  check_rules(s);
}

TEST_CASE("a reduce used once by an elementwise root stays inside the root's part") {
  hlo::computation_builder b("fused_reduce_3");
  auto x = b.add_parameter(f32({4, 8}), "x");
  auto zero = b.add_constant(hlo::literal::scalar(element_type::f32, 0));
  b.add_unary(opcode::sqrt, b.add_reduce(x, zero, {1}, sum));
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  REQUIRE(s.parts.size() == 1);
  CHECK(count(s.parts[0].body, opcode::reduce) == 1);
}

TEST_CASE(
    "a dot with a bias epilogue is one part; an epilogue that reads the dot twice gets its own "
    "part") {
  auto group = [](bool twice) {
    hlo::computation_builder b("fused_matmul_4");
    auto x = b.add_parameter(f32({4, 8}), "x");
    auto w = b.add_parameter(f32({8, 6}), "w");
    auto bias = b.add_parameter(f32({6}), "b");
    auto d = b.add_dot(x, w, {{}, {1}, {}, {0}});
    auto y = b.add_binary(opcode::add, d, b.add_broadcast(bias, {4, 6}, {1}));
    if (twice) b.add_binary(opcode::multiply, y, b.add_unary(opcode::tanh, y));
    return hlo::split_for_xla_cpu(b.build());
  };
  const hlo::fusion_split bias_only = group(false);
  REQUIRE(bias_only.parts.size() == 1);
  CHECK(count(bias_only.parts[0].body, opcode::dot) == 1);
  check_rules(bias_only);
  const hlo::fusion_split gated = group(true);
  REQUIRE(gated.parts.size() == 2);
  CHECK(root_op(gated.parts[0]) == opcode::dot);
  CHECK(count(gated.parts[1].body, opcode::dot) == 0);
  check_rules(gated);
}

TEST_CASE(
    "a transpose feeding a dot is folded into its dimension numbers; the dot reads parameters") {
  hlo::computation_builder b("fused_attention_5");
  auto q = b.add_parameter(f32({16, 64}), "q");
  auto k = b.add_parameter(f32({16, 64}), "k");
  auto qh = b.add_transpose(b.add_reshape(q, {16, 4, 16}), {1, 0, 2});  // [4,16,16] heads first
  auto kh = b.add_transpose(b.add_reshape(k, {16, 4, 16}), {1, 0, 2});
  b.add_dot(qh, kh, {{0}, {2}, {0}, {2}});
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  // The reshapes are parts (a dot reads parameters), then the dot over the heads axis 1.
  REQUIRE(s.parts.size() == 3);
  const hlo::computation& dot = s.parts[2].body;
  CHECK(count(dot, opcode::transpose) == 0);
  const hlo::instruction& d = dot.root_instruction();
  REQUIRE(d.dot);
  CHECK(d.dot->lhs_batch == std::vector<std::int64_t>{1});
  CHECK(d.dot->rhs_batch == std::vector<std::int64_t>{1});
  CHECK(d.shape.dims == std::vector<std::int64_t>{4, 16, 16});
  check_rules(s);
}

TEST_CASE("a transpose that cannot be folded is a part of its own, reading a parameter") {
  hlo::computation_builder b("fused_loop_6");
  auto x = b.add_parameter(f32({4, 8}), "x");
  auto t = b.add_transpose(b.add_unary(opcode::negate, x), {1, 0});
  b.add_unary(opcode::exponential, t);
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  REQUIRE(s.parts.size() == 3);
  CHECK(root_op(s.parts[0]) == opcode::negate);
  CHECK(root_op(s.parts[1]) == opcode::transpose);
  CHECK(root_op(s.parts[2]) == opcode::exponential);
  check_rules(s);
}

TEST_CASE(
    "a reshape of an intermediate on the root's elementwise path is split off; under a broadcast "
    "it stays") {
  hlo::computation_builder b("fused_loop_7");
  auto x = b.add_parameter(f32({4, 8}), "x");
  auto r = b.add_reshape(b.add_unary(opcode::negate, x), {32});
  b.add_unary(opcode::exponential, r);
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  REQUIRE(s.parts.size() == 3);  // negate, reshape of it, exp
  check_rules(s);

  hlo::computation_builder c("fused_loop_8");
  auto y = c.add_parameter(f32({4, 1}), "y");
  auto z = c.add_parameter(f32({4, 8}), "z");
  c.add_binary(opcode::add, z,
               c.add_broadcast(c.add_reshape(c.add_unary(opcode::abs, y), {4}), {4, 8}, {0}));
  CHECK(hlo::split_for_xla_cpu(c.build()).parts.size() == 1);
}

TEST_CASE("logistic is expanded as XLA does before fusion: 1 / (1 + exp(-x))") {
  hlo::computation_builder b("fused_loop_9");
  b.add_unary(opcode::logistic, b.add_parameter(f32({4}), "x"));
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  REQUIRE(s.parts.size() == 1);
  const hlo::computation& c = s.parts[0].body;
  CHECK(count(c, opcode::logistic) == 0);
  CHECK(count(c, opcode::negate) == 1);
  CHECK(count(c, opcode::exponential) == 1);
  CHECK(c.root_instruction().opcode == opcode::divide);
  check_rules(s);
}

TEST_CASE(
    "with library_dots every dot is a lone part of parameters, marked to run as a plain dot") {
  hlo::computation_builder b("fused_matmul_10");
  auto x = b.add_parameter(f32({4, 8}), "x");
  auto w = b.add_parameter(f32({8, 6}), "w");
  auto bias = b.add_parameter(f32({6}), "b");
  auto d = b.add_dot(x, w, {{}, {1}, {}, {0}});
  b.add_binary(opcode::add, d, b.add_broadcast(bias, {4, 6}, {1}));
  hlo::xla_cpu_options o;
  o.library_dots = true;
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build(), o);
  REQUIRE(s.parts.size() == 2);
  CHECK(s.parts[0].library_dot);
  CHECK(root_op(s.parts[0]) == opcode::dot);
  CHECK(s.parts[0].operands == std::vector<hlo::part_value>{{false, 0}, {false, 1}});
  CHECK_FALSE(s.parts[1].library_dot);
  CHECK(count(s.parts[1].body, opcode::dot) == 0);
  check_rules(s);
}

TEST_CASE("a concatenate on the root's elementwise path is a root reading parameters") {
  hlo::computation_builder b("fused_loop_11");
  auto x = b.add_parameter(f32({4, 8}), "x");
  auto y = b.add_parameter(f32({4, 8}), "y");
  b.add_unary(opcode::tanh, b.add_concatenate({b.add_unary(opcode::negate, x), y}, 1));
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  REQUIRE(s.parts.size() == 3);  // negate; the concatenate of it and y; tanh
  CHECK(root_op(s.parts[0]) == opcode::negate);
  CHECK(root_op(s.parts[1]) == opcode::concatenate);
  CHECK(s.parts[1].operands == std::vector<hlo::part_value>{{false, 1}, {true, 0}});
  CHECK(root_op(s.parts[2]) == opcode::tanh);
  check_rules(s);
}

TEST_CASE(
    "a gather is rewritten into XLA's simplified form between two reshapes, each placed by the "
    "reshape rule") {
  hlo::computation_builder b("fused_loop_5");
  auto table = b.add_parameter(f32({10, 4}), "table");
  auto ids = b.add_parameter(hlo::shape::array(element_type::s32, {2, 3}), "ids");
  auto one =
      b.add_broadcast(b.add_constant(hlo::literal::scalar_int(element_type::s32, 1)), {2, 3}, {});
  auto rows =
      b.add_gather(table, b.add_binary(opcode::add, ids, one), {{2}, {0}, {0}, {}, {}, 2}, {1, 4});
  b.add_unary(opcode::exponential, rows);
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  check_rules(s);
  // ids + 1 reshaped to [6, 1] and the gather of [6, 1, 4] rows | their reshape to [2, 3, 4] | exp
  // (the indices' reshape is off the root's elementwise path: XLA:CPU takes it, see the interop
  // case xla_cpu_split_embedding)
  REQUIRE(s.parts.size() == 3);
  CHECK(root_op(s.parts[0]) == opcode::gather);
  const hlo::instruction& g = s.parts[0].body.root_instruction();
  CHECK(g.shape == f32({6, 1, 4}));
  CHECK(g.gather == hlo::gather_dimension_numbers{{1, 2}, {}, {0}, {}, {}, 1});
  CHECK(g.slice_sizes == std::vector<std::int64_t>{1, 4});
  CHECK(s.parts[0].body.instructions[g.operands[1]].opcode == opcode::reshape);
  CHECK(count(s.parts[0].body, opcode::add) == 1);
  CHECK(root_op(s.parts[1]) == opcode::reshape);
  CHECK(s.parts[1].body.root_instruction().shape == f32({2, 3, 4}));
  CHECK(root_op(s.parts[2]) == opcode::exponential);
  CHECK(s.parts[2].operands == std::vector<hlo::part_value>{{true, 1}});
}

TEST_CASE(
    "a gather this rewrite does not take (batching dims, leading offset dims) is an error naming "
    "it") {
  hlo::computation_builder b("fused_loop_6");
  auto rows = b.add_parameter(f32({3, 10}), "rows");
  auto idx = b.add_parameter(hlo::shape::array(element_type::s32, {3, 2, 1}), "idx");
  b.add_gather(rows, idx, {{}, {1}, {1}, {0}, {0}, 2}, {1, 1}, false, "take_along");
  CHECK_THROWS_WITH_AS(
      hlo::split_for_xla_cpu(b.build()),
      doctest::Contains("split_for_xla_cpu: gather take_along in fused_loop_6 is not in a form"),
      hlo::ir_error);
}

TEST_CASE(
    "a variadic reduce is a part whose root is the reduce; its results are read as tuple "
    "elements") {
  hlo::computation_builder c("argmax");
  auto a = c.add_parameter(f32({}), "a");
  auto ia = c.add_parameter(hlo::shape::scalar(element_type::s32), "ia");
  auto v = c.add_parameter(f32({}), "b");
  auto iv = c.add_parameter(hlo::shape::scalar(element_type::s32), "ib");
  auto gt = c.add_compare(a, v, hlo::comparison_direction::gt);
  c.add_tuple({c.add_select(gt, a, v), c.add_select(gt, ia, iv)});
  const hlo::computation argmax = c.build();
  hlo::computation_builder b("fused_reduce_7");
  auto x = b.add_parameter(f32({4, 8}), "x");
  auto io = b.add_iota(hlo::shape::array(element_type::s32, {4, 8}), 1);
  auto r = b.add_reduce({b.add_unary(opcode::exponential, x), io},
                        {b.add_constant(hlo::literal::scalar(element_type::f32, -INFINITY)),
                         b.add_constant(hlo::literal::scalar_int(element_type::s32, 0))},
                        {1}, argmax);
  auto i = b.add_get_tuple_element(r, 1);
  b.add_tuple({b.add_convert(i, element_type::f32), i});
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  check_rules(s);
  REQUIRE(s.parts.size() == 2);
  CHECK(root_op(s.parts[0]) == opcode::reduce);
  CHECK(s.parts[0].body.root_instruction().shape.is_tuple());
  CHECK(count(s.parts[0].body, opcode::exponential) == 1);
  CHECK(root_op(s.parts[1]) == opcode::convert);
  CHECK(s.parts[1].operands == std::vector<hlo::part_value>{{true, 0, 1}});
  CHECK(s.outputs == std::vector<hlo::part_value>{{true, 1}, {true, 0, 1}});
}

TEST_CASE(
    "a dynamic-update-slice reads its operand and its update as parameters; a dynamic-slice stays "
    "fused") {
  hlo::computation_builder b("fused_loop_8");
  auto cache = b.add_parameter(f32({8, 4}), "cache");
  auto row = b.add_parameter(f32({1, 4}), "row");
  auto pos = b.add_parameter(hlo::shape::scalar(element_type::s32), "pos");
  auto zero = b.add_constant(hlo::literal::scalar_int(element_type::s32, 0));
  auto u = b.add_dynamic_update_slice(cache, b.add_unary(opcode::tanh, row), {pos, zero});
  b.add_unary(opcode::negate, b.add_dynamic_slice(u, {pos, zero}, {2, 4}));
  const hlo::fusion_split s = hlo::split_for_xla_cpu(b.build());
  check_rules(s);
  REQUIRE(s.parts.size() == 3);
  CHECK(root_op(s.parts[0]) == opcode::tanh);
  CHECK(root_op(s.parts[1]) == opcode::dynamic_update_slice);
  CHECK(s.parts[1].operands == std::vector<hlo::part_value>{{false, 0}, {false, 2}, {true, 0}});
  CHECK(root_op(s.parts[2]) == opcode::negate);
  CHECK(count(s.parts[2].body, opcode::dynamic_slice) == 1);
}
