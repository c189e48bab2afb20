// The HLO text parser: our printer's output, jax's output, syntax it ignores, and its errors.
// Golden lines over 100 columns go on in the next raw string literal (a line ends in )",
// the next starts with R"(): adjacent literals concatenate into one line.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "sample_modules.hpp"
#include "../common/test_paths.hpp"

using namespace fusedsl::hlo;

namespace {

std::string read_data(const std::string& name) {
  std::ifstream f(fusedsl::test::test_path(FUSEDSL_HLO_TEST_DATA) + "/" + name);
  REQUIRE_MESSAGE(f.good(), "missing test data " << name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The error a parse raises, as "line:column: message".
std::string parse_failure(const std::string& text) {
  try {
    parse_module(text);
  } catch (const parse_error& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string header = "HloModule m\n\nENTRY %main {\n";

}  // namespace

TEST_CASE("parse(print(m)) == m for the sample modules") {
  for (const module& m : {testing::softmax_module(), testing::attention_scores_module(),
                          testing::misc_module(), testing::indexing_module()}) {
    CAPTURE(m.name);
    module back = parse_module(to_text(m));
    CHECK(back == m);
    CHECK(to_text(back) == to_text(m));
  }
}

TEST_CASE("jax-emitted transformer block HLO parses: names without %, calls, layouts, comments") {
  module m = parse_module(read_data("jax_transformer_block.hlo"));
  CHECK(m.name == "jit_transformer_block");
  CHECK(m.entry == "main.9");
  const computation& e = m.entry_computation();
  CHECK(e.parameters().size() == 11);
  CHECK(e.instructions[e.parameters()[1]].name == "wqkv.1");
  CHECK(e.root_instruction().shape == shape::array(element_type::f32, {16, 32}));
  int dots = 0, batched = 0, calls = 0;
  for (const instruction& in : e.instructions) {
    dots += in.opcode == opcode::dot;
    batched += in.opcode == opcode::dot && !in.dot->lhs_batch.empty();
    calls += in.opcode == opcode::call;
  }
  CHECK(dots == 6);
  CHECK(batched == 2);
  CHECK(calls == 2);
  // transpose results carry a non-default layout in jax's text; it is kept.
  auto t = e.find("transpose.4");
  REQUIRE(t);
  CHECK(e.instructions[*t].shape.minor_to_major == std::vector<std::int64_t>{2, 0, 1});
  CHECK(parse_module(to_text(m)) == m);
}

TEST_CASE("jax-emitted bf16 MLP and tuple-returning softmax parse and round-trip") {
  for (const char* f : {"jax_mlp_bf16.hlo", "jax_softmax_tuple.hlo"}) {
    CAPTURE(f);
    module m = parse_module(read_data(f));
    CHECK(parse_module(to_text(m)) == m);
  }
  module t = parse_module(read_data("jax_softmax_tuple.hlo"));
  CHECK(t.entry_computation().root_instruction().shape.is_tuple());
  module b = parse_module(read_data("jax_mlp_bf16.hlo"));
  bool bf16_dot_to_f32 = false;
  for (const instruction& in : b.entry_computation().instructions)
    if (in.opcode == opcode::dot)
      bf16_dot_to_f32 |=
          in.shape.type == element_type::f32 &&
          b.entry_computation().instructions[in.operands[0]].shape.type == element_type::bf16;
  CHECK(bf16_dot_to_f32);
}

TEST_CASE("attributes and syntax the IR does not model are accepted and ignored") {
  const std::string text =
      R"(HloModule jit_f, is_scheduled=true, )"
R"(entry_computation_layout={(f32[2,2]{1,0})->f32[2,2]{1,0}}

add.1 (a: f32[], b: f32[]) -> f32[] {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

// a line comment
ENTRY main.2 (x: f32[2,2]) -> f32[2,2] {
  x = f32[2,2]{1,0:T(8,128)S(1)} parameter(0), frontend_attributes={_xla_x="1"}, )"
R"(metadata={op_name="jit(f)/x" source_file="f.py" source_line=3}
  d = f32[2,2]{1,0} dot(x, /*index=1*/x), lhs_contracting_dims={1}, rhs_contracting_dims={0}, )"
R"(operand_precision={highest,highest}, backend_config={"k":[1,2]}
  z = f32[] constant(0)
  r = f32[2]{0} reduce(d, z), dimensions={1}, to_apply=add.1
  c = pred[2,2]{1,0} compare(x, x), direction=LT, type=TOTALORDER
  ROOT y = f32[2,2]{1,0} broadcast(r), dimensions={0}, sharding={devices=[2,1]<=[2] )"
R"(metadata={op_name="s"}}
}
)";
  module m = parse_module(text);
  const computation& e = m.entry_computation();
  CHECK(e.instructions[0].op_name == "jit(f)/x");
  CHECK(e.instructions[0].shape.has_default_layout());
  CHECK(e.instructions[1].dot->lhs_contracting == std::vector<std::int64_t>{1});
  CHECK(e.instructions[3].called_computation == "add.1");
  CHECK(e.root_instruction().sharding == sharding::tiled({2, 1}));
  CHECK(m.computations[0].name == "add.1");
}

TEST_CASE("a module without ENTRY uses its last computation as the entry") {
  module m = parse_module("HloModule m\nc {\n  ROOT p = f32[] parameter(0)\n}\n");
  CHECK(m.entry == "c");
}

TEST_CASE("parse_shape reads array and tuple shapes") {
  CHECK(parse_shape("f32[2,3]{1,0}") == shape::array(element_type::f32, {2, 3}));
  CHECK(parse_shape("f32[2,3]{0,1}").minor_to_major == std::vector<std::int64_t>{0, 1});
  CHECK(parse_shape("(s32[], (pred[4]))").elements[1].elements[0] ==
        shape::array(element_type::pred, {4}));
  CHECK(parse_shape("bf16[8]") == shape::array(element_type::bf16, {8}));
  CHECK(parse_shape("u8[2]") == shape::array(element_type::u8, {2}));
  CHECK(parse_shape("s8[3,4]") == shape::array(element_type::s8, {3, 4}));
  CHECK_THROWS_WITH_AS(
      parse_shape("u16[2]"),
      "1:1: unsupported element type 'u16' (supported: pred, s8, u8, s32, s64, f16, bf16, f32, "
      "f64)",
      parse_error);
  CHECK_THROWS_WITH_AS(parse_shape("f32[2,3]{1,1}"),
                       "1:13: layout is not a permutation of the dimensions", parse_error);
  CHECK_THROWS_WITH_AS(parse_shape("f32[2]{0} x"), "1:11: unexpected 'x' after the shape",
                       parse_error);
}

TEST_CASE("an unsupported opcode is named with its line and column") {
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0)\n  ROOT y = f32[2]{0} while(x), "
                               "condition=c, body=b\n}\n") == "5:22: unsupported opcode 'while'");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0)\n  ROOT y = f32[2]{0} custom-call(x), "
                               "custom_call_target=\"foo\"\n}\n") ==
        "5:22: unsupported opcode 'custom-call' (custom_call_target=\"foo\"; only the identity "
        "targets Sharding and "
        "xla.sdy.FuncResultSharding are read)");
}

TEST_CASE("jax's sharding custom-calls are read as copies that keep the sharding") {
  module m = parse_module(read_data("jax_sharded_mlp.hlo"));
  const computation& e = m.entry_computation();
  auto c = e.find("sharding_constraint.1");
  REQUIRE(c);
  CHECK(e.instructions[*c].opcode == opcode::copy);
  CHECK(e.instructions[*c].sharding == sharding::tiled({1, 8}));
  CHECK(e.instructions[*e.find("w.1")].sharding == sharding::tiled({1, 8}));
  CHECK(parse_module(to_text(m)) == m);
}

TEST_CASE("parse errors carry line:column and what was expected") {
  CHECK(parse_failure("HloMod m") == "1:1: expected 'HloModule', got 'HloMod'");
  CHECK(parse_failure(header + "  x f32[2] parameter(0)\n}\n") ==
        "4:5: expected '=' after the instruction name, got 'f32'");
  CHECK(parse_failure(header + "  ROOT y = f32[2]{0} negate(x)\n}\n") ==
        "4:29: operand %x is not defined before this instruction");
  CHECK(
      parse_failure(header + "  x = f32[2]{0} parameter(0)\n  ROOT y = f32[3]{0} negate(x)\n}\n") ==
      "5:8: negate in computation main: result shape f32[3] should be f32[2]");
  CHECK(parse_failure(header +
                      "  x = f32[2]{0} parameter(0)\n  ROOT y = f32[2]{0} negate(s32[2] x)\n}\n") ==
        "5:36: operand %x is declared s32[2] but is f32[2]");
  CHECK(parse_failure(header + "  ROOT c = f32[3]{0} constant({1, 2})\n}\n") ==
        "4:31: constant has 2 elements in dimension 0, shape says 3");
  CHECK(parse_failure(header + "  ROOT c = f32[3]{0} constant({...})\n}\n") ==
        "4:31: constant values are elided ('{...}'); print the module with large constants");
  CHECK(parse_failure(header + "  ROOT c = f32[] constant(abc)\n}\n") ==
        "4:27: expected a number, got 'abc'");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0), metadata={op_name=\"oops)\n}\n") ==
        "4:49: unterminated string");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0)\n") ==
        "5:1: expected an instruction name, got end of input");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0)\n  ROOT r = f32[] reduce(x, x), "
                               "dimensions={0}, to_apply=nope\n}\n") ==
        "5:8: module m: no computation named 'nope'");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0)\n  x = f32[2]{0} parameter(1)\n}\n") ==
        "5:3: duplicate instruction name x");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(1)\n}\n") ==
        "3:7: computation main: parameter numbers are not 0..0");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0), sharding={devices=[2,2]0,1}\n}\n") ==
        "4:41: sharding lists a different number of devices than its 4 tiles");
  CHECK(parse_failure(header + "  ROOT x = f32[2]{0} parameter(0) /* never closed\n") ==
        "4:35: unterminated /* comment");
}

TEST_CASE(
    "an attribute of another opcode is refused, not dropped (found by fuzzing: index= on a "
    "parameter printed without it)") {
  CHECK(parse_failure(header + "  ROOT x = f32[2]{0} parameter(0), index=3\n}\n") ==
        "4:22: attribute index= does not apply to parameter");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0)\n  ROOT y = f32[2]{0} negate(x), "
                               "dimensions={0}\n}\n") ==
        "5:22: attribute dimensions= does not apply to negate");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(0)\n  ROOT y = f32[2]{0} abs(x), "
                               "lhs_contracting_dims={0}\n}\n") ==
        "5:22: attribute lhs/rhs_*_dims= does not apply to abs");
  // A dot whose dimension lists are all given empty is a dot without dimension numbers.
  const module m = parse_module(header +
                                "  a = f32[2]{0} parameter(0)\n  b = f32[3]{0} parameter(1)\n"
                                "  ROOT d = f32[2,3]{1,0} dot(a, b), lhs_batch_dims={}, "
                                "rhs_batch_dims={}\n}\n");
  CHECK_FALSE(m.entry_computation().root_instruction().dot.has_value());
  CHECK(parse_module(to_text(m)) == m);
}

TEST_CASE("special float values and escaped strings read back exactly") {
  module m = parse_module(header +
                          "  ROOT c = f32[5]{0} constant({inf, -inf, nan, -0, 1e-45}), "
                          "metadata={op_name=\"a\\\"b\\\\c\\001\\x41\"}\n}\n");
  const instruction& c = m.entry_computation().root_instruction();
  CHECK(std::isinf(c.literal->values[0]));
  CHECK(c.literal->values[1] < 0);
  CHECK(std::isnan(c.literal->values[2]));
  CHECK(std::signbit(c.literal->values[3]));
  CHECK(c.literal->values[4] == static_cast<double>(1e-45f));
  CHECK(c.op_name == std::string("a\"b\\c\001A"));
}

TEST_CASE("sizes that would overflow, and nesting that would exhaust the stack, are parse errors") {
  CHECK_THROWS_WITH_AS(parse_shape("f32[99999999999,99999999999]"),
                       "1:28: shape: more than 2^48 elements", parse_error);
  std::string deep(100, '(');
  CHECK_THROWS_WITH_AS(parse_shape(deep + "f32[]"), "1:66: tuple shapes nested deeper than 64",
                       parse_error);
  CHECK_THROWS_AS(parse_shape("f32[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                              "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]"),
                  parse_error);
  CHECK(parse_failure(
            header +
            "  x = f32[2]{0} parameter(0), sharding={devices=[65536,65536]<=[65536,65536]}\n}\n") ==
        "4:41: sharding: device counts must be positive and below 2^31");
  CHECK(parse_failure(header + "  x = f32[2]{0} parameter(99999999999)\n}\n") ==
        "3:7: computation main: parameter numbers are not 0..0");
}

TEST_CASE("constants beyond a type's range read as infinity, as IEEE rounding gives") {
  module m =
      parse_module(header + "  ROOT c = f32[3]{0} constant({1e39, -1e300, 3.4028235e38})\n}\n");
  const auto& v = m.entry_computation().root_instruction().literal->values;
  CHECK(v[0] == INFINITY);
  CHECK(v[1] == -INFINITY);
  CHECK(v[2] == static_cast<double>(std::numeric_limits<float>::max()));
  CHECK(literal::scalar(element_type::bf16, 1e39).values[0] == INFINITY);
  CHECK_THROWS_AS(literal::array(shape::array(element_type::s64, {1}), {1e300}), ir_error);
}

TEST_CASE("s8 and u8: parameters, constants, converts and an s32 dot round-trip; range checked") {
  const std::string text = header +
                           "  a = s8[2,3]{1,0} parameter(0)\n"
                           "  b = s8[3,2]{1,0} constant({ { -128, 0 }, { 127, 5 }, { 1, -1 } })\n"
                           "  d = s32[2,2]{1,0} dot(a, b), lhs_contracting_dims={1}, "
                           "rhs_contracting_dims={0}\n"
                           "  u = u8[2]{0} constant({0, 255})\n"
                           "  ROOT f = f32[2,2]{1,0} convert(d)\n}\n";
  const module m = parse_module(text);
  const computation& c = m.entry_computation();
  CHECK(c.instructions[0].shape == shape::array(element_type::s8, {2, 3}));
  CHECK(c.instructions[1].literal->ints == std::vector<std::int64_t>{-128, 0, 127, 5, 1, -1});
  CHECK(c.instructions[3].literal->ints == std::vector<std::int64_t>{0, 255});
  CHECK(parse_module(to_text(m)) == m);
  CHECK(shape::array(element_type::s8, {4}).byte_count() == 4);
  CHECK(round_to(element_type::s8, 300.7) == 127.0);
  CHECK(round_to(element_type::s8, -3.9) == -3.0);
  CHECK(round_to(element_type::u8, -1.0) == 0.0);
  CHECK(round_to(element_type::u8, NAN) == 0.0);
  CHECK_THROWS_WITH_AS(literal::array_int(shape::array(element_type::s8, {1}), {128}),
                       "literal: 128 is not an s8 value", ir_error);
  CHECK_THROWS_WITH_AS(literal::array(shape::array(element_type::u8, {1}), {-1.0}),
                       "literal: -1 is not a u8 value", ir_error);
}

TEST_CASE("jax's embedding lookups (jnp.take, indexing) parse as gathers and round-trip") {
  module m = parse_module(read_data("jax_embedding_take.hlo"));
  CHECK(parse_module(to_text(m)) == m);
  CHECK(to_text(parse_module(to_text(m))) == to_text(m));
  const instruction* take = nullptr;
  for (const computation& c : m.computations)
    for (const instruction& in : c.instructions)
      if (in.opcode == opcode::gather && c.name == "_take.1") take = &in;
  REQUIRE(take);
  CHECK(take->shape == shape::array(element_type::f32, {2, 8, 32}));
  const gather_dimension_numbers want{{2}, {0}, {0}, {}, {}, 2};
  CHECK(take->gather == want);
  CHECK(take->slice_sizes == std::vector<std::int64_t>{1, 32});
  CHECK_FALSE(take->indices_are_sorted);
}

TEST_CASE("a decode step's dynamic-update-slice, dynamic-slice and donated cache parse") {
  module m = parse_module(read_data("jax_decode_cache.hlo"));
  CHECK(parse_module(to_text(m)) == m);
  REQUIRE(m.input_output_alias.size() == 1);
  CHECK(m.input_output_alias[0] == io_alias{{0}, 0, {}, false});
  const computation& e = m.entry_computation();
  const instruction& dus = e.instructions[*e.find("dynamic_update_slice.1")];
  CHECK(dus.opcode == opcode::dynamic_update_slice);
  CHECK(dus.operands.size() == 4);
  const instruction& ds = e.instructions[*e.find("dynamic_slice.1")];
  CHECK(ds.opcode == opcode::dynamic_slice);
  CHECK(ds.dynamic_slice_sizes == std::vector<std::int64_t>{4, 32});
  CHECK(to_text(m).rfind("HloModule jit_decode_cache, input_output_alias={ {0}: (0, {}, "
                         "may-alias) }\n",
                         0) == 0);
}

TEST_CASE("jax's argmax parses as a variadic reduce over (value, iota) with a tuple result") {
  module m = parse_module(read_data("jax_argmax.hlo"));
  CHECK(parse_module(to_text(m)) == m);
  int variadic = 0;
  for (const computation& c : m.computations)
    for (const instruction& in : c.instructions)
      if (in.opcode == opcode::reduce && in.operands.size() == 4) {
        ++variadic;
        CHECK(in.shape.is_tuple());
        CHECK(in.shape.elements.at(1).type == element_type::s32);
        CHECK(m.get(in.called_computation).root_instruction().opcode == opcode::tuple);
      }
  CHECK(variadic == 2);
}

TEST_CASE("gather and dynamic-slice attributes read back exactly and are refused elsewhere") {
  const std::string ops =
      "  t = f32[10,4]{1,0} parameter(0)\n  i = s32[5,1]{1,0} parameter(1)\n"
      "  s = s32[] parameter(2)\n";
  module m = parse_module(
      header + ops +
      "  g = f32[5,4]{1,0} gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
      "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, indices_are_sorted=true\n"
      "  ROOT d = f32[2,4]{1,0} dynamic-slice(g, s, s), dynamic_slice_sizes={2,4}\n}\n");
  const instruction& g = m.entry_computation().instructions[3];
  CHECK(g.indices_are_sorted);
  CHECK(to_text(m.entry_computation(), g) ==
        "%g = f32[5,4]{1,0} gather(f32[10,4]{1,0} %t, s32[5,1]{1,0} %i), offset_dims={1}, "
        "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, "
        "indices_are_sorted=true");
  CHECK(parse_module(to_text(m)) == m);
  CHECK(
      parse_failure(header + ops + "  ROOT n = f32[10,4]{1,0} negate(t), slice_sizes={1,4}\n}\n") ==
      "7:27: attribute slice_sizes= does not apply to negate");
  CHECK(parse_failure(header + ops +
                      "  ROOT d = f32[2,4]{1,0} dynamic-slice(t, s, s), slice_sizes={2,4}\n}\n") ==
        "7:26: attribute slice_sizes= does not apply to dynamic-slice");
  CHECK(parse_failure(header + ops +
                      "  ROOT g = f32[5,4]{1,0} gather(t, i), offset_dims={1}, "
                      "collapsed_slice_dims={0}, start_index_map={0}, slice_sizes={1,4}\n}\n") ==
        "7:26: gather needs index_vector_dim=");
  CHECK(parse_failure(header + ops + "  ROOT g = f32[5,4]{1,0} gather(t, i)\n}\n") ==
        "7:8: gather in computation main: needs offset_dims=, collapsed_slice_dims=, "
        "start_index_map=, index_vector_dim= and slice_sizes=");
  CHECK(parse_failure(
            header + ops +
            "  ROOT d = f32[2,4]{1,0} dynamic-slice(t, s), dynamic_slice_sizes={2,4}\n}\n") ==
        "7:8: dynamic-slice in computation main: needs one start index per dimension of "
        "f32[10,4], got 1");
  CHECK(parse_failure(
            header + ops +
            "  ROOT g = f32[5,4]{1,0} gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
            "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, "
            "indices_are_sorted=maybe\n}\n") == "7:162: expected true or false, got 'maybe'");
}

TEST_CASE("input_output_alias is read, checked against the entry, and printed as XLA prints it") {
  const std::string body =
      "\n\nENTRY %main {\n  c = f32[4]{0} parameter(0)\n  d = f32[2]{0} parameter(1)\n"
      "  n = f32[4]{0} negate(c)\n  ROOT t = (f32[4]{0}, f32[2]{0}) tuple(n, d)\n}\n";
  module m = parse_module(
      "HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, "
      "{}, must-alias) }, entry_computation_layout={(f32[4])->f32[4]}" +
      body);
  REQUIRE(m.input_output_alias.size() == 2);
  CHECK(m.input_output_alias[1] == io_alias{{1}, 1, {}, true});
  CHECK(parse_module(to_text(m)) == m);
  CHECK(parse_failure("HloModule m, input_output_alias={ {0}: (1, {}, may-alias) }" + body) ==
        "1:14: module m: input_output_alias {0}: parameter 1{} does not have the output's shape");
  CHECK(parse_failure("HloModule m, input_output_alias={ {1}: (1, {}), {0}: (0, {}) }" + body) ==
        "1:49: input_output_alias entries must be sorted by output index, each once");
  CHECK(parse_failure("HloModule m, input_output_alias={ {0}: (0, {}, maybe-alias) }" + body) ==
        "1:48: expected may-alias or must-alias, got 'maybe-alias'");
}
