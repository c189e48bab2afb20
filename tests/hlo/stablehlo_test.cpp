// The StableHLO (MLIR text) printer: golden text, and the MLIR spellings of attributes and
// constants. (tests/interop runs every interop case's StableHLO in XLA as well.)
// Golden lines over 100 columns go on in the next raw string literal (a line ends in )mlir",
// the next starts with R"mlir(): adjacent literals concatenate into one line.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "fusedsl/hlo/builder.hpp"
#include "fusedsl/hlo/stablehlo.hpp"
#include "sample_modules.hpp"

using namespace fusedsl::hlo;

namespace {
const char* const golden_softmax = R"mlir(module @softmax {
  func.func public @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>) {
    %constant = "stablehlo.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
    %reduce = "stablehlo.reduce"(%x, %constant) ({
    ^bb0(%max$lhs: tensor<f32>, %max$rhs: tensor<f32>):
      %max$maximum = "stablehlo.maximum"(%max$lhs, %max$rhs) : (tensor<f32>, tensor<f32>) -> )mlir"
R"mlir(tensor<f32>
      "stablehlo.return"(%max$maximum) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %broadcast = "stablehlo.broadcast_in_dim"(%reduce) {broadcast_dimensions = array<i64: 0>} )mlir"
R"mlir(: (tensor<2xf32>) -> tensor<2x4xf32>
    %subtract = "stablehlo.subtract"(%x, %broadcast) : (tensor<2x4xf32>, tensor<2x4xf32>) -> )mlir"
R"mlir(tensor<2x4xf32>
    %exponential = "stablehlo.exponential"(%subtract) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %constant.1 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %reduce.1 = "stablehlo.reduce"(%exponential, %constant.1) ({
    ^bb0(%sum$lhs: tensor<f32>, %sum$rhs: tensor<f32>):
      %sum$add = "stablehlo.add"(%sum$lhs, %sum$rhs) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%sum$add) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %broadcast.1 = "stablehlo.broadcast_in_dim"(%reduce.1) {broadcast_dimensions = array<i64: )mlir"
R"mlir(0>} : (tensor<2xf32>) -> tensor<2x4xf32>
    %divide = "stablehlo.divide"(%exponential, %broadcast.1) : (tensor<2x4xf32>, )mlir"
R"mlir(tensor<2x4xf32>) -> tensor<2x4xf32>
    "func.return"(%divide) : (tensor<2x4xf32>) -> ()
  }
}
)mlir";

const char* const golden_attention =
    R"mlir(module @attention_scores attributes {mhlo.num_partitions = 2 : i32, )mlir"
R"mlir(mhlo.num_replicas = 1 : i32} {
  func.func public @main(%q: tensor<2x3x4xf32> {mhlo.sharding = "{devices=[2,1,1]<=[2]}"}, )mlir"
R"mlir(%k: tensor<2x3x4xf32> {mhlo.sharding = "{devices=[2,1,1]1,0}"}) -> (tensor<2x3x3xf32> )mlir"
R"mlir({mhlo.sharding = "{replicated}"}, tensor<2x3x3xf32> {mhlo.sharding = "{maximal device=0}"}) {
    %dot = "stablehlo.dot_general"(%q, %k) {dot_dimension_numbers = )mlir"
R"mlir(#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], )mlir"
R"mlir(lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>} : )mlir"
R"mlir((tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
    %constant = "stablehlo.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %broadcast = "stablehlo.broadcast_in_dim"(%constant) {broadcast_dimensions = array<i64>} )mlir"
R"mlir(: (tensor<f32>) -> tensor<2x3x3xf32>
    %multiply = "stablehlo.multiply"(%dot, %broadcast) : (tensor<2x3x3xf32>, )mlir"
R"mlir(tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %iota = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<3x3xi32>
    %iota.1 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<3x3xi32>
    %compare = "stablehlo.compare"(%iota, %iota.1) {comparison_direction = )mlir"
R"mlir(#stablehlo<comparison_direction GE>, compare_type = #stablehlo<comparison_type )mlir"
R"mlir(SIGNED>} : (tensor<3x3xi32>, tensor<3x3xi32>) -> tensor<3x3xi1>
    %broadcast.1 = "stablehlo.broadcast_in_dim"(%compare) {broadcast_dimensions = array<i64: )mlir"
R"mlir(1, 2>} : (tensor<3x3xi1>) -> tensor<2x3x3xi1>
    %constant.1 = "stablehlo.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> )mlir"
R"mlir(tensor<f32>
    %broadcast.2 = "stablehlo.broadcast_in_dim"(%constant.1) {broadcast_dimensions = )mlir"
R"mlir(array<i64>} : (tensor<f32>) -> tensor<2x3x3xf32>
    %select = "stablehlo.select"(%broadcast.1, %multiply, %broadcast.2) {mhlo.sharding = )mlir"
R"mlir("{replicated}"} : (tensor<2x3x3xi1>, tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> )mlir"
R"mlir(tensor<2x3x3xf32>
    "func.return"(%select, %dot) : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> ()
  }
}
)mlir";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("softmax becomes func.func @main with stablehlo.reduce regions and hex -inf") {
  CHECK(to_stablehlo(testing::softmax_module()) == golden_softmax);
}

TEST_CASE(
    "batched dot_general, broadcast_in_dim, iota mask, shardings and a tuple root as results") {
  CHECK(to_stablehlo(testing::attention_scores_module()) == golden_attention);
}

TEST_CASE(
    "fusion and call targets become private functions; tuples, slices and constants use MLIR "
    "syntax") {
  const std::string t = to_stablehlo(testing::misc_module());
  CHECK(contains(t,
                 "func.func private @fused_exp_y(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> "
                 "(tensor<2x3xf32>) {"));
  CHECK(contains(t, "\"func.call\"(%input__x__0, %constant) {callee = @fused_exp_y}"));
  CHECK(contains(t,
                 "{start_indices = array<i64: 0, 0>, limit_indices = array<i64: 2, 3>, strides = "
                 "array<i64: 1, 2>}"));
  CHECK(contains(t,
                 "dense<[[0x3F800000, 0xC0200000, 0x33D6BF95], [0x7F800000, 0xFF800000, "
                 "0x7FC00000]]> : tensor<2x3xf32>"));
  CHECK(contains(t, "dense<[true, false]> : tensor<2xi1>"));
  CHECK(contains(t, "dense<[-1099511627776, 7]> : tensor<2xi64>"));
  CHECK(contains(t, "-> tuple<tensor<2x4xf32>, tensor<6xf32>>"));
  CHECK(contains(t, "\"stablehlo.get_tuple_element\"(%tuple) {index = 1 : i32}"));
}

TEST_CASE("MLIR float literals always have a '.'; non-finite values are hex bit patterns") {
  CHECK(detail::mlir_value(element_type::f32, 1.0, false) == "1.0");
  CHECK(detail::mlir_value(element_type::f32, 1e-7, false) == "1.0e-07");
  CHECK(detail::mlir_value(element_type::f32, 2.5, false) == "2.5");
  CHECK(detail::mlir_value(element_type::f32, -INFINITY, true) == "0xFF800000");
  CHECK(detail::mlir_value(element_type::bf16, -INFINITY, true) == "0xFF80");
  CHECK(detail::mlir_value(element_type::f16, -INFINITY, true) == "0xFC00");
  CHECK(detail::mlir_value(element_type::f16, 1.0, true) == "0x3C00");
  CHECK(detail::mlir_value(element_type::f16, -2.5, true) == "0xC100");
  CHECK(detail::mlir_value(element_type::f16, std::ldexp(1.0, -24), true) == "0x0001");
  CHECK(detail::mlir_value(element_type::f64, 1.0, true) == "0x3FF0000000000000");
}

TEST_CASE("a copy is an alias, unless it carries a sharding: then a Sharding custom_call") {
  module m;
  m.name = "copies";
  computation_builder b("main");
  auto x = b.add_parameter(shape::array(element_type::f32, {8}), "x");
  auto c = b.add_unary(opcode::copy, x);
  auto s = b.add_unary(opcode::copy, c);
  b.set_sharding(s, sharding::tiled({8}));
  b.add_unary(opcode::negate, s);
  m.set_entry(b.build());
  const std::string t = to_stablehlo(m);
  CHECK(contains(t, "mhlo.num_partitions = 8 : i32"));
  CHECK(contains(t,
                 "%copy.1 = \"stablehlo.custom_call\"(%x) {call_target_name = \"Sharding\", "
                 "mhlo.sharding = \"{devices=[8]<=[8]}\"}"));
  CHECK(contains(t, "\"stablehlo.negate\"(%copy.1)"));
  CHECK_FALSE(contains(t, "%copy ="));
}

TEST_CASE("compare types follow the operand type and erf is written as chlo.erf") {
  module m;
  m.name = "cmp";
  computation_builder b("main");
  auto i = b.add_parameter(shape::array(element_type::s32, {2}), "i");
  auto p = b.add_parameter(shape::array(element_type::pred, {2}), "p");
  auto x = b.add_parameter(shape::array(element_type::f32, {2}), "x");
  auto a = b.add_compare(i, i, comparison_direction::lt);
  auto c = b.add_compare(p, p, comparison_direction::eq);
  auto e = b.add_unary(opcode::erf, x);
  b.add_tuple({a, c, e});
  m.set_entry(b.build());
  const std::string t = to_stablehlo(m);
  CHECK(contains(t,
                 "comparison_direction = #stablehlo<comparison_direction LT>, compare_type = "
                 "#stablehlo<comparison_type SIGNED>"));
  CHECK(contains(t, "compare_type = #stablehlo<comparison_type UNSIGNED>"));
  CHECK(contains(t, "%erf = \"chlo.erf\"(%x) : (tensor<2xf32>) -> tensor<2xf32>"));
  CHECK(contains(t,
                 "\"func.return\"(%compare, %compare.1, %erf) : (tensor<2xi1>, tensor<2xi1>, "
                 "tensor<2xf32>) -> ()"));
}

TEST_CASE(
    "gather, dynamic slices, a variadic reduce's results and a donated parameter in StableHLO "
    "syntax") {
  const std::string t = to_stablehlo(testing::indexing_module());
  CHECK(contains(t, "%cache: tensor<8x4xf32> {tf.aliasing_output = 0 : i32}"));
  CHECK(contains(t,
                 "\"stablehlo.gather\"(%table, %ids) {dimension_numbers = "
                 "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], "
                 "start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, "
                 "slice_sizes = array<i64: 1, 4>}"));
  CHECK(contains(t,
                 "\"stablehlo.dynamic_update_slice\"(%cache, %gather, %pos, %constant) : "
                 "(tensor<8x4xf32>, tensor<3x4xf32>, tensor<i32>, tensor<i32>) -> "
                 "tensor<8x4xf32>"));
  CHECK(contains(t,
                 "\"stablehlo.dynamic_slice\"(%dynamic-update-slice, %pos, %constant) "
                 "{slice_sizes = array<i64: 2, 4>}"));
  CHECK(contains(t,
                 "%reduce:2 = \"stablehlo.reduce\"(%dynamic-slice, %iota, %constant.1, "
                 "%constant) ({"));
  CHECK(contains(t,
                 "^bb0(%argmax$a: tensor<f32>, %argmax$ia: tensor<i32>, %argmax$b: "
                 "tensor<f32>, %argmax$ib: tensor<i32>):"));
  CHECK(contains(t,
                 "\"stablehlo.return\"(%argmax$select, %argmax$select.1) : (tensor<f32>, "
                 "tensor<i32>) -> ()"));
  CHECK(contains(t, "-> (tensor<2xf32>, tensor<2xi32>)\n"));
  CHECK(contains(t, "\"func.return\"(%dynamic-update-slice, %reduce#1)"));
  CHECK_FALSE(contains(t, "stablehlo.tuple"));
}

TEST_CASE("a variadic reduce read whole (a tuple root) becomes a stablehlo.tuple of its results") {
  module m = testing::indexing_module();
  m.input_output_alias.clear();
  computation& e = m.computations.back();
  e.root = *e.find("reduce");
  e.instructions.resize(e.root + 1);
  const std::string t = to_stablehlo(m);
  CHECK(contains(t, "-> (tensor<2xf32>, tensor<2xi32>) {"));
  CHECK(contains(t, "\"func.return\"(%reduce#0, %reduce#1)"));
  // Called as a function, the reduce's results are returned as one tuple.
  module called;
  called.name = "called";
  computation body = e;
  body.name = "body";
  called.add_computation(m.computations[0]);
  called.add_computation(body);
  computation_builder b("main");
  std::vector<instruction_id> args;
  for (instruction_id p : body.parameters())
    args.push_back(b.add_parameter(body.instructions[p].shape, body.instructions[p].name));
  b.add_get_tuple_element(b.add_call(args, called.get("body")), 1);
  called.set_entry(b.build());
  const std::string c = to_stablehlo(called);
  CHECK(contains(c,
                 "%reduce$$tuple = \"stablehlo.tuple\"(%reduce#0, %reduce#1) : (tensor<2xf32>, "
                 "tensor<2xi32>) -> tuple<tensor<2xf32>, tensor<2xi32>>"));
  CHECK(contains(c, "\"func.return\"(%reduce$$tuple)"));
}
