// Writes interop test cases for tests/interop/run_hlo.py: for each case a folder with
// module.hlo and module.mlir (built with the IR builder, printed by our HLO and StableHLO
// printers), input_<k>.npy and
// expected_<k>.npy (computed by reference_eval.hpp), and a `partitions` file for sharded cases.
// The xla_cpu_split_* cases are groups split by hlo::split_for_xla_cpu into kLoop fusions (also
// gathers, a variadic reduce, dynamic-slice and dynamic-update-slice), with a
// `keep_fusions` file (XLA must run them as given) and the unsplit group as the reference.
// With a second folder, also writes that many random modules (tests/hlo/random_module.hpp) as
// r<k>.hlo and r<k>.mlir there, which run_hlo.py --compile-only must see XLA accept.
// Usage: fusedsl_interop_make_cases <cases dir> [<random dir> <count>]
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "../hlo/random_module.hpp"
#include "../hlo/sample_modules.hpp"
#include "fusedsl/export/xla_cpu_fusion.hpp"
#include "fusedsl/hlo/builder.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "fusedsl/hlo/stablehlo.hpp"
#include "fusedsl/io/npy.hpp"
#include "reference_eval.hpp"

namespace fs = std::filesystem;
using namespace fusedsl::hlo;
using fusedsl::hlo::reference::value;

namespace {

const element_type f32 = element_type::f32;
shape arr(std::vector<std::int64_t> d, element_type t = f32) {
  return shape::array(t, std::move(d));
}

std::mt19937_64 rng(20261129);

value random_value(const shape& s, double lo, double hi, double step = 0) {
  value v{s, {}, {}};
  std::uniform_real_distribution<double> u(lo, hi);
  for (std::int64_t i = 0; i < s.element_count(); ++i) {
    double x = u(rng);
    if (step > 0) x = std::round(x / step) * step;
    if (s.type == element_type::pred) x = x > (lo + hi) / 2;
    v.data.push_back(is_integral(s.type) ? std::round(x) : round_to(s.type, x));
  }
  return v;
}

// Writes one value as .npy: f32/f64/s32/s64/pred natively; bf16 and f16 as f32 (exact), the
// runner casts each input to its parameter's type.
void write_value(const fs::path& path, const value& v) {
  const auto& dims = v.shape.dims;
  switch (v.shape.type) {
    case element_type::pred: {
      std::vector<char> b(v.data.size());
      std::vector<std::byte> bytes;
      for (double x : v.data)
        bytes.push_back(std::byte{x != 0 ? std::uint8_t{1} : std::uint8_t{0}});
      std::ofstream(path, std::ios::binary)
          << fusedsl::io::serialize_npy(fusedsl::io::npy_dtype::b1, dims, bytes);
      return;
    }
    case element_type::s32: {
      std::vector<std::int32_t> x(v.data.begin(), v.data.end());
      fusedsl::io::write_npy<std::int32_t>(path.string(), x, dims);
      return;
    }
    case element_type::s64: {
      std::vector<std::int64_t> x(v.data.begin(), v.data.end());
      fusedsl::io::write_npy<std::int64_t>(path.string(), x, dims);
      return;
    }
    case element_type::f64:
      fusedsl::io::write_npy<double>(path.string(), v.data, dims);
      return;
    default: {
      std::vector<float> x(v.data.begin(), v.data.end());
      fusedsl::io::write_npy<float>(path.string(), x, dims);
    }
  }
}

void flatten(const value& v, std::vector<value>& out) {
  if (v.shape.is_tuple())
    for (const value& e : v.tuple) flatten(e, out);
  else
    out.push_back(v);
}

int case_count = 0;

// Expected outputs from `reference` (default: m itself); keep_fusions: XLA must run m's fusions
// as given (run_hlo.py).
void write_case(const fs::path& root, const std::string& name, const module& m,
                const std::vector<value>& inputs, int partitions = 1,
                const module* reference = nullptr, bool keep_fusions = false) {
  const fs::path dir = root / name;
  fs::create_directories(dir);
  std::ofstream(dir / "module.hlo") << to_text(m);
  std::ofstream(dir / "module.mlir") << to_stablehlo(m);
  for (std::size_t k = 0; k < inputs.size(); ++k)
    write_value(dir / ("input_" + std::to_string(k) + ".npy"), inputs[k]);
  if (keep_fusions)
    std::ofstream(dir / "keep_fusions") << "XLA's compiled entry must hold module.hlo's fusions\n";
  std::vector<value> outs;
  flatten(reference::evaluate(reference ? *reference : m, inputs), outs);
  for (std::size_t k = 0; k < outs.size(); ++k)
    write_value(dir / ("expected_" + std::to_string(k) + ".npy"), outs[k]);
  if (partitions > 1) std::ofstream(dir / "partitions") << partitions << "\n";
  ++case_count;
}

module single(const std::string& name, computation entry, std::vector<computation> callees = {}) {
  module m;
  m.name = name;
  for (auto& c : callees) m.add_computation(std::move(c));
  m.set_entry(std::move(entry));
  return m;
}

// A group computation as split_for_xla_cpu's kLoop parts called from an entry (a tuple of the
// group's outputs), written with the group itself as the reference: XLA:CPU must compile the
// parts as given and match the unsplit computation.
void write_split_case(const fs::path& root, const std::string& name, const computation& group,
                      const std::vector<computation>& callees, const std::vector<value>& inputs,
                      const xla_cpu_options& options = {}) {
  const fusion_split split = split_for_xla_cpu(group, options);
  module m;
  m.name = name;
  for (const computation& c : callees) m.add_computation(c);
  computation_builder b("main");
  std::vector<instruction_id> params, parts;
  for (instruction_id p : group.parameters())
    params.push_back(b.add_parameter(group.instructions[p].shape, group.instructions[p].name));
  auto value_of = [&](const part_value& v) {
    if (!v.from_part) return params[v.index];
    return v.tuple_index < 0 ? parts[v.index]
                             : b.add_get_tuple_element(parts[v.index], v.tuple_index);
  };
  for (std::size_t k = 0; k < split.parts.size(); ++k) {
    std::vector<instruction_id> args;
    for (const part_value& v : split.parts[k].operands) args.push_back(value_of(v));
    const std::string callee = m.add_computation(split.parts[k].body);
    parts.push_back(b.add_fusion(args, m.get(callee), fusion_kind::loop));
    b.set_op_name(parts.back(), "fusedsl group 0 (" + name + ") part " + std::to_string(k + 1));
  }
  std::vector<instruction_id> outs;
  for (const part_value& v : split.outputs) outs.push_back(value_of(v));
  b.add_tuple(outs);
  m.set_entry(b.build());
  // The reference: the group as the entry, its root made a tuple like the split's.
  module ref;
  ref.name = name;
  for (const computation& c : callees) ref.add_computation(c);
  computation g = group;
  g.name = "main";
  if (g.root_instruction().opcode != opcode::tuple) {
    instruction t;
    t.name = "outputs";
    t.opcode = opcode::tuple;
    t.shape = shape::make_tuple({g.root_instruction().shape});
    t.operands = {g.root};
    g.instructions.push_back(std::move(t));
    g.root = g.instructions.size() - 1;
  }
  ref.set_entry(std::move(g));
  write_case(root, name, m, inputs, 1, &ref, true);
}

// Groups that exercise each rule of split_for_xla_cpu (docs/hlo-export.md).
void write_split_cases(const fs::path& root) {
  const computation sum = make_scalar_computation("sum", opcode::add, f32);
  const computation max = make_scalar_computation("max", opcode::maximum, f32);
  {
    // Softmax with a row max and a row sum broadcast back, two outputs (tuple root), logistic.
    computation_builder b("softmax_group");
    auto x = b.add_parameter(arr({4, 16}), "x");
    auto m = b.add_reduce(x, b.add_constant(literal::scalar(f32, -INFINITY)), {1}, max);
    auto e = b.add_unary(opcode::exponential,
                         b.add_binary(opcode::subtract, x, b.add_broadcast(m, {4, 16}, {0})));
    auto s0 = b.add_reduce(e, b.add_constant(literal::scalar(f32, 0)), {1}, sum);
    auto p = b.add_binary(opcode::divide, e, b.add_broadcast(s0, {4, 16}, {0}));
    b.add_tuple({p, b.add_unary(opcode::logistic, x)});
    write_split_case(root, "xla_cpu_split_softmax", b.build(), {sum, max},
                     {random_value(arr({4, 16}), -3, 3)});
  }
  {
    // Attention head split: reshape + transpose folded into the dots; head merge transpose.
    computation_builder b("attention_group");
    auto q = b.add_parameter(arr({16, 32}), "q");
    auto k = b.add_parameter(arr({16, 32}), "k");
    auto v = b.add_parameter(arr({16, 32}), "v");
    auto heads = [&](instruction_id t) {
      return b.add_transpose(b.add_reshape(t, {16, 4, 8}), {1, 0, 2});
    };
    auto sc = b.add_dot(heads(q), heads(k), {{0}, {2}, {0}, {2}});
    auto m = b.add_reduce(sc, b.add_constant(literal::scalar(f32, -INFINITY)), {2}, max);
    auto e =
        b.add_unary(opcode::exponential,
                    b.add_binary(opcode::subtract, sc, b.add_broadcast(m, {4, 16, 16}, {0, 1})));
    auto s0 = b.add_reduce(e, b.add_constant(literal::scalar(f32, 0)), {2}, sum);
    auto p = b.add_binary(opcode::divide, e, b.add_broadcast(s0, {4, 16, 16}, {0, 1}));
    auto ctx = b.add_dot(p, heads(v), {{0}, {2}, {0}, {1}});
    b.add_reshape(b.add_transpose(ctx, {1, 0, 2}), {16, 32});
    const std::vector<value> in = {random_value(arr({16, 32}), -1, 1),
                                   random_value(arr({16, 32}), -1, 1),
                                   random_value(arr({16, 32}), -1, 1)};
    write_split_case(root, "xla_cpu_split_attention", b.build(), {sum, max}, in);
    // Every dot a part of its own (library_dots), here still called as a kLoop fusion.
    xla_cpu_options dots;
    dots.library_dots = true;
    write_split_case(root, "xla_cpu_split_attention_lone_dots", b.build(), {sum, max}, in, dots);
  }
  {
    // A dot with a gelu-like epilogue reading it twice, a reshape of an intermediate on the root's
    // path, an unfoldable transpose of an intermediate, a concatenate of intermediates.
    computation_builder b("mlp_group");
    auto x = b.add_parameter(arr({8, 16}), "x");
    auto w = b.add_parameter(arr({16, 24}), "w");
    auto h = b.add_dot(x, w, {{}, {1}, {}, {0}});
    auto g = b.add_binary(opcode::multiply, h, b.add_unary(opcode::tanh, h));
    auto r = b.add_reshape(b.add_unary(opcode::negate, g), {8, 4, 6});
    auto t = b.add_transpose(b.add_unary(opcode::exponential, x), {1, 0});
    auto c =
        b.add_concatenate({b.add_unary(opcode::negate, x), b.add_unary(opcode::exponential, x)}, 1);
    b.add_tuple({b.add_unary(opcode::abs, r),
                 b.add_unary(opcode::sqrt, b.add_unary(opcode::abs, t)),
                 b.add_unary(opcode::tanh, c)});
    write_split_case(root, "xla_cpu_split_mlp", b.build(), {},
                     {random_value(arr({8, 16}), -1, 1), random_value(arr({16, 24}), -0.3, 0.3)});
  }
  {
    // An embedding lookup with computed ids (some out of range: clamped) and a row epilogue: the
    // gather is rewritten into XLA's simplified form between reshapes.
    computation_builder b("embedding_group");
    auto table = b.add_parameter(arr({12, 8}), "table");
    auto ids = b.add_parameter(arr({2, 3}, element_type::s32), "ids");
    auto one =
        b.add_broadcast(b.add_constant(literal::scalar_int(element_type::s32, 1)), {2, 3}, {});
    auto rows = b.add_gather(table, b.add_binary(opcode::add, ids, one), {{2}, {0}, {0}, {}, {}, 2},
                             {1, 8});
    auto e = b.add_unary(opcode::exponential, rows);
    auto s0 = b.add_reduce(e, b.add_constant(literal::scalar(f32, 0)), {2}, sum);
    b.add_tuple({b.add_binary(opcode::divide, e, b.add_broadcast(s0, {2, 3, 8}, {0, 1})), rows});
    write_split_case(
        root, "xla_cpu_split_embedding", b.build(), {sum},
        {random_value(arr({12, 8}), -1, 1), random_value(arr({2, 3}, element_type::s32), -3, 14)});
  }
  {
    // argmax of exp(x), its index converted: the variadic reduce a part of its own with a tuple
    // root, its results read by get-tuple-element in the entry.
    const module ix = testing::indexing_module();
    const computation& argmax = ix.get("argmax");
    computation_builder b("argmax_group");
    auto x = b.add_parameter(arr({4, 10}), "x");
    auto io = b.add_iota(arr({4, 10}, element_type::s32), 1);
    auto r = b.add_reduce({b.add_unary(opcode::exponential, x), io},
                          {b.add_constant(literal::scalar(f32, -INFINITY)),
                           b.add_constant(literal::scalar_int(element_type::s32, 0))},
                          {1}, argmax);
    auto i = b.add_get_tuple_element(r, 1);
    b.add_tuple({b.add_convert(i, f32), i});
    write_split_case(root, "xla_cpu_split_argmax", b.build(), {argmax},
                     {random_value(arr({4, 10}), -2, 2)});
  }
  {
    // A decode step: a row written into the cache at pos, a window read back at pos - 1.
    computation_builder b("decode_group");
    auto cache = b.add_parameter(arr({8, 4}), "cache");
    auto row = b.add_parameter(arr({1, 4}), "row");
    auto pos = b.add_parameter(arr({}, element_type::s32), "pos");
    auto zero = b.add_constant(literal::scalar_int(element_type::s32, 0));
    auto u = b.add_dynamic_update_slice(cache, b.add_unary(opcode::tanh, row), {pos, zero});
    auto back = b.add_binary(opcode::subtract, pos,
                             b.add_constant(literal::scalar_int(element_type::s32, 1)));
    b.add_tuple({u, b.add_unary(opcode::negate, b.add_dynamic_slice(u, {back, zero}, {3, 4}))});
    write_split_case(root, "xla_cpu_split_decode", b.build(), {},
                     {random_value(arr({8, 4}), -1, 1), random_value(arr({1, 4}), -1, 1),
                      random_value(arr({}, element_type::s32), 5, 9)});
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::cerr << "usage: " << argv[0] << " <cases dir> [<random dir> <count>]\n";
    return 2;
  }
  if (argc == 4) {
    const fs::path dir = argv[2];
    fs::create_directories(dir);
    const int count = std::stoi(argv[3]);
    for (int k = 0; k < count; ++k) {
      const module m = testing::random_module_generator(static_cast<std::uint64_t>(k)).generate();
      std::ofstream(dir / ("r" + std::to_string(k) + ".hlo")) << to_text(m);
      std::ofstream(dir / ("r" + std::to_string(k) + ".mlir")) << to_stablehlo(m);
    }
    std::cout << "wrote " << count << " random modules to " << dir.string() << "\n";
  }
  const fs::path root = argv[1];
  fs::create_directories(root);
  const shape s35 = arr({3, 5});

  // Every elementwise unary op, on inputs inside its domain.
  for (opcode op : all_opcodes) {
    if (!is_elementwise_unary(op) || op == opcode::convert || is_logical(op)) continue;
    double lo = -3, hi = 3;
    if (op == opcode::log || op == opcode::sqrt || op == opcode::rsqrt) lo = 0.1;
    if (op == opcode::log_plus_one) lo = -0.5;
    computation_builder b("main");
    b.add_unary(op, b.add_parameter(s35, "x"));
    write_case(root, "unary_" + std::string(to_string(op)), single("unary", b.build()),
               {random_value(s35, lo, hi, 0)});
  }
  // Every elementwise binary op.
  for (opcode op : {opcode::add, opcode::subtract, opcode::multiply, opcode::divide,
                    opcode::maximum, opcode::minimum, opcode::power, opcode::remainder}) {
    computation_builder b("main");
    auto x = b.add_parameter(s35, "x");
    b.add_binary(op, x, b.add_parameter(s35, "y"));
    const bool positive = op == opcode::power || op == opcode::divide || op == opcode::remainder;
    write_case(root, "binary_" + std::string(to_string(op)), single("binary", b.build()),
               {random_value(s35, positive ? 0.5 : -3, positive ? 2 : 3),
                random_value(s35, positive ? 0.5 : -3, positive ? 2 : 3)});
  }
  // Logical ops on pred.
  const shape p35 = arr({3, 5}, element_type::pred);
  for (opcode op : {opcode::and_, opcode::or_, opcode::xor_, opcode::not_}) {
    computation_builder b("main");
    auto x = b.add_parameter(p35, "x");
    auto y = b.add_parameter(p35, "y");
    if (op == opcode::not_)
      b.add_unary(op, x);
    else
      b.add_binary(op, x, y);
    write_case(root, "logical_" + std::string(to_string(op)), single("logical", b.build()),
               {random_value(p35, 0, 1), random_value(p35, 0, 1)});
  }
  // compare in every direction feeding select; values on a 0.5 grid so some are equal.
  for (auto d : {comparison_direction::eq, comparison_direction::ne, comparison_direction::lt,
                 comparison_direction::le, comparison_direction::gt, comparison_direction::ge}) {
    computation_builder b("main");
    auto x = b.add_parameter(s35, "x");
    auto y = b.add_parameter(s35, "y");
    b.add_select(b.add_compare(x, y, d), x, y);
    write_case(root, "compare_select_" + std::string(to_string(d)),
               single("compare_select", b.build()),
               {random_value(s35, -1, 1, 0.5), random_value(s35, -1, 1, 0.5)});
  }
  {
    computation_builder b("main");
    auto x = b.add_parameter(s35, "x");
    b.add_clamp(b.add_constant(literal::scalar(f32, -0.5)), x,
                b.add_constant(literal::scalar(f32, 0.75)));
    write_case(root, "clamp", single("clamp", b.build()), {random_value(s35, -2, 2)});
  }
  // dot: plain matmul, batched (attention-style), bf16 operands with an f32 result.
  {
    computation_builder b("main");
    auto a = b.add_parameter(arr({4, 8}),
                             "a");  // separate statements: parameter numbers follow this order
    b.add_dot(a, b.add_parameter(arr({8, 5}), "b"), {{}, {1}, {}, {0}});
    write_case(root, "dot_matmul", single("dot", b.build()),
               {random_value(arr({4, 8}), -1, 1), random_value(arr({8, 5}), -1, 1)});
  }
  {
    computation_builder b("main");
    auto q = b.add_parameter(arr({2, 3, 4}), "q");
    b.add_dot(q, b.add_parameter(arr({2, 5, 4}), "k"), {{0}, {2}, {0}, {2}});
    write_case(root, "dot_batch", single("dot_batch", b.build()),
               {random_value(arr({2, 3, 4}), -1, 1), random_value(arr({2, 5, 4}), -1, 1)});
  }
  {
    const element_type bf = element_type::bf16;
    computation_builder b("main");
    auto a = b.add_parameter(arr({4, 16}, bf), "a");
    b.add_dot(a, b.add_parameter(arr({16, 8}, bf), "b"), {{}, {1}, {}, {0}}, f32);
    write_case(root, "dot_bf16_to_f32", single("dot_bf16", b.build()),
               {random_value(arr({4, 16}, bf), -1, 1), random_value(arr({16, 8}, bf), -1, 1)});
  }
  {
    computation_builder b("main");
    b.add_broadcast(b.add_parameter(arr({3}), "x"), {2, 3, 4}, {1});
    write_case(root, "broadcast", single("broadcast", b.build()), {random_value(arr({3}), -1, 1)});
  }
  {
    computation sum = make_scalar_computation("sum", opcode::add, f32);
    computation mx = make_scalar_computation("max", opcode::maximum, f32);
    computation_builder b("main");
    auto x = b.add_parameter(arr({2, 3, 4}), "x");
    auto r1 = b.add_reduce(x, b.add_constant(literal::scalar(f32, 0)), {1}, sum);
    auto r2 = b.add_reduce(x, b.add_constant(literal::scalar(f32, -INFINITY)), {0, 2}, mx);
    b.add_tuple({r1, r2});
    write_case(root, "reduce_sum_max", single("reduce", b.build(), {sum, mx}),
               {random_value(arr({2, 3, 4}), -2, 2)});
  }
  {
    computation_builder b("main");
    b.add_transpose(b.add_parameter(arr({2, 3, 4}), "x"), {2, 0, 1});
    write_case(root, "transpose", single("transpose", b.build()),
               {random_value(arr({2, 3, 4}), -1, 1)});
  }
  {
    computation_builder b("main");
    b.add_reshape(b.add_parameter(arr({2, 3, 4}), "x"), {6, 4});
    write_case(root, "reshape", single("reshape", b.build()),
               {random_value(arr({2, 3, 4}), -1, 1)});
  }
  {
    computation_builder b("main");
    b.add_slice(b.add_parameter(arr({6, 8}), "x"), {{1, 5, 2}, {0, 8, 3}});
    write_case(root, "slice_strided", single("slice", b.build()),
               {random_value(arr({6, 8}), -1, 1)});
  }
  {
    computation_builder b("main");
    auto a = b.add_parameter(arr({2, 3}), "a");
    auto c = b.add_parameter(arr({2, 1}), "b");
    b.add_concatenate({a, c, b.add_parameter(arr({2, 2}), "c")}, 1);
    write_case(root, "concatenate", single("concatenate", b.build()),
               {random_value(arr({2, 3}), -1, 1), random_value(arr({2, 1}), -1, 1),
                random_value(arr({2, 2}), -1, 1)});
  }
  {
    computation_builder b("main");
    auto x = b.add_parameter(s35, "x");
    auto viabf = b.add_convert(b.add_convert(x, element_type::bf16), f32);
    auto viaf16 = b.add_convert(b.add_convert(x, element_type::f16), f32);
    auto toint = b.add_convert(x, element_type::s32);
    auto back = b.add_convert(toint, f32);
    auto p = b.add_convert(b.add_convert(x, element_type::pred), f32);
    b.add_tuple({viabf, viaf16, toint, back, p});
    write_case(root, "convert", single("convert", b.build()),
               {random_value(s35, -40.3, 40.3, 0.0)});
  }
  {
    computation_builder b("main");
    auto i = b.add_iota(arr({4, 5}, element_type::s32), 1);
    auto fi = b.add_convert(b.add_iota(arr({4, 5}), 0), f32);
    b.add_tuple({i, b.add_binary(opcode::add, fi, b.add_parameter(arr({4, 5}), "x"))});
    write_case(root, "iota", single("iota", b.build()), {random_value(arr({4, 5}), -1, 1)});
  }
  {
    computation_builder f("fused_exp_mul");
    auto fa = f.add_parameter(s35, "a");
    f.add_binary(opcode::multiply, f.add_unary(opcode::exponential, fa), f.add_parameter(s35, "b"));
    computation fused = f.build();
    computation_builder g("negate_all");
    g.add_unary(opcode::negate, g.add_parameter(s35, "v"));
    computation callee = g.build();
    computation_builder b("main");
    auto x = b.add_parameter(s35, "x");
    auto y = b.add_parameter(s35, "y");
    auto fu = b.add_fusion({x, y}, fused, fusion_kind::loop);
    auto t = b.add_tuple({b.add_call({fu}, callee), fu});
    b.add_get_tuple_element(t, 0);
    write_case(root, "fusion_call_tuple", single("fusion_call", b.build(), {fused, callee}),
               {random_value(s35, -1, 1), random_value(s35, -1, 1)});
  }
  write_case(root, "softmax", testing::softmax_module(), {random_value(arr({2, 4}), -3, 3)});
  {
    module m = testing::attention_scores_module();
    write_case(root, "attention_scores_masked", m,
               {random_value(arr({2, 3, 4}), -1, 1), random_value(arr({2, 3, 4}), -1, 1)});
  }
  write_case(root, "misc_constants_fusion_call", testing::misc_module(),
             {random_value(arr({2, 3}), -1, 1)});
  // Gather (ids out of range on both sides: clamped), a cache row written and a window read at a
  // position past the end (clamped), argmax over it; the cache donated to the output.
  write_case(
      root, "indexing_gather_dynamic_slices_argmax", testing::indexing_module(),
      {random_value(arr({10, 4}), -1, 1), value{arr({3}, element_type::s32), {-2, 4, 11}, {}},
       random_value(arr({8, 4}), -1, 1), value{arr({}, element_type::s32), {7}, {}}});

  // Sharded over 8 devices through the SPMD partitioner.
  {
    computation_builder b("main");
    auto x = b.add_parameter(arr({16, 32}), "x");
    auto w = b.add_parameter(arr({32, 64}), "w");
    b.set_sharding(x, sharding::tiled({8, 1}));
    b.set_sharding(w, sharding::replicated());
    auto d = b.add_dot(x, w, {{}, {1}, {}, {0}});
    b.set_sharding(d, sharding::tiled({8, 1}));
    write_case(root, "sharded_dot_rows", single("sharded_dot_rows", b.build()),
               {random_value(arr({16, 32}), -1, 1), random_value(arr({32, 64}), -1, 1)}, 8);
  }
  {
    // Megatron MLP: w1 split by columns, w2 by rows; the partitioner inserts the all-reduce.
    computation_builder b("main");
    auto x = b.add_parameter(arr({8, 32}), "x");
    auto w1 = b.add_parameter(arr({32, 64}), "w1");
    auto w2 = b.add_parameter(arr({64, 32}), "w2");
    b.set_sharding(x, sharding::replicated());
    b.set_sharding(w1, sharding::tiled({1, 8}));
    b.set_sharding(w2, sharding::tiled({8, 1}));
    auto h = b.add_unary(opcode::tanh, b.add_dot(x, w1, {{}, {1}, {}, {0}}));
    b.set_sharding(h, sharding::tiled({1, 8}));
    auto y = b.add_dot(h, w2, {{}, {1}, {}, {0}});
    b.set_sharding(y, sharding::replicated());
    write_case(root, "sharded_megatron_mlp", single("sharded_megatron_mlp", b.build()),
               {random_value(arr({8, 32}), -1, 1), random_value(arr({32, 64}), -0.5, 0.5),
                random_value(arr({64, 32}), -0.5, 0.5)},
               8);
  }
  {
    // Attention heads split over devices: batch dim of a batched dot.
    computation_builder b("main");
    auto q = b.add_parameter(arr({8, 4, 16}), "q");
    auto k = b.add_parameter(arr({8, 4, 16}), "k");
    b.set_sharding(q, sharding::tiled({8, 1, 1}));
    b.set_sharding(k, sharding::tiled({8, 1, 1}));
    auto s = b.add_dot(q, k, {{0}, {2}, {0}, {2}});
    b.set_sharding(s, sharding::tiled({8, 1, 1}));
    write_case(root, "sharded_heads_batch_dot", single("sharded_heads", b.build()),
               {random_value(arr({8, 4, 16}), -1, 1), random_value(arr({8, 4, 16}), -1, 1)}, 8);
  }
  write_split_cases(root);
  std::cout << "wrote " << case_count << " cases to " << root.string() << "\n";
  return 0;
}
