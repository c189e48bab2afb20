#pragma once
// From an HLO module to a schedule on a chip model: ops grouped into kernels (a dot with its
// elementwise epilogue, chains of elementwise ops, single reductions/transposes/copies, HLO
// fusions kept whole), each kernel planned in grid steps, and the whole run simulated.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fusedsl/hlo/ir.hpp"
#include "fusedsl/tpu/chip.hpp"
#include "fusedsl/tpu/graph.hpp"
#include "fusedsl/tpu/pipeline.hpp"
#include "fusedsl/tpu/plan.hpp"
#include "fusedsl/tpu/tiling.hpp"

namespace fusedsl::tpu {

struct schedule_options {
  std::int64_t vmem_budget = 0;  // bytes for one kernel's buffers; 0: the chip's VMEM per core
  int f32_dot_passes = 6;              // bf16 MXU passes per f32 product (6: precision HIGHEST)
  std::optional<matmul_blocks> blocks; // force these blocks on every dot that accepts them
};

// Layout-only ops: no data moves (reshape is a bitcast in row-major) or the value is made inside
// its consumers (broadcast, iota, constant), as XLA does.
inline bool is_layout_op(hlo::opcode op) {
  using hlo::opcode;
  return op == opcode::parameter || op == opcode::constant || op == opcode::broadcast ||
         op == opcode::reshape || op == opcode::iota || op == opcode::tuple;
}

// VPU cycles per vreg of results: 1 for ALU ops; transcendentals go through the EUP, which
// issues one every 2 cycles; erf and power are built from several of those (assumption).
inline double vpu_op_weight(hlo::opcode op) {
  using hlo::opcode;
  switch (op) {
    case opcode::exponential:
    case opcode::exponential_minus_one:
    case opcode::log:
    case opcode::log_plus_one:
    case opcode::sqrt:
    case opcode::rsqrt:
    case opcode::tanh:
    case opcode::logistic:
    case opcode::cosine:
    case opcode::sine: return 2;
    case opcode::divide: return 3;
    case opcode::erf:
    case opcode::power: return 8;
    default: return 1;
  }
}

// One kernel's members in the flat graph.
struct kernel_group {
  std::vector<std::size_t> nodes;     // in topological order
  std::optional<std::size_t> dot;     // matmul kernels
  std::vector<std::size_t> dots;      // every dot in the kernel (several in a fused kernel)
  std::size_t output = 0;             // the node whose value leaves the kernel
  std::vector<std::size_t> inputs;    // external nodes read (through layout ops)
  int hlo_fusion = -1;
};

struct schedule {
  chip_spec chip;
  schedule_options options;
  flat_graph graph;
  std::vector<kernel_group> groups;
  std::vector<kernel_plan> kernels;   // kernels[i] plans groups[i]
  timeline tl;
};

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

inline std::int64_t source_bytes(const flat_graph& g, std::size_t id) {
  const std::size_t s = materialized_source(g, id);
  const auto op = g.op(s);
  if (op == hlo::opcode::constant && elems(g.shape(s)) <= 1) return 0;
  if (op == hlo::opcode::iota) return 0;
  return g.shape(s).byte_count();
}

inline double node_vpu_cycles(const flat_graph& g, std::size_t id, const chip_spec& chip) {
  const auto& in = *g.nodes[id].inst;
  if (is_layout_op(in.opcode) || in.opcode == hlo::opcode::dot) return 0;
  // Reductions and transposes touch every input element; others every output element.
  const hlo::shape& s = (in.opcode == hlo::opcode::reduce || in.opcode == hlo::opcode::transpose)
                            ? g.shape(g.nodes[id].operands.at(0))
                            : in.shape;
  if (s.is_tuple()) return 0;
  auto [r, c] = rows_cols(s);
  return vpu_tile_cycles(r, c, int(byte_size(s.type)), chip) * vpu_op_weight(in.opcode);
}

inline std::vector<std::size_t> user_counts(const flat_graph& g) {
  std::vector<std::size_t> users(g.nodes.size(), 0);
  for (const auto& n : g.nodes)
    for (auto o : n.operands) ++users[o];
  ++users[g.root];
  return users;
}

inline matmul_problem dot_problem(const flat_graph& g, std::size_t dot, int f32_passes) {
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
  p.mxu_passes = bf16 ? 1 : f32_passes;
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

// The schedule points into `m`, which must outlive it (hence no temporaries).
inline schedule make_schedule(const hlo::module& m, const chip_spec& chip,
                              schedule_options options = {}) {
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
  for (const auto& grp : s.groups) {
    const std::string name = grp.hlo_fusion >= 0 ? g.fusions[std::size_t(grp.hlo_fusion)].name
                                                 : g.nodes[grp.output].name;
    kernel_plan kp;
    if (grp.nodes.size() == 1 && is_layout_op(g.op(grp.nodes[0]))) {
      kp.name = name;
      kp.kind = kernel_kind::layout;
      kp.steps.push_back({});
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
        const auto p = detail::dot_problem(g, id, options.f32_dot_passes);
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
      const std::size_t dot = *grp.dot;
      auto p = detail::dot_problem(g, dot, options.f32_dot_passes);
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
      kp = plan_matmul(name, p, b, chip, epi);
    } else {
      std::int64_t in_bytes = 0;
      for (auto in : grp.inputs) in_bytes += detail::source_bytes(g, in);
      const auto out_bytes = g.shape(grp.output).byte_count();
      double cycles = 0, flops = 0;
      for (auto id : grp.nodes) {
        cycles += detail::node_vpu_cycles(g, id, chip);
        if (!is_layout_op(g.op(id))) flops += double(detail::elems(g.shape(id)));
      }
      kp = plan_vector(name, in_bytes, out_bytes, cycles, flops, chip, budget);
    }
    for (auto id : grp.nodes) kp.ops.push_back(g.nodes[id].name);
    s.kernels.push_back(std::move(kp));
  }
  s.tl = simulate(s.kernels, chip);
  return s;
}

schedule make_schedule(const hlo::module&&, const chip_spec&, schedule_options = {}) = delete;

}  // namespace fusedsl::tpu
