#pragma once
// The TPU-style scheduler: grouping, tiling and planning each kernel.
// The bodies of fusedsl/tpu/schedule.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/tpu/schedule.hpp"

namespace fusedsl::tpu {

namespace detail {

inline std::int64_t elems(const hlo::shape& s) { return s.is_tuple() ? 0 : s.element_count(); }

// rows x cols of a value as the VPU sees it: last dim on lanes, the rest on sublanes.
inline std::pair<std::int64_t, std::int64_t> rows_cols(const hlo::shape& s) {
  if (s.is_tuple() || s.dims.empty()) return {1, 1};
  const std::int64_t cols = s.dims.back();
  return {cols == 0 ? 0 : s.element_count() / cols, cols};
}

// The node whose bytes a reader of `id` actually loads: through broadcast/reshape to their source.
inline std::size_t materialized_source(const flat_graph& g, std::size_t id) {
  while (g.op(id) == hlo::opcode::broadcast || g.op(id) == hlo::opcode::reshape)
    id = g.nodes[id].operands.at(0);
  return id;
}

FUSEDSL_DECL std::int64_t source_bytes(const flat_graph& g, std::size_t id) {
  const std::size_t s = materialized_source(g, id);
  const auto op = g.op(s);
  if (op == hlo::opcode::constant && elems(g.shape(s)) <= 1) return 0;
  if (op == hlo::opcode::iota) return 0;
  return g.shape(s).byte_count();
}

// VPU cycles per vreg of a reduce's inputs: the weights of the ops of its to_apply (1 for a sum
// or max; an argmax comparator's compares, selects and logical ops each count).
FUSEDSL_DECL double reducer_weight(const hlo::module& m, const hlo::instruction& r) {
  double w = 0;
  for (const auto& x : m.get(r.called_computation).instructions)
    if (x.opcode != hlo::opcode::parameter && x.opcode != hlo::opcode::constant &&
        x.opcode != hlo::opcode::tuple)
      w += vpu_op_weight(x.opcode);
  return std::max(w, 1.0);
}

inline double node_vpu_cycles(const flat_graph& g, std::size_t id, const chip_spec& chip) {
  const auto& in = *g.nodes[id].inst;
  if (is_layout_op(in.opcode) || in.opcode == hlo::opcode::dot || is_row_copy(in.opcode)) return 0;
  // Reductions and transposes touch every input element; others every output element.
  const hlo::shape& s = (in.opcode == hlo::opcode::reduce || in.opcode == hlo::opcode::transpose)
                            ? g.shape(g.nodes[id].operands.at(0))
                            : in.shape;
  if (s.is_tuple()) return 0;
  auto [r, c] = rows_cols(s);
  const double weight =
      in.opcode == hlo::opcode::reduce ? reducer_weight(*g.module, in) : vpu_op_weight(in.opcode);
  return vpu_tile_cycles(r, c, int(byte_size(s.type)), chip) * weight;
}

// Bytes a kernel reads of its input `input`: the rows its gathers and dynamic slices copy when
// those are its only readers of it (operand 0), else the whole array.
inline std::int64_t input_bytes(const flat_graph& g, const kernel_group& grp, std::size_t input) {
  const std::int64_t whole = source_bytes(g, input);
  std::int64_t rows = 0;
  bool only_rows = true;
  for (auto id : grp.nodes) {
    if (is_layout_op(g.op(id))) continue;  // a reshape or broadcast passes its readers through
    const auto& ops = g.nodes[id].operands;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      if (materialized_source(g, ops[k]) != input) continue;
      const auto op = g.op(id);
      if (k == 0 && (op == hlo::opcode::gather || op == hlo::opcode::dynamic_slice))
        rows += g.shape(id).byte_count();
      else
        only_rows = false;
    }
  }
  return only_rows && rows > 0 ? std::min(rows, whole) : whole;
}

// Can dynamic-update-slice `dus` write its update into its operand's buffer? When that buffer
// has no other reader and is an intermediate, or an entry parameter the module donates to an
// output (input_output_alias, as jax's donate_argnums). A broadcast or constant has no buffer.
inline bool updates_in_place(const flat_graph& g, std::size_t dus,
                             const std::vector<std::size_t>& users) {
  std::size_t o = g.nodes[dus].operands.at(0);
  while (g.op(o) == hlo::opcode::reshape && users[o] == 1) o = g.nodes[o].operands.at(0);
  if (users[o] != 1) return false;
  if (g.op(o) == hlo::opcode::parameter) {
    for (const auto& a : g.module->input_output_alias)
      if (a.parameter_number == g.nodes[o].input_number && a.parameter_index.empty()) return true;
    return false;
  }
  return !is_layout_op(g.op(o));
}

// The buffer a dynamic-update-slice updates (through reshapes).
inline std::size_t updated_buffer(const flat_graph& g, std::size_t dus) {
  return materialized_source(g, g.nodes[dus].operands.at(0));
}

inline std::vector<std::size_t> user_counts(const flat_graph& g) {
  std::vector<std::size_t> users(g.nodes.size(), 0);
  for (const auto& n : g.nodes)
    for (auto o : n.operands) ++users[o];
  ++users[g.root];
  return users;
}

inline bool is_int8(hlo::element_type t) {
  return t == hlo::element_type::s8 || t == hlo::element_type::u8;
}

inline matmul_problem dot_problem(const flat_graph& g, std::size_t dot, int f32_passes,
                                  int int8_rate) {
  const auto& in = *g.nodes[dot].inst;
  const auto& a = g.shape(g.nodes[dot].operands.at(0));
  const auto& b = g.shape(g.nodes[dot].operands.at(1));
  const auto& dn = *in.dot;
  matmul_problem p;
  std::int64_t batch = 1, k = 1, m = 1, n = 1;
  std::vector<bool> used_a(a.dims.size(), false), used_b(b.dims.size(), false);
  for (auto d : dn.lhs_batch) batch *= a.dims.at(std::size_t(d)), used_a[std::size_t(d)] = true;
  for (auto d : dn.lhs_contracting) k *= a.dims.at(std::size_t(d)), used_a[std::size_t(d)] = true;
  for (auto d : dn.rhs_batch) used_b[std::size_t(d)] = true;
  for (auto d : dn.rhs_contracting) used_b[std::size_t(d)] = true;
  for (std::size_t d = 0; d < a.dims.size(); ++d)
    if (!used_a[d]) m *= a.dims[d];
  for (std::size_t d = 0; d < b.dims.size(); ++d)
    if (!used_b[d]) n *= b.dims[d];
  p.batch = batch, p.m = m, p.k = k, p.n = n;
  p.lhs_bytes = int(byte_size(a.type));
  p.rhs_bytes = int(byte_size(b.type));
  p.out_bytes = int(byte_size(in.shape.type));
  const bool bf16 = a.type == hlo::element_type::bf16 && b.type == hlo::element_type::bf16;
  const bool int8 = is_int8(a.type) && is_int8(b.type);
  p.mxu_passes = bf16 || int8 ? 1 : f32_passes;
  p.mxu_rate = int8 ? int8_rate : 1;
  return p;
}

inline std::vector<kernel_group> group_nodes(const flat_graph& g) {
  const auto users = user_counts(g);
  std::vector<int> group_of(g.nodes.size(), -1);
  std::vector<kernel_group> groups;
  std::vector<int> fusion_group(g.fusions.size(), -1);
  std::vector<bool> open(0);
  for (std::size_t id = 0; id < g.nodes.size(); ++id) {
    const auto& node = g.nodes[id];
    const auto op = node.inst->opcode;
    if (node.hlo_fusion >= 0) {
      int& fg = fusion_group[std::size_t(node.hlo_fusion)];
      if (fg < 0) {
        groups.push_back({});
        groups.back().hlo_fusion = node.hlo_fusion;
        groups.back().output = g.fusions[std::size_t(node.hlo_fusion)].root;
        open.push_back(false);
        fg = int(groups.size() - 1);
      }
      auto& grp = groups[std::size_t(fg)];
      grp.nodes.push_back(id);
      if (op == hlo::opcode::dot) {
        grp.dots.push_back(id);
        grp.dot = grp.dots.size() == 1 ? std::optional<std::size_t>(id) : std::nullopt;
      }
      group_of[id] = fg;
      continue;
    }
    if (is_layout_op(op)) {  // its own zero-cost kernel
      groups.push_back({{id}, std::nullopt, {}, id, {}, -1});
      open.push_back(false);
      group_of[id] = int(groups.size() - 1);
      continue;
    }
    // An elementwise op joins the kernel whose last value it consumes when that value has no
    // other user and has the same shape: the dot's epilogue, or a loop-fused chain.
    if (hlo::is_elementwise(op)) {
      int join = -1;
      for (auto o : node.operands) {
        const int go = group_of[o];
        if (go < 0 || !open[std::size_t(go)]) continue;
        const auto& grp = groups[std::size_t(go)];
        if (grp.output != o || users[o] != 1 || g.shape(o).dims != node.inst->shape.dims) continue;
        // Every other operand must come from an earlier kernel (layout ops are made on demand).
        bool ordered = true;
        for (auto other : node.operands) {
          const auto src = detail::materialized_source(g, other);
          if (group_of[src] > go && !is_layout_op(g.op(src))) ordered = false;
        }
        if (ordered) {
          join = go;
          break;
        }
      }
      if (join >= 0) {
        groups[std::size_t(join)].nodes.push_back(id);
        groups[std::size_t(join)].output = id;
        group_of[id] = join;
        continue;
      }
    }
    groups.push_back({{id}, std::nullopt, {}, id, {}, -1});
    open.push_back(op == hlo::opcode::dot || hlo::is_elementwise(op) ||
                   op == hlo::opcode::reduce);
    group_of[id] = int(groups.size() - 1);
    if (op == hlo::opcode::dot) {
      auto& dg = groups.back();
      dg.dot = id;
      dg.dots = {id};
      // Prologue: a convert feeding only this dot runs on each operand block in VMEM, so the
      // dot reads the convert's source from HBM (as XLA fuses operand converts into the dot).
      std::vector<std::size_t> prologue;
      for (auto o : node.operands) {
        const int go = group_of[o];
        if (go < 0 || users[o] != 1 || g.op(o) != hlo::opcode::convert) continue;
        auto& pg = groups[std::size_t(go)];
        if (pg.hlo_fusion >= 0 || pg.nodes.size() != 1 || pg.nodes[0] != o) continue;
        pg.nodes.clear();
        prologue.push_back(o);
        group_of[o] = int(groups.size() - 1);
      }
      dg.nodes.insert(dg.nodes.begin(), prologue.begin(), prologue.end());
    }
  }
  // Drop the groups emptied by prologue fusion and renumber.
  {
    std::vector<kernel_group> kept;
    for (auto& grp : groups)
      if (!grp.nodes.empty()) kept.push_back(std::move(grp));
    groups = std::move(kept);
    for (std::size_t gi = 0; gi < groups.size(); ++gi)
      for (auto id : groups[gi].nodes) group_of[id] = int(gi);
  }
  // External inputs of each kernel, seen through layout ops.
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    auto& grp = groups[gi];
    if (grp.nodes.size() == 1 && is_layout_op(g.op(grp.nodes[0]))) continue;
    std::set<std::size_t> seen;
    for (auto id : grp.nodes)
      for (auto o : g.nodes[id].operands) {
        if (group_of[o] == int(gi)) continue;
        const auto src = materialized_source(g, o);
        if (group_of[src] == int(gi)) continue;
        if (seen.insert(src).second) grp.inputs.push_back(src);
      }
  }
  return groups;
}

}  // namespace detail

namespace detail {

// A gather, dynamic slice or dynamic update slice alone: rows copied by DMA from HBM. A gather or
// dynamic slice reads only the rows it picks (and its indices); a dynamic update slice writes its
// update in place, or copies its operand to a new buffer first.
inline kernel_plan plan_row_copy(const flat_graph& g, std::size_t id, const std::string& name,
                                 const std::vector<std::size_t>& users, const chip_spec& chip,
                                 std::int64_t budget) {
  kernel_plan kp;
  const auto op = g.op(id);
  const auto& ops = g.nodes[id].operands;
  const std::size_t first_index = op == hlo::opcode::dynamic_update_slice ? 2 : 1;
  std::int64_t in_bytes = 0, out_bytes = g.shape(id).byte_count();
  for (std::size_t k = first_index; k < ops.size(); ++k)
    in_bytes += detail::source_bytes(g, ops[k]);
  if (op == hlo::opcode::dynamic_update_slice) {
    in_bytes += detail::source_bytes(g, ops[1]);
    kp.in_place = detail::updates_in_place(g, id, users);
    if (kp.in_place)
      out_bytes = g.shape(ops[1]).byte_count();
    else
      in_bytes += detail::source_bytes(g, ops[0]);
  } else {
    in_bytes += out_bytes;
  }
  const bool in_place = kp.in_place;
  kp = plan_vector(name, in_bytes, out_bytes, 0, 0, chip, budget);
  kp.kind = kernel_kind::dma;
  kp.in_place = in_place;
  return kp;
}

// One dot with its fused prologue converts and epilogue: the MXU's blocks, sized to the budget with
// the epilogue's operands (or the blocks the options force, where they fit).
inline kernel_plan plan_dot(const flat_graph& g, const kernel_group& grp, const std::string& name,
                            const schedule_options& options, const chip_spec& chip,
                            std::int64_t budget) {
  const std::size_t dot = *grp.dot;
  auto p = detail::dot_problem(g, dot, options.f32_dot_passes, chip.int8_rate);
  p.out_bytes = int(byte_size(g.shape(grp.output).type));
  // Operands produced inside the kernel (fused converts) are read at their source's size.
  std::size_t operand_src[2];
  for (int side = 0; side < 2; ++side) {
    std::size_t o = g.nodes[dot].operands[std::size_t(side)];
    while (std::find(grp.nodes.begin(), grp.nodes.end(), o) != grp.nodes.end() &&
           !g.nodes[o].operands.empty())
      o = g.nodes[o].operands[0];
    operand_src[side] = detail::materialized_source(g, o);
    const int bytes = int(byte_size(g.shape(operand_src[side]).type));
    (side == 0 ? p.lhs_bytes : p.rhs_bytes) = bytes;
  }
  epilogue_work epi;
  const double tile_elems = double(p.batch * p.m * p.n);
  double other_cycles = 0;
  for (auto id : grp.nodes) {
    if (id == dot) continue;
    const auto& ops = g.nodes[dot].operands;
    if (grp.hlo_fusion < 0 && (id == ops[0] || id == ops[1])) {  // prologue convert
      (id == ops[0] ? epi.lhs_prologue_ops : epi.rhs_prologue_ops) += vpu_op_weight(g.op(id));
      continue;
    }
    other_cycles += detail::node_vpu_cycles(g, id, chip);
  }
  auto [r, c] = detail::rows_cols(g.shape(dot));
  const double out_cycles = vpu_tile_cycles(r, c, 4, chip);
  epi.vpu_ops_per_element = out_cycles > 0 ? other_cycles / out_cycles : 0;
  const auto lhs_src = operand_src[0], rhs_src = operand_src[1];
  for (auto in : grp.inputs) {
    if (in == lhs_src || in == rhs_src) continue;
    const auto bytes = detail::source_bytes(g, in);
    if (bytes == 0) continue;
    const auto n_el = detail::elems(g.shape(in));
    const int bpe = int(byte_size(g.shape(in).type));
    if (n_el == p.n) epi.column_operand_bytes += bpe;
    else if (n_el == p.m) epi.row_operand_bytes += bpe;
    else if (double(n_el) >= tile_elems) epi.full_operand_bytes += bpe;
    else epi.column_operand_bytes += bpe;  // small operands: read once per tile column
  }
  matmul_blocks b;
  bool forced = false;
  if (options.blocks) {
    try {
      check_blocks(p, *options.blocks, chip);
      forced = vmem_footprint(p, *options.blocks, epi) <= budget;
    } catch (const tpu_error&) {
      forced = false;
    }
  }
  b = forced ? *options.blocks : choose_blocks(p, chip, budget, epi);
  return plan_matmul(name, p, b, chip, epi);
}

}  // namespace detail

FUSEDSL_DECL schedule make_schedule(const hlo::module& m, const chip_spec& chip,
                                    schedule_options options) {
  validate(chip);
  schedule s;
  s.chip = chip;
  s.options = options;
  s.graph = flatten(m);
  const flat_graph& g = s.graph;
  const std::int64_t budget =
      options.vmem_budget > 0 ? std::min(options.vmem_budget, chip.vmem_bytes_per_core)
                              : chip.vmem_bytes_per_core;
  s.groups = detail::group_nodes(g);
  const auto users = detail::user_counts(g);
  for (const auto& grp : s.groups) {
    const std::string name = grp.hlo_fusion >= 0 ? g.fusions[std::size_t(grp.hlo_fusion)].name
                                                 : g.nodes[grp.output].name;
    kernel_plan kp;
    if (grp.nodes.size() == 1 && is_layout_op(g.op(grp.nodes[0]))) {
      kp.name = name;
      kp.kind = kernel_kind::layout;
      kp.steps.push_back({});
    } else if (grp.nodes.size() == 1 && is_row_copy(g.op(grp.nodes[0]))) {
      kp = detail::plan_row_copy(g, grp.nodes[0], name, users, chip, budget);
    } else if (grp.dots.size() > 1) {
      // Several dots in one HLO fusion: HBM sees only the fusion's inputs and output; each dot
      // runs on the MXU in its own blocks, sized to half the budget (the rest streams the data).
      std::int64_t in_bytes = 0;
      for (auto in : grp.inputs) in_bytes += detail::source_bytes(g, in);
      const auto out_bytes = g.shape(grp.output).byte_count();
      double vpu = 0, mxu = 0, mm_flops = 0;
      std::int64_t dot_vmem = 0;
      std::vector<matmul_problem> probs;
      std::vector<matmul_blocks> blks;
      for (auto id : grp.nodes) {
        if (g.op(id) != hlo::opcode::dot) {
          vpu += detail::node_vpu_cycles(g, id, chip);
          continue;
        }
        const auto p = detail::dot_problem(g, id, options.f32_dot_passes, chip.int8_rate);
        const auto b = choose_blocks(p, chip, budget / 2);
        const auto gr = grid_of(p, b);
        mxu += padded_macs(p, b) / chip.mxu_macs_per_cycle();
        vpu += double(p.batch * gr.gm * gr.gn * gr.gk) * vpu_tile_cycles(b.bm, b.bn, 4, chip);
        mm_flops += 2.0 * useful_macs(p);
        dot_vmem = std::max(dot_vmem, vmem_footprint(p, b));
        probs.push_back(p);
        blks.push_back(b);
      }
      kp = plan_vector(name, in_bytes, out_bytes, vpu, mm_flops, chip, budget / 2);
      kp.kind = kernel_kind::fused;
      for (auto& st : kp.steps) st.mxu_cycles = mxu / double(kp.steps.size());
      kp.vmem_bytes += dot_vmem;
      kp.dot_nodes = grp.dots;
      kp.dot_problems = std::move(probs);
      kp.dot_blocks = std::move(blks);
    } else if (grp.dot) {
      kp = detail::plan_dot(g, grp, name, options, chip, budget);
    } else {
      // An HLO fusion whose root is a dynamic-update-slice writes only the update when the
      // buffer it updates may be reused; its gathers and dynamic slices read only their rows.
      const bool dus_root = g.op(grp.output) == hlo::opcode::dynamic_update_slice;
      const bool in_place = dus_root && detail::updates_in_place(g, grp.output, users);
      std::int64_t in_bytes = 0;
      for (auto in : grp.inputs)
        if (!(in_place && in == detail::updated_buffer(g, grp.output)))
          in_bytes += detail::input_bytes(g, grp, in);
      const auto out_bytes = in_place ? g.shape(g.nodes[grp.output].operands[1]).byte_count()
                                      : g.shape(grp.output).byte_count();
      double cycles = 0, flops = 0;
      for (auto id : grp.nodes) {
        cycles += detail::node_vpu_cycles(g, id, chip);
        if (!is_layout_op(g.op(id)) && !is_row_copy(g.op(id)))
          flops += double(detail::elems(g.shape(id)));
      }
      kp = plan_vector(name, in_bytes, out_bytes, cycles, flops, chip, budget);
      kp.in_place = in_place;
    }
    for (auto id : grp.nodes) kp.ops.push_back(g.nodes[id].name);
    s.kernels.push_back(std::move(kp));
  }
  s.tl = simulate(s.kernels, chip);
  return s;
}

}  // namespace fusedsl::tpu
