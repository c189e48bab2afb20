// The runtime HLO IR and its builder: shapes, literals, escaping, shape inference, errors.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "fusedsl/hlo/builder.hpp"

using namespace fusedsl::hlo;

namespace {
const element_type f32 = element_type::f32;
shape arr(std::vector<std::int64_t> d, element_type t = element_type::f32) {
  return shape::array(t, std::move(d));
}
}  // namespace

TEST_CASE("element types are spelled as in HLO text and have XLA's byte sizes") {
  CHECK(to_string(element_type::bf16) == "bf16");
  CHECK(parse_element_type("pred") == element_type::pred);
  CHECK(parse_element_type("s8") == element_type::s8);
  CHECK(parse_element_type("u8") == element_type::u8);
  CHECK_FALSE(parse_element_type("u4").has_value());
  CHECK(byte_size(element_type::s8) == 1);
  CHECK(byte_size(element_type::pred) == 1);
  CHECK(byte_size(element_type::f16) == 2);
  CHECK(byte_size(element_type::s64) == 8);
}

TEST_CASE("a shape without a layout has XLA's default minor-to-major order") {
  shape s = arr({2, 3, 4});
  CHECK(s.layout() == std::vector<std::int64_t>{2, 1, 0});
  CHECK(s.has_default_layout());
  CHECK(s.element_count() == 24);
  CHECK(s.byte_count() == 96);
  shape t = s;
  t.minor_to_major = {1, 2, 0};
  CHECK_FALSE(t == s);
  CHECK(t.compatible(s));
  CHECK(shape::make_tuple({s, arr({}, element_type::s32)}).byte_count() == 100);
  CHECK_THROWS_AS(arr({2, -1}), ir_error);
}

TEST_CASE("literals round values to their element type and compare NaN equal to NaN") {
  CHECK(literal::scalar(element_type::bf16, 1.00390625).values[0] == 1.0);  // ties to even
  CHECK(literal::scalar(element_type::bf16, 1.01171875).values[0] == 1.015625);
  CHECK(literal::scalar(element_type::f16, 70000.0).values[0] == INFINITY);
  CHECK(literal::scalar(element_type::f16, 1.0 + 1.0 / 4096).values[0] == 1.0);
  CHECK(literal::scalar(element_type::f16, 3.0e-8).values[0] == std::ldexp(1.0, -24));
  CHECK(literal::scalar(element_type::f32, 0.1).values[0] == static_cast<double>(0.1f));
  CHECK(literal::scalar(f32, NAN) == literal::scalar(f32, NAN));
  CHECK_FALSE(literal::scalar(f32, 0.0) == literal::scalar(f32, -0.0));
  CHECK(literal::scalar_int(element_type::s64, (std::int64_t{1} << 62) + 1).ints[0] ==
        (std::int64_t{1} << 62) + 1);
  CHECK_THROWS_WITH_AS(literal::array(arr({2, 2}), {1, 2, 3}),
                       "literal: 3 values for shape f32[2,2]", ir_error);
}

TEST_CASE("escape_identifier maps any string onto names XLA's parser accepts, deterministically") {
  CHECK(escape_identifier("x") == "x");
  CHECK(escape_identifier("layers.0.wqkv") == "layers.0.wqkv");
  CHECK(escape_identifier("") == "_");
  CHECK(escape_identifier("1st") == "_1st");
  CHECK(escape_identifier("a b/c") == "a_b_c");
  CHECK(escape_identifier("__x") == "a__x");
  CHECK(escape_identifier("$x") == "a__x");
  CHECK(escape_identifier("f32") == "f32_");
  CHECK(escape_identifier("pred") == "pred_");
  CHECK(escape_identifier("f8e4m3fn") == "f8e4m3fn_");
  CHECK(is_valid_identifier("F32"));
  CHECK_FALSE(is_valid_identifier("token"));
  for (const char* s : {"", "1", "__", "a b", "f16", "-x", "\xc3\xa9t\xc3\xa9"})
    CHECK(is_valid_identifier(escape_identifier(s)));
}

TEST_CASE(
    "quote_string escapes quotes, backslashes and control bytes; to_valid_utf8 repairs bytes") {
  CHECK(quote_string("a\"b\\c\n\x01") == "\"a\\\"b\\\\c\\n\\001\"");
  CHECK(to_valid_utf8("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(to_valid_utf8("a\xc3") == "a\xEF\xBF\xBD");
  CHECK(is_valid_utf8("\xf0\x9f\x98\x80"));
  CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));  // a surrogate
}

TEST_CASE("builder names are escaped, made unique, and keep the original in op_name") {
  computation_builder b("my model");
  CHECK(b.name() == "my_model");
  auto x = b.add_parameter(arr({2}), "x");
  auto y = b.add_parameter(arr({2}), "x");
  auto z = b.add_parameter(arr({2}), "layers.0/w q");
  CHECK(b.get(x).name == "x");
  CHECK(b.get(y).name == "x.1");
  CHECK(b.get(y).op_name == "x");
  CHECK(b.get(z).name == "layers.0_w_q");
  CHECK(b.get(z).op_name == "layers.0/w q");
  CHECK(b.get(z).parameter_number == 2);
  CHECK(b.get(b.add_binary(opcode::add, x, y)).name == "add");
  CHECK(b.get(b.add_binary(opcode::add, x, y)).name == "add.1");
}

TEST_CASE("elementwise ops keep the operand shape; mismatches name the op and both shapes") {
  computation_builder b("c");
  auto x = b.add_parameter(arr({2, 3}), "x");
  auto y = b.add_parameter(arr({3, 2}), "y");
  CHECK(b.shape_of(b.add_unary(opcode::tanh, x)) == arr({2, 3}));
  CHECK_THROWS_WITH_AS(b.add_binary(opcode::multiply, x, y),
                       "multiply in computation c: operand shapes differ (f32[2,3] vs f32[3,2])",
                       ir_error);
  auto i = b.add_parameter(arr({2}, element_type::s32), "i");
  CHECK_THROWS_WITH_AS(b.add_unary(opcode::exponential, i),
                       "exponential in computation c: needs a floating-point operand, got s32",
                       ir_error);
  CHECK_THROWS_AS(b.add_unary(opcode::add, x), ir_error);
  CHECK_THROWS_AS(b.add_binary(opcode::add, x, 99), ir_error);
}

TEST_CASE("compare gives pred; select and clamp check their operands") {
  computation_builder b("c");
  auto x = b.add_parameter(arr({4}), "x");
  auto y = b.add_parameter(arr({4}), "y");
  auto p = b.add_compare(x, y, comparison_direction::lt);
  CHECK(b.shape_of(p) == arr({4}, element_type::pred));
  CHECK(b.get(p).direction == comparison_direction::lt);
  CHECK(b.shape_of(b.add_select(p, x, y)) == arr({4}));
  CHECK_THROWS_AS(b.add_select(x, x, y), ir_error);
  auto lo = b.add_constant(literal::scalar(f32, 0));
  CHECK(b.shape_of(b.add_clamp(lo, x, lo)) == arr({4}));
  CHECK(b.shape_of(b.add_binary(opcode::and_, p, p)) == arr({4}, element_type::pred));
  CHECK_THROWS_AS(b.add_binary(opcode::and_, x, y), ir_error);
}

TEST_CASE("dot puts batch dims first, then lhs free dims, then rhs free dims") {
  computation_builder b("c");
  auto q = b.add_parameter(arr({4, 16, 8}), "q");
  auto k = b.add_parameter(arr({4, 32, 8}), "k");
  auto s = b.add_dot(q, k, {{0}, {2}, {0}, {2}});
  CHECK(b.shape_of(s) == arr({4, 16, 32}));
  auto w = b.add_parameter(arr({8, 5}, element_type::bf16), "w");
  auto xb = b.add_parameter(arr({3, 8}, element_type::bf16), "xb");
  CHECK(b.shape_of(b.add_dot(xb, w, {{}, {1}, {}, {0}}, f32)) == arr({3, 5}));
  CHECK_THROWS_WITH_AS(
      b.add_dot(q, k, {{0}, {1}, {0}, {1}}),
      "dot in computation c: contracting dimensions differ (lhs f32[4,16,8], rhs f32[4,32,8])",
      ir_error);
  CHECK_THROWS_AS(b.add_dot(q, k, {{0}, {3}, {0}, {2}}), ir_error);
  CHECK_THROWS_AS(b.add_dot(q, w, {{}, {2}, {}, {0}}), ir_error);  // f32 x bf16
}

TEST_CASE(
    "broadcast, reduce, transpose, reshape, slice, concatenate, convert and iota infer XLA's "
    "shapes") {
  computation_builder b("c");
  auto x = b.add_parameter(arr({2, 3}), "x");
  CHECK(b.shape_of(b.add_broadcast(x, {2, 5, 3}, {0, 2})) == arr({2, 5, 3}));
  CHECK_THROWS_AS(b.add_broadcast(x, {3, 2}, {0, 1}), ir_error);
  CHECK_THROWS_AS(b.add_broadcast(x, {2, 3}, {1, 0}), ir_error);
  computation sum = make_scalar_computation("sum", opcode::add, f32);
  auto zero = b.add_constant(literal::scalar(f32, 0));
  auto r = b.add_reduce(x, zero, {1}, sum);
  CHECK(b.shape_of(r) == arr({2}));
  CHECK(b.get(r).called_computation == "sum");
  CHECK_THROWS_AS(b.add_reduce(x, zero, {2}, sum), ir_error);
  CHECK_THROWS_AS(
      b.add_reduce(x, zero, {0}, make_scalar_computation("s", opcode::add, element_type::f64)),
      ir_error);
  CHECK(b.shape_of(b.add_transpose(x, {1, 0})) == arr({3, 2}));
  CHECK_THROWS_AS(b.add_transpose(x, {0, 0}), ir_error);
  CHECK(b.shape_of(b.add_reshape(x, {6, 1})) == arr({6, 1}));
  CHECK_THROWS_WITH_AS(b.add_reshape(x, {5}),
                       "reshape in computation c: element counts differ (f32[2,3] to f32[5])",
                       ir_error);
  CHECK(b.shape_of(b.add_slice(x, {{0, 2, 1}, {0, 3, 2}})) == arr({2, 2}));
  CHECK_THROWS_AS(b.add_slice(x, {{0, 3, 1}, {0, 3, 1}}), ir_error);
  CHECK(b.shape_of(b.add_concatenate({x, x, x}, 1)) == arr({2, 9}));
  CHECK_THROWS_AS(b.add_concatenate({x, b.add_transpose(x, {1, 0})}, 1), ir_error);
  CHECK(b.shape_of(b.add_convert(x, element_type::bf16)) == arr({2, 3}, element_type::bf16));
  CHECK(b.shape_of(b.add_iota(arr({4, 4}, element_type::s32), 1)) ==
        arr({4, 4}, element_type::s32));
  CHECK_THROWS_AS(b.add_iota(arr({4}), 1), ir_error);
}

TEST_CASE("tuple, get-tuple-element, fusion and call take their shapes from operands and callees") {
  computation_builder f("fused");
  auto a = f.add_parameter(arr({4}), "a");
  f.add_unary(opcode::exponential, a);
  computation fused = f.build();

  computation_builder b("c");
  auto x = b.add_parameter(arr({4}), "x");
  auto i = b.add_parameter(arr({}, element_type::s32), "i");
  auto t = b.add_tuple({x, i});
  CHECK(b.shape_of(t) == shape::make_tuple({arr({4}), arr({}, element_type::s32)}));
  CHECK(b.shape_of(b.add_get_tuple_element(t, 1)) == arr({}, element_type::s32));
  CHECK_THROWS_AS(b.add_get_tuple_element(t, 2), ir_error);
  auto fu = b.add_fusion({x}, fused, fusion_kind::loop);
  CHECK(b.shape_of(fu) == arr({4}));
  CHECK(b.get(fu).called_computation == "fused");
  CHECK(b.shape_of(b.add_call({x}, fused)) == arr({4}));
  CHECK_THROWS_AS(b.add_call({i}, fused), ir_error);
  CHECK_THROWS_AS(b.add_call({x, x}, fused), ir_error);
}

TEST_CASE("a module keeps callees before callers and verify finds structural faults") {
  module m;
  m.name = "m";
  m.add_computation(make_scalar_computation("sum", opcode::add, f32));
  computation_builder b("main");
  b.add_parameter(arr({2}), "x");
  m.set_entry(b.build());
  CHECK_NOTHROW(verify(m));
  CHECK(m.entry_computation().name == "main");
  CHECK_THROWS_AS(m.add_computation(make_scalar_computation("sum", opcode::add, f32)), ir_error);
  CHECK_THROWS_AS(m.get("nope"), ir_error);

  module bad = m;
  bad.computations.back().instructions[0].name = "f32";
  CHECK_THROWS_AS(verify(bad), ir_error);
  bad = m;
  instruction use;
  use.name = "y";
  use.opcode = opcode::negate;
  use.shape = arr({2});
  use.operands = {5};
  bad.computations.back().instructions.push_back(use);
  CHECK_THROWS_WITH_AS(verify(bad), "computation main, y: operand 5 is not defined before use",
                       ir_error);
  bad = m;
  bad.computations.back().instructions[0].parameter_number = 1;
  CHECK_THROWS_AS(verify(bad), ir_error);
}

TEST_CASE("gather infers XLA's result shape from its dimension numbers") {
  computation_builder b("c");
  auto table = b.add_parameter(arr({10, 4}), "table");
  auto ids = b.add_parameter(arr({2, 3}, element_type::s32), "ids");
  // An embedding lookup: each id a one-entry index vector (index_vector_dim == rank).
  gather_dimension_numbers take{{2}, {0}, {0}, {}, {}, 2};
  CHECK(b.shape_of(b.add_gather(table, ids, take, {1, 4})) == arr({2, 3, 4}));
  // jax's spelling: ids reshaped to [5,1], the index vector along dim 1.
  auto ids51 = b.add_parameter(arr({5, 1}, element_type::s32), "ids51");
  CHECK(b.shape_of(b.add_gather(table, ids51, {{1}, {0}, {0}, {}, {}, 1}, {1, 4})) == arr({5, 4}));
  // XLA's canonical form: nothing collapsed, the slice dims after the batch dim.
  CHECK(b.shape_of(b.add_gather(table, ids51, {{1, 2}, {}, {0}, {}, {}, 1}, {1, 4})) ==
        arr({5, 1, 4}));
  // take_along_axis: operand dim 0 paired with indices dim 0.
  auto rows = b.add_parameter(arr({3, 10}), "rows");
  auto idx = b.add_parameter(arr({3, 2, 1}, element_type::s32), "idx");
  CHECK(b.shape_of(b.add_gather(rows, idx, {{}, {1}, {1}, {0}, {0}, 2}, {1, 1})) == arr({3, 2}));
  // Offset dims in front of the batch dims.
  CHECK(b.shape_of(b.add_gather(table, ids, {{0}, {0}, {0}, {}, {}, 2}, {1, 4})) == arr({4, 2, 3}));
}

TEST_CASE("inconsistent gather dimension numbers are errors naming the problem and the shapes") {
  computation_builder b("c");
  auto table = b.add_parameter(arr({10, 4}), "table");
  auto ids = b.add_parameter(arr({2, 3}, element_type::s32), "ids");
  auto fids = b.add_parameter(arr({2, 3}), "fids");
  const gather_dimension_numbers take{{2}, {0}, {0}, {}, {}, 2};
  CHECK_THROWS_WITH_AS(b.add_gather(table, fids, take, {1, 4}),
                       "gather in computation c: indices must be integers (operand f32[10,4], "
                       "indices f32[2,3])",
                       ir_error);
  CHECK_THROWS_WITH_AS(b.add_gather(table, ids, take, {2, 4}),
                       doctest::Contains("collapsed and batching dimensions need slice size 1"),
                       ir_error);
  // size 0: every output element would read an empty slice (found by the TPU fuzz test)
  CHECK_THROWS_WITH_AS(b.add_gather(table, ids, take, {0, 4}),
                       doctest::Contains("need slice size 1 (dim 0 has 0)"), ir_error);
  CHECK_THROWS_WITH_AS(b.add_gather(table, ids, take, {1, 5}),
                       doctest::Contains("slice size 5 out of range for dim 1"), ir_error);
  CHECK_THROWS_WITH_AS(b.add_gather(table, ids, {{2}, {0}, {0, 1}, {}, {}, 2}, {1, 4}),
                       doctest::Contains("start_index_map has 2 entries, the index vectors 1"),
                       ir_error);
  CHECK_THROWS_WITH_AS(b.add_gather(table, ids, {{2}, {0}, {0}, {}, {}, 3}, {1, 4}),
                       doctest::Contains("index_vector_dim 3 out of range"), ir_error);
  CHECK_THROWS_WITH_AS(b.add_gather(table, ids, {{1, 2}, {0}, {0}, {}, {}, 2}, {1, 4}),
                       doctest::Contains("offset_dims has 2 dims, the slice 1"), ir_error);
  CHECK_THROWS_WITH_AS(b.add_gather(table, ids, {{2}, {0}, {0}, {1}, {0}, 2}, {1, 1}),
                       doctest::Contains("differs in size between operand and indices"), ir_error);
  CHECK_THROWS_AS(b.add_gather(table, ids, {{3}, {0}, {0}, {}, {}, 2}, {1, 4}), ir_error);
  CHECK_THROWS_AS(b.add_gather(table, ids, {{2}, {1, 0}, {0}, {}, {}, 2}, {1, 1}), ir_error);
}

TEST_CASE("dynamic-slice and dynamic-update-slice take one integer scalar start per dimension") {
  computation_builder b("c");
  auto x = b.add_parameter(arr({4, 10}), "x");
  auto u = b.add_parameter(arr({4, 3}), "u");
  auto s = b.add_parameter(arr({}, element_type::s32), "s");
  auto z = b.add_constant(literal::scalar_int(element_type::s32, 0));
  auto l = b.add_constant(literal::scalar_int(element_type::s64, 0));
  auto ds = b.add_dynamic_slice(x, {z, s}, {4, 3});
  CHECK(b.shape_of(ds) == arr({4, 3}));
  CHECK(b.get(ds).dynamic_slice_sizes == std::vector<std::int64_t>{4, 3});
  CHECK(b.get(ds).operands.size() == 3);
  CHECK(b.shape_of(b.add_dynamic_update_slice(x, u, {s, z})) == arr({4, 10}));
  CHECK_THROWS_WITH_AS(b.add_dynamic_slice(x, {s}, {4, 3}),
                       "dynamic-slice in computation c: needs one start index per dimension of "
                       "f32[4,10], got 1",
                       ir_error);
  CHECK_THROWS_WITH_AS(b.add_dynamic_slice(x, {z, s}, {4, 11}),
                       doctest::Contains("size 11 out of range for dim 1"), ir_error);
  CHECK_THROWS_WITH_AS(b.add_dynamic_slice(x, {z, l}, {4, 3}),
                       doctest::Contains("not an integer scalar of the first start's type"),
                       ir_error);
  CHECK_THROWS_AS(b.add_dynamic_slice(x, {z, u}, {4, 3}), ir_error);
  CHECK_THROWS_WITH_AS(b.add_dynamic_update_slice(u, x, {s, z}),
                       "dynamic-update-slice in computation c: update f32[4,10] does not fit "
                       "f32[4,3]",
                       ir_error);
  CHECK_THROWS_AS(b.add_dynamic_update_slice(x, b.add_convert(u, element_type::bf16), {s, z}),
                  ir_error);
}

TEST_CASE("a variadic reduce returns a tuple and checks its computation's signature") {
  computation_builder c("argmax");
  auto a = c.add_parameter(arr({}), "a");
  auto ia = c.add_parameter(arr({}, element_type::s32), "ia");
  auto v = c.add_parameter(arr({}), "b");
  auto iv = c.add_parameter(arr({}, element_type::s32), "ib");
  auto gt = c.add_compare(a, v, comparison_direction::gt);
  c.add_tuple({c.add_select(gt, a, v), c.add_select(gt, ia, iv)});
  const computation argmax = c.build();

  computation_builder b("main");
  auto x = b.add_parameter(arr({4, 10}), "x");
  auto io = b.add_iota(arr({4, 10}, element_type::s32), 1);
  auto ninf = b.add_constant(literal::scalar(f32, -INFINITY));
  auto zero = b.add_constant(literal::scalar_int(element_type::s32, 0));
  auto r = b.add_reduce({x, io}, {ninf, zero}, {1}, argmax);
  CHECK(b.shape_of(r) == shape::make_tuple({arr({4}), arr({4}, element_type::s32)}));
  CHECK(b.get(r).operands == std::vector<instruction_id>{x, io, ninf, zero});
  CHECK(b.shape_of(b.add_get_tuple_element(r, 1)) == arr({4}, element_type::s32));
  CHECK_THROWS_WITH_AS(b.add_reduce({x, io}, {ninf}, {1}, argmax),
                       doctest::Contains("needs as many init values as inputs"), ir_error);
  CHECK_THROWS_WITH_AS(b.add_reduce({x, io}, {zero, ninf}, {1}, argmax),
                       doctest::Contains("init value s32[] must be a f32 scalar"), ir_error);
  CHECK_THROWS_WITH_AS(b.add_reduce({x, x}, {ninf, ninf}, {1}, argmax),
                       "reduce in computation main: to_apply argmax must be (f32[], f32[], f32[], "
                       "f32[]) -> (f32[], f32[])",
                       ir_error);
  CHECK_THROWS_AS(b.add_reduce({x, b.add_parameter(arr({4, 9}, element_type::s32), "j")},
                               {ninf, zero}, {1}, argmax),
                  ir_error);
}

TEST_CASE("input_output_alias entries must name an entry parameter and an output of its shape") {
  module m;
  m.name = "m";
  computation_builder b("main");
  auto c = b.add_parameter(arr({4}), "cache");
  auto i = b.add_parameter(arr({2}), "i");
  m.set_entry(b.build(b.add_tuple({b.add_unary(opcode::negate, c), i})));
  m.input_output_alias = {{{0}, 0, {}, false}};
  CHECK_NOTHROW(verify(m));
  m.input_output_alias = {{{1}, 0, {}, false}};
  CHECK_THROWS_WITH_AS(verify(m),
                       "module m: input_output_alias {1}: parameter 0{} does not have the "
                       "output's shape",
                       ir_error);
  m.input_output_alias = {{{2}, 0, {}, false}};
  CHECK_THROWS_WITH_AS(verify(m), doctest::Contains("no array output at that index"), ir_error);
  m.input_output_alias = {{{0}, 3, {}, false}};
  CHECK_THROWS_WITH_AS(verify(m), doctest::Contains("no entry parameter 3"), ir_error);
  m.input_output_alias = {{{0}, 0, {}, false}, {{0}, 0, {}, true}};
  CHECK_THROWS_WITH_AS(verify(m), doctest::Contains("the output is aliased twice"), ir_error);
}
