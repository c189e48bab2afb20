// hlo::export: the text of small programs (golden), every op through XLA's syntax and our parser,
// the binding order, the fused form's structure, names, errors, and exported modules evaluated by
// the TPU-style backend's HLO executor against the reference backend.
// Golden lines over 100 columns go on in the next raw string literal (a line ends in )hlo",
// the next starts with R"hlo(): adjacent literals concatenate into one line.
#include "fusedsl/export/export.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "../common/compare.hpp"
#include "cases.hpp"
#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "fusedsl/tpu/execute.hpp"
#include "tpu_values.hpp"
#include "xla_cpu_rules.hpp"

namespace fd = fusedsl;
namespace hlo = fusedsl::hlo;
namespace ec = export_cases;
namespace ft = fusedsl::test;
using fd::graph::op_kind;

namespace golden {
constexpr auto x = fd::input<"x", float, 2, 3>();
constexpr auto w = fd::param<"w", float, 3, 4>();
constexpr auto b = fd::param<"b", float, 4>();
constexpr auto linear_relu = fd::compile(fd::relu(fd::matmul(x, w) + b));
constexpr auto xb = fd::input<"x", fd::bf16, 2, 2>();
constexpr auto two_outputs =
    fd::compile(fd::where(fd::iota<std::int32_t, 0, 2, 2>() >= fd::iota<std::int32_t, 1, 2, 2>(),
                          xb, fd::lit<-std::numeric_limits<double>::infinity()>),
                fd::max<1>(xb));
constexpr auto t = fd::input<"t", float, 2, 4>();
constexpr auto blk = fd::nn::block([](auto v) { return v * fd::param<"s", float, 4>() + v; });
constexpr auto stacked = fd::compile(fd::nn::stack<"layers", 2>(blk, t));

const char* const golden_linear_relu = R"hlo(HloModule fusedsl

ENTRY %main {
  %x = f32[2,3]{1,0} parameter(0), metadata={op_name="x"}
  %w = f32[3,4]{1,0} parameter(1), metadata={op_name="w"}
  %b = f32[4]{0} parameter(2), metadata={op_name="b"}
  %dot = f32[2,4]{1,0} dot(f32[2,3]{1,0} %x, f32[3,4]{1,0} %w), lhs_contracting_dims={1}, )hlo"
R"hlo(rhs_contracting_dims={0}
  %broadcast = f32[2,4]{1,0} broadcast(f32[4]{0} %b), dimensions={1}
  %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %dot, f32[2,4]{1,0} %broadcast)
  %constant = f32[] constant(0)
  %broadcast.1 = f32[2,4]{1,0} broadcast(f32[] %constant), dimensions={}
  ROOT %maximum = f32[2,4]{1,0} maximum(f32[2,4]{1,0} %add, f32[2,4]{1,0} %broadcast.1)
}
)hlo";

const char* const golden_linear_relu_fused = R"hlo(HloModule fusedsl

%fused_matmul_0 {
  %x = f32[2,3]{1,0} parameter(0)
  %w = f32[3,4]{1,0} parameter(1)
  %b = f32[4]{0} parameter(2)
  %dot = f32[2,4]{1,0} dot(f32[2,3]{1,0} %x, f32[3,4]{1,0} %w), lhs_contracting_dims={1}, )hlo"
R"hlo(rhs_contracting_dims={0}
  %broadcast = f32[2,4]{1,0} broadcast(f32[4]{0} %b), dimensions={1}
  %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %dot, f32[2,4]{1,0} %broadcast)
  %constant = f32[] constant(0)
  %broadcast.1 = f32[2,4]{1,0} broadcast(f32[] %constant), dimensions={}
  ROOT %maximum = f32[2,4]{1,0} maximum(f32[2,4]{1,0} %add, f32[2,4]{1,0} %broadcast.1)
}

ENTRY %main {
  %x = f32[2,3]{1,0} parameter(0), metadata={op_name="x"}
  %w = f32[3,4]{1,0} parameter(1), metadata={op_name="w"}
  %b = f32[4]{0} parameter(2), metadata={op_name="b"}
  ROOT %fusion = f32[2,4]{1,0} fusion(f32[2,3]{1,0} %x, f32[3,4]{1,0} %w, f32[4]{0} %b), )hlo"
R"hlo(kind=kOutput, calls=%fused_matmul_0
}
)hlo";

const char* const golden_two_outputs = R"hlo(HloModule fusedsl

%max_f32 {
  %lhs = f32[] parameter(0)
  %rhs = f32[] parameter(1)
  ROOT %maximum = f32[] maximum(f32[] %lhs, f32[] %rhs)
}

ENTRY %main {
  %x = bf16[2,2]{1,0} parameter(0), metadata={op_name="x"}
  %iota = s32[2,2]{1,0} iota(), iota_dimension=0
  %iota.1 = s32[2,2]{1,0} iota(), iota_dimension=1
  %compare = pred[2,2]{1,0} compare(s32[2,2]{1,0} %iota, s32[2,2]{1,0} %iota.1), direction=GE
  %constant = bf16[] constant(-inf)
  %broadcast = bf16[2,2]{1,0} broadcast(bf16[] %constant), dimensions={}
  %select = bf16[2,2]{1,0} select(pred[2,2]{1,0} %compare, bf16[2,2]{1,0} %x, bf16[2,2]{1,0} )hlo"
R"hlo(%broadcast)
  %convert = f32[2,2]{1,0} convert(bf16[2,2]{1,0} %x)
  %constant.1 = f32[] constant(-inf)
  %reduce = f32[2]{0} reduce(f32[2,2]{1,0} %convert, f32[] %constant.1), dimensions={1}, )hlo"
R"hlo(to_apply=%max_f32
  %convert.1 = bf16[2]{0} convert(f32[2]{0} %reduce)
  ROOT %tuple = (bf16[2,2]{1,0}, bf16[2]{0}) tuple(bf16[2,2]{1,0} %select, bf16[2]{0} %convert.1)
}
)hlo";

const char* const golden_stack = R"hlo(HloModule fusedsl

ENTRY %main {
  %t = f32[2,4]{1,0} parameter(0), metadata={op_name="t"}
  %layers.0.s = f32[4]{0} parameter(1), metadata={op_name="layers.0.s"}
  %layers.1.s = f32[4]{0} parameter(2), metadata={op_name="layers.1.s"}
  %broadcast = f32[2,4]{1,0} broadcast(f32[4]{0} %layers.0.s), dimensions={1}
  %multiply = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %t, f32[2,4]{1,0} %broadcast)
  %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %multiply, f32[2,4]{1,0} %t)
  %broadcast.1 = f32[2,4]{1,0} broadcast(f32[4]{0} %layers.1.s), dimensions={1}
  %multiply.1 = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %add, f32[2,4]{1,0} %broadcast.1)
  ROOT %add.1 = f32[2,4]{1,0} add(f32[2,4]{1,0} %multiply.1, f32[2,4]{1,0} %add)
}
)hlo";

const char* const golden_stack_fused = R"hlo(HloModule fusedsl

%fused_loop_1 {
  %p0 = f32[2,4]{1,0} parameter(0)
  %s = f32[4]{0} parameter(1)
  %broadcast = f32[2,4]{1,0} broadcast(f32[4]{0} %s), dimensions={1}
  %multiply = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %p0, f32[2,4]{1,0} %broadcast)
  ROOT %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %multiply, f32[2,4]{1,0} %p0)
}

ENTRY %main {
  %t = f32[2,4]{1,0} parameter(0), metadata={op_name="t"}
  %layers.0.s = f32[4]{0} parameter(1), metadata={op_name="layers.0.s"}
  %layers.1.s = f32[4]{0} parameter(2), metadata={op_name="layers.1.s"}
  %fusion = f32[2,4]{1,0} fusion(f32[2,4]{1,0} %t, f32[4]{0} %layers.0.s), kind=kLoop, )hlo"
R"hlo(calls=%fused_loop_1
  ROOT %fusion.1 = f32[2,4]{1,0} fusion(f32[2,4]{1,0} %fusion, f32[4]{0} %layers.1.s), )hlo"
R"hlo(kind=kLoop, calls=%fused_loop_1
}
)hlo";

// Rows of a table written into a cache at a run-time position, argmax over a window of it.
constexpr auto table = fd::param<"table", float, 6, 4>();
constexpr auto ids = fd::input<"ids", std::int32_t, 3>();
constexpr auto cache = fd::input<"cache", float, 8, 4>();
constexpr auto pos = fd::input<"pos", std::int32_t>();
constexpr auto rows = fd::gather(table, ids);
constexpr auto updated = fd::dynamic_update_slice<0>(cache, rows, pos);
constexpr auto indexing = fd::compile(updated, fd::argmax<1>(fd::dynamic_slice<0, 2>(updated, pos)),
                                      fd::sin(fd::cos(rows)));

const char* const golden_argmax_comparator = R"hlo(%argmax_f32 {
  %a = f32[] parameter(0)
  %a_index = s32[] parameter(1)
  %b = f32[] parameter(2)
  %b_index = s32[] parameter(3)
  %greater = pred[] compare(f32[] %a, f32[] %b), direction=GT
  %equal = pred[] compare(f32[] %a, f32[] %b), direction=EQ
  %a_is_nan = pred[] compare(f32[] %a, f32[] %a), direction=NE
  %b_is_nan = pred[] compare(f32[] %b, f32[] %b), direction=NE
  %not = pred[] not(pred[] %b_is_nan)
  %and = pred[] and(pred[] %a_is_nan, pred[] %not)
  %or = pred[] or(pred[] %greater, pred[] %and)
  %and.1 = pred[] and(pred[] %a_is_nan, pred[] %b_is_nan)
  %or.1 = pred[] or(pred[] %equal, pred[] %and.1)
  %lower_index = pred[] compare(s32[] %a_index, s32[] %b_index), direction=LT
  %and.2 = pred[] and(pred[] %or.1, pred[] %lower_index)
  %or.2 = pred[] or(pred[] %or, pred[] %and.2)
  %select = f32[] select(pred[] %or.2, f32[] %a, f32[] %b)
  %select.1 = s32[] select(pred[] %or.2, s32[] %a_index, s32[] %b_index)
  ROOT %tuple = (f32[], s32[]) tuple(f32[] %select, s32[] %select.1)
}
)hlo";

}  // namespace golden

namespace {

hlo::export_options fused_options(hlo::group_calls groups = hlo::group_calls::fusion) {
  hlo::export_options o;
  o.form = hlo::export_form::fused;
  o.groups = groups;
  return o;
}

template <class F>
void for_each_case(F&& f) {
  f("unary_a", ec::unary_a);
  f("unary_b", ec::unary_b);
  f("binary", ec::binary);
  f("compare", ec::compare);
  f("casts", ec::casts);
  f("reduce", ec::reduce);
  f("matmul", ec::matmul);
  f("structure", ec::structure);
  f("rows", ec::rows);
  f("low_precision", ec::low_precision);
  f("int8", ec::int8);
  f("int8_linear", ec::int8_linear);
  f("embedding", ec::embedding);
  f("decode", ec::decode);
  f("state_update", ec::state_update);
  f("argmax", ec::argmax);
  f("order", ec::order);
  f("scatter_add", ec::scatter_add);
  f("pred_between_parts", ec::pred_between_parts);
  f("rope", ec::rope);
  f("rounding", ec::rounding);
  f("quantization", ec::quantization);
  f("stack", ec::stack);
  f("batched_gqa", ec::batched_gqa);
  f("attention_options", ec::attention_options);
  f("moe_routed", ec::moe_routed);
  f("seed_transformer", ec::seed);
  f("gpt_small", ec::gpt);
}

std::size_t count_opcode(const hlo::computation& c, hlo::opcode op) {
  return std::size_t(std::count_if(c.instructions.begin(), c.instructions.end(),
                                   [&](const hlo::instruction& in) { return in.opcode == op; }));
}

}  // namespace

TEST_CASE(
    "the unfused export of x @ w + b, relu is dot, broadcast with dimensions, add and maximum") {
  CHECK(hlo::to_text(golden::linear_relu) == golden::golden_linear_relu);
}

TEST_CASE(
    "the fused export of a matmul group is one kOutput fusion calling the group's computation") {
  CHECK(hlo::to_text(golden::linear_relu, fused_options()) == golden::golden_linear_relu_fused);
}

TEST_CASE(
    "two outputs give a tuple root; a bf16 mask uses a bf16 -inf constant; bf16 reduces in f32") {
  CHECK(hlo::to_text(golden::two_outputs) == golden::golden_two_outputs);
}

TEST_CASE(
    "a stack is unrolled with per-layer parameters; fused, every layer calls the same "
    "computation") {
  CHECK(hlo::to_text(golden::stacked) == golden::golden_stack);
  CHECK(hlo::to_text(golden::stacked, fused_options()) == golden::golden_stack_fused);
}

TEST_CASE(
    "gather, dynamic slices, argmax, sin and cos export as XLA's gather, dynamic-slice, "
    "dynamic-update-slice, variadic reduce, sine and cosine") {
  const std::string t = hlo::to_text(golden::indexing);
  auto has = [&](const std::string& line) {
    CAPTURE(line);
    CHECK(t.find(line) != std::string::npos);
  };
  has("%gather = f32[3,4]{1,0} gather(f32[6,4]{1,0} %table, s32[3]{0} %ids), offset_dims={1}, "
      "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}\n");
  has("%dynamic-update-slice = f32[8,4]{1,0} dynamic-update-slice(f32[8,4]{1,0} %cache, "
      "f32[3,4]{1,0} %gather, "
      "s32[] %pos, s32[] %constant)\n");
  has("%dynamic-slice = f32[2,4]{1,0} dynamic-slice(f32[8,4]{1,0} %dynamic-update-slice, s32[] "
      "%pos, s32[] "
      "%constant.1), dynamic_slice_sizes={2,4}\n");
  has("%iota = s32[2,4]{1,0} iota(), iota_dimension=1\n  %constant.2 = f32[] constant(-inf)\n  "
      "%constant.3 = s32[] "
      "constant(0)\n  %reduce = (f32[2]{0}, s32[2]{0}) reduce(f32[2,4]{1,0} %dynamic-slice, "
      "s32[2,4]{1,0} %iota, "
      "f32[] %constant.2, s32[] %constant.3), dimensions={1}, to_apply=%argmax_f32\n  "
      "%get-tuple-element = s32[2]{0} "
      "get-tuple-element((f32[2]{0}, s32[2]{0}) %reduce), index=1\n");
  has("%cosine = f32[3,4]{1,0} cosine(f32[3,4]{1,0} %gather)\n  %sine = f32[3,4]{1,0} "
      "sine(f32[3,4]{1,0} %cosine)\n");
  has(golden::golden_argmax_comparator);
  // Ids of rank 2: each id is a one-entry index vector (index_vector_dim 2), the row dims follow.
  const std::string e = hlo::to_text(ec::embedding);
  CHECK(e.find("gather(f32[6,8]{1,0} %vocab, s32[2,4]{1,0} %ids), offset_dims={2}, "
               "collapsed_slice_dims={0}, "
               "start_index_map={0}, index_vector_dim=2, slice_sizes={1,8}") != std::string::npos);
  // A rank-3 window along axis 1: starts (0, step, 0).
  const std::string d = hlo::to_text(ec::decode);
  CHECK(d.find("dynamic-slice(f32[2,4,8]{2,1,0} %a3, s32[] %constant.6, s32[] %step, s32[] "
               "%constant.6), "
               "dynamic_slice_sizes={2,2,8}") != std::string::npos);
}

TEST_CASE("a state is an entry parameter, and its new value an output aliased to it") {
  for (const hlo::export_options& o : {hlo::export_options{}, fused_options()}) {
    const hlo::module m = hlo::to_module(ec::state_update, o);
    const hlo::computation& entry = m.entry_computation();
    REQUIRE(m.input_output_alias.size() == 1);
    const hlo::io_alias& a = m.input_output_alias[0];
    CHECK(a.output_index == std::vector<std::int64_t>{1});
    CHECK(entry.instructions[entry.parameters()[std::size_t(a.parameter_number)]].name == "kv");
    CHECK_FALSE(a.must_alias);
    const std::string text = hlo::to_text(m);
    CHECK(text.find("input_output_alias={ {1}: (") != std::string::npos);
    CHECK(hlo::parse_module(text) == m);
  }
}

TEST_CASE(
    "fused, a gather and a dynamic-update-slice are kLoop groups and argmax a kInput reduce group; "
    "the XLA:CPU form rewrites the gather into XLA's simplified form and returns argmax's reduce "
    "whole") {
  const hlo::module f = hlo::to_module(golden::indexing, fused_options());
  const hlo::instruction& dus = f.get("fused_loop_2").root_instruction();
  CHECK(dus.opcode == hlo::opcode::dynamic_update_slice);
  CHECK(f.get("fused_loop_3").root_instruction().opcode == hlo::opcode::gather);
  const hlo::computation& reduce = f.get("fused_reduce_0");
  CHECK(reduce.root_instruction().opcode == hlo::opcode::get_tuple_element);
  std::set<hlo::fusion_kind> kinds;
  for (const auto& in : f.entry_computation().instructions)
    if (in.opcode == hlo::opcode::fusion && in.called_computation == "fused_reduce_0")
      kinds.insert(*in.fusion_kind);
  CHECK(kinds == std::set<hlo::fusion_kind>{hlo::fusion_kind::input});

  const hlo::module x = hlo::to_module(golden::indexing, fused_options(hlo::group_calls::xla_cpu));
  const hlo::instruction& g = x.get("fused_loop_3.part0").root_instruction();
  REQUIRE(g.opcode == hlo::opcode::gather);
  CHECK(g.shape == hlo::shape::array(hlo::element_type::f32, {3, 1, 4}));
  CHECK(g.gather == hlo::gather_dimension_numbers{{1, 2}, {}, {0}, {}, {}, 1});
  CHECK(x.get("fused_loop_3.part1").root_instruction().opcode == hlo::opcode::reshape);
  CHECK(x.get("fused_reduce_0").root_instruction().opcode == hlo::opcode::reduce);
  std::size_t tuple_elements = 0;
  for (const auto& in : x.entry_computation().instructions)
    tuple_elements += in.opcode == hlo::opcode::get_tuple_element;
  CHECK(tuple_elements == 1);  // argmax's index, read from the reduce's tuple in the entry
  for (const auto& c : x.computations)
    if (c.name.rfind("fused_", 0) == 0) CHECK(xla_cpu_rules::check_part(c) == "");
}

TEST_CASE("the printed text is stable: exporting twice gives the same bytes") {
  CHECK(hlo::to_text(ec::seed) == hlo::to_text(ec::seed));
  CHECK(hlo::to_text(ec::seed, fused_options()) == hlo::to_text(ec::seed, fused_options()));
}

TEST_CASE("the cases read every fusedsl op, and every export parses back to the same module") {
  std::set<op_kind> seen;
  for_each_case([&](const char* name, const auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    for (const auto& n : P::graph.nodes) seen.insert(n.op);
    for (const hlo::export_options& o :
         {hlo::export_options{}, fused_options(), fused_options(hlo::group_calls::call),
          fused_options(hlo::group_calls::xla_cpu)}) {
      const std::string case_name = name;
      CAPTURE(case_name);
      const hlo::module m = hlo::to_module(p, o);
      const std::string text = hlo::to_text(m);
      CHECK(hlo::parse_module(text) == m);
    }
  });
  for (int k = 0; k <= int(op_kind::repeat); ++k) {
    CAPTURE(fd::graph::name_of(op_kind(k)));
    CHECK(seen.count(op_kind(k)) == 1);
  }
}

TEST_CASE("entry parameters follow the reference backend's binding order and keep their names") {
  for_each_case([](const char* name, const auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    const std::string case_name = name;
    CAPTURE(case_name);
    const fd::graph::graph_view g(P::graph);
    const auto want = fd::reference::required_bindings(g);
    const hlo::module m = hlo::to_module(p);
    const hlo::computation& entry = m.entry_computation();
    const auto params = entry.parameters();
    REQUIRE(params.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      const hlo::instruction& in = entry.instructions[params[i]];
      CHECK(in.op_name == want[i].name);
      CHECK(in.shape.dims ==
            std::vector<std::int64_t>(want[i].shape.d.begin(),
                                      want[i].shape.d.begin() + want[i].shape.rank));
    }
  });
}

TEST_CASE(
    "the seed transformer's fused form has one fusion per group and layer, with the plan's kinds") {
  using P = fd::models::seed::program_type;
  const hlo::module m = hlo::to_module(ec::seed, fused_options());
  const hlo::computation& entry = m.entry_computation();
  int body_groups = 0, main_groups = 0;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi) {
    const auto& gr = P::fusion.groups[std::size_t(gi)];
    if (gr.kind == fd::plan::group_kind::repeat) continue;
    (gr.region == 0 ? main_groups : body_groups) += 1;
  }
  CHECK(count_opcode(entry, hlo::opcode::fusion) == std::size_t(main_groups + 2 * body_groups));
  // one computation per group, shared by both layers
  int fused_computations = 0;
  for (const auto& c : m.computations) fused_computations += c.name.rfind("fused_", 0) == 0;
  CHECK(fused_computations == main_groups + body_groups);
  std::set<hlo::fusion_kind> kinds;
  for (const auto& in : entry.instructions)
    if (in.fusion_kind) kinds.insert(*in.fusion_kind);
  CHECK(kinds.count(hlo::fusion_kind::output) == 1);  // matmuls, attention
  CHECK(kinds.count(hlo::fusion_kind::input) == 1);   // layer norms
  // The call form calls the same computations.
  const hlo::module mc = hlo::to_module(ec::seed, fused_options(hlo::group_calls::call));
  CHECK(count_opcode(mc.entry_computation(), hlo::opcode::call) ==
        std::size_t(main_groups + 2 * body_groups));
  CHECK(count_opcode(mc.entry_computation(), hlo::opcode::fusion) == 0);
}

TEST_CASE(
    "the XLA:CPU fused form: kLoop fusions only, each keeping XLA:CPU's rules, named after its "
    "group") {
  for_each_case([](const char* name, const auto& p) {
    const std::string case_name = name;
    CAPTURE(case_name);
    hlo::export_options dots = fused_options(hlo::group_calls::xla_cpu);
    dots.xla_cpu.library_dots = true;
    const hlo::module md = hlo::to_module(p, dots);
    CHECK(hlo::parse_module(hlo::to_text(md)) == md);
    for (const auto& in : md.entry_computation().instructions)
      if (in.opcode == hlo::opcode::dot) CHECK(in.op_name.rfind("fusedsl group ", 0) == 0);
    const hlo::module m = hlo::to_module(p, fused_options(hlo::group_calls::xla_cpu));
    for (const auto& in : m.entry_computation().instructions) {
      if (in.opcode != hlo::opcode::fusion) continue;
      CHECK(in.fusion_kind == hlo::fusion_kind::loop);
      CHECK(in.op_name.rfind("fusedsl group ", 0) == 0);
      CHECK(in.called_computation.rfind("fused_", 0) == 0);
      CHECK(xla_cpu_rules::check_part(m.get(in.called_computation)) == "");
    }
    CHECK(count_opcode(m.entry_computation(), hlo::opcode::call) == 0);
  });
}

TEST_CASE(
    "the seed transformer's XLA:CPU form: one fusion for each bias or residual matmul group, parts "
    "for the rest, "
    "shared by both layers") {
  using P = fd::models::seed::program_type;
  const hlo::module m = hlo::to_module(ec::seed, fused_options(hlo::group_calls::xla_cpu));
  const hlo::computation& entry = m.entry_computation();
  std::set<std::string> groups, computations;
  std::size_t fusions = 0;
  for (const auto& in : entry.instructions) {
    if (in.opcode != hlo::opcode::fusion) continue;
    ++fusions;
    computations.insert(in.called_computation);
    groups.insert(in.op_name.substr(0, in.op_name.find(" part ")));
  }
  int plan_groups = 0;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi)
    plan_groups += P::fusion.groups[std::size_t(gi)].kind != fd::plan::group_kind::repeat;
  CHECK(groups.size() == std::size_t(plan_groups));  // every group of the plan is there, by number
  CHECK(fusions == 2 * computations.size());         // each layer calls the same part computations
  // An attention group (flash-style in our plan) becomes 10 parts: q, k, v split into heads (a dot
  // reads parameters), scores, row max, row sum, probabilities, context, and the head merge
  // (transpose, reshape); a matmul group whose epilogue reads the product once stays whole.
  CHECK(m.find("fused_attention_0.part9") != nullptr);
  CHECK(m.find("fused_attention_0.part10") == nullptr);
  CHECK(m.find("fused_matmul_2") != nullptr);
}

TEST_CASE(
    "names that are not HLO identifiers are escaped, and the binding name is kept in op_name") {
  constexpr auto x = fd::input<"in put/0", float, 2, 2>();
  constexpr auto p = fd::compile(fd::exp(x));
  const hlo::module m = hlo::to_module(p);
  const hlo::instruction& param =
      m.entry_computation().instructions[m.entry_computation().parameters()[0]];
  CHECK(param.name == "in_put_0");
  CHECK(param.op_name == "in put/0");
  CHECK(hlo::to_text(p).find("metadata={op_name=\"in put/0\"}") != std::string::npos);
}

TEST_CASE("the fused form of a bare graph needs its fusion plan") {
  const fd::graph::graph_view g(decltype(ec::binary)::graph);
  CHECK_THROWS_AS(hlo::to_module(g, nullptr, fused_options()), fd::graph::graph_error);
  CHECK_NOTHROW(hlo::to_module(g, nullptr, {}));
}

TEST_CASE("every op can be exported: the mapping covers each op_kind") {
  for (int k = 0; k <= int(op_kind::repeat); ++k) {
    CAPTURE(fd::graph::name_of(op_kind(k)));
    CHECK(hlo::hlo_mapping::has(op_kind(k)));
  }
  static_assert(hlo::check_exportable<decltype(ec::seed)>());
}

namespace {
// Runs an exported module with the TPU-style backend's HLO executor on the reference's inputs.
template <class Program>
void check_evaluated(const std::string& name, const Program& p, const hlo::export_options& o,
                     double tol, const char* bound = nullptr,
                     fd::dynamic_tensor (*make)() = nullptr) {
  CAPTURE(name);
  const fd::graph::graph_view g(Program::graph);
  const auto bs = hlo::export_bindings(g);
  auto inputs = ec::random_bindings(bs, 7);
  for (std::size_t i = 0; bound && i < bs.size(); ++i)
    if (bs[i].name == bound) inputs[i] = make();
  const auto want = ec::reference_outputs(g, bs, inputs);
  const hlo::module m = hlo::to_module(p, o);
  const fd::tpu::schedule s = fd::tpu::make_schedule(m, fd::tpu::chip_by_name("v5e"));
  tpu_values::check_outputs(fd::tpu::execute(s, tpu_values::to_values(m, inputs)), want, tol);
}
}  // namespace

// The fused form is evaluated in its call form (the executor runs one MXU matmul per fusion, and
// a horizontal (Q, K, V) matmul group holds three) and in its XLA:CPU forms (one dot per fusion;
// or every dot a plain dot outside the fusions).
TEST_CASE("exported modules, unfused and fused, evaluate to the reference backend's numbers") {
  for_each_case([](const char* name, const auto& p) {
    const bool low = std::string(name) == "low_precision" || std::string(name) == "casts";
    check_evaluated(name, p, {}, low ? 2e-2 : 1e-5);
    check_evaluated(name, p, fused_options(hlo::group_calls::call), low ? 2e-2 : 1e-5);
    check_evaluated(name, p, fused_options(hlo::group_calls::xla_cpu), low ? 2e-2 : 1e-5);
    hlo::export_options dots = fused_options(hlo::group_calls::xla_cpu);
    dots.xla_cpu.library_dots = true;
    check_evaluated(name, p, dots, low ? 2e-2 : 1e-5);
  });
}

TEST_CASE(
    "floor, ceil, trunc and round export to XLA's opcodes and evaluate exactly, in every form") {
  for (const hlo::export_options& o : {hlo::export_options{}, fused_options(hlo::group_calls::call),
                                       fused_options(hlo::group_calls::xla_cpu)})
    check_evaluated("rounding", ec::rounding, o, 0.0, "r", ec::rounding_values);
  const std::string text = hlo::to_text(ec::rounding);
  for (const char* op : {" floor(", " ceil(", " round-nearest-even(", " select("})
    CHECK_MESSAGE(text.find(op) != std::string::npos, op);
}

TEST_CASE("top_k, sort and argsort export as comparisons and reductions and evaluate exactly") {
  for (const hlo::export_options& o : {hlo::export_options{}, fused_options(hlo::group_calls::call),
                                       fused_options(hlo::group_calls::xla_cpu)})
    check_evaluated("order", ec::order, o, 0.0, "logits", ec::argmax_logits);
}

TEST_CASE(
    "argmax's exported comparator gives the first maximum, NaN above all, 0 for an all -inf row, "
    "in every form") {
  for (const hlo::export_options& o : {hlo::export_options{}, fused_options(hlo::group_calls::call),
                                       fused_options(hlo::group_calls::xla_cpu)})
    check_evaluated("argmax", ec::argmax, o, 1e-5, "logits", ec::argmax_logits);
}
