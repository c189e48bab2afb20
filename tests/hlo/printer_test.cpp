// The HLO text printer: golden text for small modules (XLA's syntax; these exact texts are
// accepted by jaxlib 0.10.2's HLO parser and compile on XLA:CPU, see tests/interop), stability.
// Golden lines over 100 columns go on in the next raw string literal (a line ends in )hlo",
// the next starts with R"hlo(): adjacent literals concatenate into one line.
#include <doctest/doctest.h>

#include <string>

#include "fusedsl/hlo/printer.hpp"
#include "sample_modules.hpp"

using namespace fusedsl::hlo;

namespace {
const char* const golden_softmax = R"hlo(HloModule softmax

%max {
  %lhs = f32[] parameter(0)
  %rhs = f32[] parameter(1)
  ROOT %maximum = f32[] maximum(f32[] %lhs, f32[] %rhs)
}

%sum {
  %lhs = f32[] parameter(0)
  %rhs = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %lhs, f32[] %rhs)
}

ENTRY %main {
  %x = f32[2,4]{1,0} parameter(0)
  %constant = f32[] constant(-inf)
  %reduce = f32[2]{0} reduce(f32[2,4]{1,0} %x, f32[] %constant), dimensions={1}, to_apply=%max
  %broadcast = f32[2,4]{1,0} broadcast(f32[2]{0} %reduce), dimensions={0}
  %subtract = f32[2,4]{1,0} subtract(f32[2,4]{1,0} %x, f32[2,4]{1,0} %broadcast)
  %exponential = f32[2,4]{1,0} exponential(f32[2,4]{1,0} %subtract)
  %constant.1 = f32[] constant(0)
  %reduce.1 = f32[2]{0} reduce(f32[2,4]{1,0} %exponential, f32[] %constant.1), dimensions={1}, )hlo"
R"hlo(to_apply=%sum
  %broadcast.1 = f32[2,4]{1,0} broadcast(f32[2]{0} %reduce.1), dimensions={0}
  ROOT %divide = f32[2,4]{1,0} divide(f32[2,4]{1,0} %exponential, f32[2,4]{1,0} %broadcast.1)
}
)hlo";

const char* const golden_attention_scores = R"hlo(HloModule attention_scores

ENTRY %main {
  %q = f32[2,3,4]{2,1,0} parameter(0), sharding={devices=[2,1,1]<=[2]}
  %k = f32[2,3,4]{2,1,0} parameter(1), sharding={devices=[2,1,1]1,0}
  %dot = f32[2,3,3]{2,1,0} dot(f32[2,3,4]{2,1,0} %q, f32[2,3,4]{2,1,0} %k), )hlo"
R"hlo(lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  %constant = f32[] constant(0.5)
  %broadcast = f32[2,3,3]{2,1,0} broadcast(f32[] %constant), dimensions={}
  %multiply = f32[2,3,3]{2,1,0} multiply(f32[2,3,3]{2,1,0} %dot, f32[2,3,3]{2,1,0} %broadcast)
  %iota = s32[3,3]{1,0} iota(), iota_dimension=0
  %iota.1 = s32[3,3]{1,0} iota(), iota_dimension=1
  %compare = pred[3,3]{1,0} compare(s32[3,3]{1,0} %iota, s32[3,3]{1,0} %iota.1), direction=GE
  %broadcast.1 = pred[2,3,3]{2,1,0} broadcast(pred[3,3]{1,0} %compare), dimensions={1,2}
  %constant.1 = f32[] constant(-inf)
  %broadcast.2 = f32[2,3,3]{2,1,0} broadcast(f32[] %constant.1), dimensions={}
  %select = f32[2,3,3]{2,1,0} select(pred[2,3,3]{2,1,0} %broadcast.1, f32[2,3,3]{2,1,0} )hlo"
R"hlo(%multiply, f32[2,3,3]{2,1,0} %broadcast.2), sharding={replicated}
  ROOT %tuple = (f32[2,3,3]{2,1,0}, f32[2,3,3]{2,1,0}) tuple(f32[2,3,3]{2,1,0} %select, )hlo"
R"hlo(f32[2,3,3]{2,1,0} %dot), sharding={{replicated}, {maximal device=0}}
}
)hlo";

const char* const golden_misc = R"hlo(HloModule misc

%fused_exp_y {
  %a = f32[2,3]{1,0} parameter(0)
  %b = f32[2,3]{1,0} parameter(1)
  %exponential = f32[2,3]{1,0} exponential(f32[2,3]{1,0} %a)
  ROOT %multiply = f32[2,3]{1,0} multiply(f32[2,3]{1,0} %exponential, f32[2,3]{1,0} %b)
}

%negate_all {
  %v = f32[3,2]{1,0} parameter(0)
  ROOT %negate = f32[3,2]{1,0} negate(f32[3,2]{1,0} %v)
}

ENTRY %main {
  %input__x__0 = f32[2,3]{1,0} parameter(0), metadata={op_name="input \"x\"/0"}
  %constant = f32[2,3]{1,0} constant({ {1, -2.5, 1e-07}, {inf, -inf, nan} })
  %constant.1 = pred[2]{0} constant({true, false})
  %constant.2 = s64[2]{0} constant({-1099511627776, 7})
  %constant.3 = f16[] constant(0.099975586)
  %constant.4 = bf16[] constant(3.140625)
  %f32_ = f32[2,3]{1,0} fusion(f32[2,3]{1,0} %input__x__0, f32[2,3]{1,0} %constant), )hlo"
R"hlo(kind=kLoop, calls=%fused_exp_y
  %slice = f32[2,2]{1,0} slice(f32[2,3]{1,0} %f32_), slice={[0:2], [0:3:2]}
  %concatenate = f32[2,4]{1,0} concatenate(f32[2,2]{1,0} %slice, f32[2,2]{1,0} %slice), )hlo"
R"hlo(dimensions={1}
  %convert = bf16[2,4]{1,0} convert(f32[2,4]{1,0} %concatenate)
  %convert.1 = f32[2,4]{1,0} convert(bf16[2,4]{1,0} %convert)
  %transpose = f32[3,2]{1,0} transpose(f32[2,3]{1,0} %f32_), dimensions={1,0}
  %call = f32[3,2]{1,0} call(f32[3,2]{1,0} %transpose), to_apply=%negate_all
  %reshape = f32[6]{0} reshape(f32[3,2]{1,0} %call), metadata={op_name="model/flatten"}
  %tuple = (f32[2,4]{1,0}, f32[6]{0}) tuple(f32[2,4]{1,0} %convert.1, f32[6]{0} %reshape)
  ROOT %get-tuple-element = f32[6]{0} get-tuple-element((f32[2,4]{1,0}, f32[6]{0}) %tuple), index=1
}
)hlo";

const char* const golden_indexing =
    R"hlo(HloModule indexing, input_output_alias={ {0}: (2, {}, may-alias) }

%argmax {
  %a = f32[] parameter(0)
  %ia = s32[] parameter(1)
  %b = f32[] parameter(2)
  %ib = s32[] parameter(3)
  %compare = pred[] compare(f32[] %a, f32[] %b), direction=GT
  %select = f32[] select(pred[] %compare, f32[] %a, f32[] %b)
  %select.1 = s32[] select(pred[] %compare, s32[] %ia, s32[] %ib)
  ROOT %tuple = (f32[], s32[]) tuple(f32[] %select, s32[] %select.1)
}

ENTRY %main {
  %table = f32[10,4]{1,0} parameter(0)
  %ids = s32[3]{0} parameter(1)
  %cache = f32[8,4]{1,0} parameter(2)
  %pos = s32[] parameter(3)
  %gather = f32[3,4]{1,0} gather(f32[10,4]{1,0} %table, s32[3]{0} %ids), )hlo"
R"hlo(offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, )hlo"
R"hlo(index_vector_dim=1, slice_sizes={1,4}
  %constant = s32[] constant(0)
  %dynamic-update-slice = f32[8,4]{1,0} dynamic-update-slice(f32[8,4]{1,0} %cache, )hlo"
R"hlo(f32[3,4]{1,0} %gather, s32[] %pos, s32[] %constant)
  %dynamic-slice = f32[2,4]{1,0} dynamic-slice(f32[8,4]{1,0} %dynamic-update-slice, )hlo"
R"hlo(s32[] %pos, s32[] %constant), dynamic_slice_sizes={2,4}
  %iota = s32[2,4]{1,0} iota(), iota_dimension=1
  %constant.1 = f32[] constant(-inf)
  %reduce = (f32[2]{0}, s32[2]{0}) reduce(f32[2,4]{1,0} %dynamic-slice, )hlo"
R"hlo(s32[2,4]{1,0} %iota, f32[] %constant.1, s32[] %constant), dimensions={1}, )hlo"
R"hlo(to_apply=%argmax
  %get-tuple-element = s32[2]{0} get-tuple-element((f32[2]{0}, s32[2]{0}) %reduce), index=1
  ROOT %tuple = (f32[8,4]{1,0}, s32[2]{0}) tuple(f32[8,4]{1,0} %dynamic-update-slice, )hlo"
R"hlo(s32[2]{0} %get-tuple-element)
}
)hlo";

}  // namespace

TEST_CASE(
    "gather, dynamic-slice, dynamic-update-slice, a variadic reduce and input_output_alias print "
    "in XLA's syntax") {
  CHECK(to_text(testing::indexing_module()) == golden_indexing);
}

TEST_CASE("softmax prints as XLA HLO text with reduce to_apply computations and -inf") {
  CHECK(to_text(testing::softmax_module()) == golden_softmax);
}

TEST_CASE("batched dot, iota mask, select and sharding annotations print in XLA's syntax") {
  CHECK(to_text(testing::attention_scores_module()) == golden_attention_scores);
}

TEST_CASE(
    "constants of every type, fusion, call, slice with stride and escaped names print stably") {
  CHECK(to_text(testing::misc_module()) == golden_misc);
}

TEST_CASE("printing is deterministic") {
  CHECK(to_text(testing::misc_module()) == to_text(testing::misc_module()));
}

TEST_CASE("shapes print with layouts except for scalars; tuples in parentheses") {
  CHECK(to_text(shape::array(element_type::f32, {2, 3})) == "f32[2,3]{1,0}");
  CHECK(to_text(shape::scalar(element_type::pred)) == "pred[]");
  shape s = shape::array(element_type::bf16, {4, 8});
  s.minor_to_major = {0, 1};
  CHECK(to_text(s) == "bf16[4,8]{0,1}");
  CHECK(to_text(shape::make_tuple({s, shape::scalar(element_type::s32)})) ==
        "(bf16[4,8]{0,1}, s32[])");
  CHECK(to_text(shape::make_tuple({})) == "()");
}

TEST_CASE("float values print as the shortest text that reads back to the same value") {
  CHECK(literal_value_text(element_type::f32, 0.1f) == "0.1");
  CHECK(literal_value_text(element_type::f64, 0.1) == "0.1");
  CHECK(literal_value_text(element_type::f32, 1e20f) == "1e+20");
  CHECK(literal_value_text(element_type::f32, -INFINITY) == "-inf");
  CHECK(literal_value_text(element_type::bf16, NAN) == "nan");
  CHECK(literal_value_text(element_type::pred, 1) == "true");
  CHECK(to_text(literal::array(shape::array(element_type::f32, {2, 1, 2}), {1, 2, 3, 4})) ==
        "{ { {1, 2} }, { {3, 4} } }");
}

TEST_CASE("sharding forms print as XLA writes them") {
  CHECK(to_text(sharding::tiled({1, 8})) == "{devices=[1,8]<=[8]}");
  CHECK(to_text(sharding::tiled({2, 1, 4}, true)) ==
        "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  sharding t = sharding::tiled({4, 2});
  t.iota_dims = {2, 4};
  t.iota_perm = {1, 0};
  CHECK(to_text(t) == "{devices=[4,2]<=[2,4]T(1,0)}");
  CHECK(to_text(sharding::tiled_devices({2}, {1, 0})) == "{devices=[2]1,0}");
  CHECK(to_text(sharding::manual()) == "{manual}");
  CHECK_THROWS_AS(sharding::tiled_devices({2, 2}, {0, 1}), ir_error);
}

TEST_CASE("the printer refuses a module that breaks the IR's structure") {
  module m = testing::softmax_module();
  m.entry = "nope";
  CHECK_THROWS_WITH_AS(to_text(m), "module softmax: entry computation 'nope' is missing", ir_error);
}
