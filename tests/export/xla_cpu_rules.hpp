#pragma once
// The rules a fusion body must keep for XLA's CPU backend (jaxlib 0.10.2) to compile it, as the
// tests check them on every part split_for_xla_cpu makes (docs/hlo-export.md says where each
// rule comes from). Returns "" when the body keeps them all, else the first broken rule.
#include <string>
#include <vector>

#include "fusedsl/hlo/ir.hpp"

namespace xla_cpu_rules {

namespace hlo = fusedsl::hlo;

inline std::string check_part(const hlo::computation& c) {
  const hlo::instruction& root = c.root_instruction();
  // A variadic reduce may be the root (its results read in the entry); a tuple instruction not.
  if (root.shape.is_tuple() && root.opcode != hlo::opcode::reduce) return c.name + ": a tuple root";
  auto is_param = [&](hlo::instruction_id i) {
    return c.instructions[i].opcode == hlo::opcode::parameter;
  };
  for (hlo::instruction_id i = 0; i < c.instructions.size(); ++i) {
    const hlo::instruction& in = c.instructions[i];
    if (in.opcode == hlo::opcode::reduce && in.shape.is_tuple() && i != c.root)
      return c.name + ": variadic reduce " + in.name + " below the root";
    if (in.opcode == hlo::opcode::dynamic_update_slice &&
        (!is_param(in.operands[0]) || !is_param(in.operands[1])))
      return c.name + ": dynamic-update-slice " + in.name + " updates or writes a non-parameter";
    if (in.opcode == hlo::opcode::gather) {
      const auto& d = *in.gather;
      bool simplified = c.instructions[in.operands[1]].shape.rank() == 2 &&
                        d.index_vector_dim == 1 && d.collapsed_slice_dims.empty() &&
                        d.operand_batching_dims.empty() &&
                        d.offset_dims.size() == in.slice_sizes.size();
      for (std::size_t k = 0; simplified && k < d.start_index_map.size(); ++k)
        simplified = d.start_index_map[k] == std::int64_t(k);
      for (std::size_t k = 0; simplified && k < d.offset_dims.size(); ++k)
        simplified = d.offset_dims[k] == std::int64_t(k) + 1;
      if (!simplified) return c.name + ": gather " + in.name + " is not in XLA's simplified form";
    }
    if (in.opcode == hlo::opcode::logistic) return c.name + ": logistic " + in.name;
    if (in.opcode == hlo::opcode::dot)
      for (hlo::instruction_id op : in.operands)
        if (!is_param(op)) return c.name + ": dot " + in.name + " reads a non-parameter";
    if (in.opcode == hlo::opcode::transpose && (i != c.root || !is_param(in.operands[0])))
      return c.name + ": transpose " + in.name + " is not a root reading a parameter";
  }
  // Reshapes and concatenates the loop emitter meets going up from the root through elementwise
  // ops.
  std::vector<hlo::instruction_id> stack{c.root};
  std::vector<bool> seen(c.instructions.size(), false);
  while (!stack.empty()) {
    const hlo::instruction_id i = stack.back();
    stack.pop_back();
    if (seen[i]) continue;
    seen[i] = true;
    const hlo::instruction& in = c.instructions[i];
    if (in.opcode == hlo::opcode::reshape) {
      if (i != c.root || !is_param(in.operands[0]))
        return c.name + ": reshape " + in.name + " on the root's elementwise path";
      continue;
    }
    if (in.opcode == hlo::opcode::concatenate) {
      if (i != c.root)
        return c.name + ": concatenate " + in.name + " below the root on its elementwise path";
      for (hlo::instruction_id op : in.operands)
        if (!is_param(op)) return c.name + ": concatenate " + in.name + " reads a non-parameter";
      continue;
    }
    if (!hlo::is_elementwise(in.opcode) || in.operands.size() > 3) continue;
    for (hlo::instruction_id op : in.operands) stack.push_back(op);
  }
  return "";
}

}  // namespace xla_cpu_rules
