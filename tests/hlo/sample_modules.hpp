#pragma once
// Small hand-built modules shared by the printer, parser and StableHLO tests.

#include <cmath>

#include "fusedsl/hlo/builder.hpp"

namespace fusedsl::hlo::testing {

// Row softmax of x: f32[2,4], with a -inf max-reduction init.
inline module softmax_module() {
  const element_type f32 = element_type::f32;
  module m;
  m.name = "softmax";
  const computation mx = make_scalar_computation("max", opcode::maximum, f32);
  const computation sum = make_scalar_computation("sum", opcode::add, f32);
  m.add_computation(mx);
  m.add_computation(sum);
  computation_builder b("main");
  auto x = b.add_parameter(shape::array(f32, {2, 4}), "x");
  auto ninf = b.add_constant(literal::scalar(f32, -INFINITY));
  auto rmax = b.add_reduce(x, ninf, {1}, mx);
  auto centered = b.add_binary(opcode::subtract, x, b.add_broadcast(rmax, {2, 4}, {0}));
  auto e = b.add_unary(opcode::exponential, centered);
  auto zero = b.add_constant(literal::scalar(f32, 0));
  auto rsum = b.add_reduce(e, zero, {1}, sum);
  b.add_binary(opcode::divide, e, b.add_broadcast(rsum, {2, 4}, {0}));
  m.set_entry(b.build());
  return m;
}

// Causal attention scores over 2 heads, sharded by head, with a tuple root.
inline module attention_scores_module() {
  const element_type f32 = element_type::f32;
  module m;
  m.name = escape_identifier("attention scores");
  computation_builder b("main");
  auto q = b.add_parameter(shape::array(f32, {2, 3, 4}), "q");
  auto k = b.add_parameter(shape::array(f32, {2, 3, 4}), "k");
  b.set_sharding(q, sharding::tiled({2, 1, 1}));
  b.set_sharding(k, sharding::tiled_devices({2, 1, 1}, {1, 0}));
  auto s = b.add_dot(q, k, {{0}, {2}, {0}, {2}});
  auto scale = b.add_broadcast(b.add_constant(literal::scalar(f32, 0.5)), {2, 3, 3}, {});
  auto scaled = b.add_binary(opcode::multiply, s, scale);
  auto row = b.add_iota(shape::array(element_type::s32, {3, 3}), 0);
  auto col = b.add_iota(shape::array(element_type::s32, {3, 3}), 1);
  auto causal = b.add_compare(row, col, comparison_direction::ge);
  auto mask = b.add_broadcast(causal, {2, 3, 3}, {1, 2});
  auto ninf = b.add_broadcast(b.add_constant(literal::scalar(f32, -INFINITY)), {2, 3, 3}, {});
  auto masked = b.add_select(mask, scaled, ninf);
  b.set_sharding(masked, sharding::replicated());
  auto t = b.add_tuple({masked, s});
  b.set_sharding(t, sharding::make_tuple({sharding::replicated(), sharding::maximal(0)}));
  m.set_entry(b.build(t));
  return m;
}

// Constants of every element type, slice/concatenate/convert/transpose/reshape, a fusion and a
// call, names that need escaping and an op_name that needs quoting.
inline module misc_module() {
  const element_type f32 = element_type::f32;
  module m;
  m.name = "misc";
  computation_builder f("fused exp*y");
  auto fa = f.add_parameter(shape::array(f32, {2, 3}), "a");
  auto fb = f.add_parameter(shape::array(f32, {2, 3}), "b");
  f.add_binary(opcode::multiply, f.add_unary(opcode::exponential, fa), fb);
  const std::string fused = m.add_computation(f.build());
  computation_builder g("negate all");
  g.add_unary(opcode::negate, g.add_parameter(shape::array(f32, {3, 2}), "v"));
  m.add_computation(g.build());

  computation_builder b("main");
  auto x = b.add_parameter(shape::array(f32, {2, 3}), "input \"x\"/0");
  auto c = b.add_constant(
      literal::array(shape::array(f32, {2, 3}), {1, -2.5, 1e-7, INFINITY, -INFINITY, NAN}));
  auto p = b.add_constant(literal::array(shape::array(element_type::pred, {2}), {1, 0}));
  auto i = b.add_constant(
      literal::array_int(shape::array(element_type::s64, {2}), {-(std::int64_t{1} << 40), 7}));
  auto h = b.add_constant(literal::scalar(element_type::f16, 0.1));
  auto bf = b.add_constant(literal::scalar(element_type::bf16, 3.14159));
  (void)p, (void)i, (void)h, (void)bf;
  auto fu = b.add_fusion({x, c}, m.get(fused), fusion_kind::loop, "f32");
  auto sl = b.add_slice(fu, {{0, 2, 1}, {0, 3, 2}});
  auto cat = b.add_concatenate({sl, sl}, 1);
  auto cv = b.add_convert(cat, element_type::bf16);
  auto back = b.add_convert(cv, f32);
  auto tr = b.add_transpose(fu, {1, 0});
  auto called = b.add_call({tr}, m.get("negate_all"));
  auto rs = b.add_reshape(called, {6});
  b.set_op_name(rs, "model/flatten");
  auto t = b.add_tuple({back, rs});
  b.add_get_tuple_element(t, 1);
  m.set_entry(b.build());
  return m;
}

// A decode step's indexing: an embedding lookup (gather), a cache row written at a run-time
// position (dynamic-update-slice, the cache donated to the output), a window read back
// (dynamic-slice) and argmax over it (a variadic reduce of value and iota).
inline module indexing_module() {
  const element_type f32 = element_type::f32, s32 = element_type::s32;
  module m;
  m.name = "indexing";
  computation_builder c("argmax");
  auto a = c.add_parameter(shape::scalar(f32), "a");
  auto ia = c.add_parameter(shape::scalar(s32), "ia");
  auto v = c.add_parameter(shape::scalar(f32), "b");
  auto iv = c.add_parameter(shape::scalar(s32), "ib");
  auto gt = c.add_compare(a, v, comparison_direction::gt);
  c.add_tuple({c.add_select(gt, a, v), c.add_select(gt, ia, iv)});
  const std::string argmax = m.add_computation(c.build());

  computation_builder b("main");
  auto table = b.add_parameter(shape::array(f32, {10, 4}), "table");
  auto ids = b.add_parameter(shape::array(s32, {3}), "ids");
  auto cache = b.add_parameter(shape::array(f32, {8, 4}), "cache");
  auto pos = b.add_parameter(shape::scalar(s32), "pos");
  auto rows = b.add_gather(table, ids, {{1}, {0}, {0}, {}, {}, 1}, {1, 4});
  auto zero = b.add_constant(literal::scalar_int(s32, 0));
  auto updated = b.add_dynamic_update_slice(cache, rows, {pos, zero});
  auto window = b.add_dynamic_slice(updated, {pos, zero}, {2, 4});
  auto io = b.add_iota(shape::array(s32, {2, 4}), 1);
  auto ninf = b.add_constant(literal::scalar(f32, -INFINITY));
  auto best = b.add_reduce({window, io}, {ninf, zero}, {1}, m.get(argmax));
  auto index = b.add_get_tuple_element(best, 1);
  m.set_entry(b.build(b.add_tuple({updated, index})));
  m.input_output_alias = {{{0}, 2, {}, false}};
  return m;
}

}  // namespace fusedsl::hlo::testing
