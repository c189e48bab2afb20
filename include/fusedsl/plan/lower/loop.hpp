#pragma once
// Loop groups (the root's element from loads, constants and iotas over the root's refined shape,
// in segments) and dynamic update slices.
#include "fusedsl/plan/lower/lowering.hpp"

namespace fusedsl::plan::detail {

// A loop group, or a dynamic update slice (a loop group whose root is one).
template <std::size_t N>
struct loop_lowering : lowering<N> {
  FUSEDSL_LOWERING_BASE_NAMES

  constexpr kernel_desc update(int root) {
    const node& n = program[root];
    for (int k = 0; k < 3; ++k)
      if (member(n.in[std::size_t(k)]) && !graph::is_leaf(program[n.in[std::size_t(k)]].op))
        return refuse("a dynamic update slice whose operands are computed in its kernel");
    desc.kind = kernel_kind::update;
    desc.root = root;
    desc.update_x = n.in[0];
    desc.update_value = n.in[1];
    desc.update_start = n.in[2];
    desc.update_axis = n.axis;
    if (program[n.in[2]].op == op_kind::constant) {
      desc.start_is_constant = true;
      desc.start_constant = std::int64_t(program[n.in[2]].value);
    }
    if (program[n.in[0]].op == op_kind::constant || program[n.in[0]].op == op_kind::iota ||
        program[n.in[1]].op == op_kind::constant || program[n.in[1]].op == op_kind::iota)
      return refuse("a dynamic update slice of a constant or iota");
    return desc;
  }

  constexpr kernel_desc lower() {
    const fusion_group& grp = this_group();
    if (grp.n_roots != 1) return refuse("a loop group with more than one result");
    const int root = grp.roots[0];
    if (program[root].op == op_kind::dynamic_update_slice) return update(root);
    desc.kind = kernel_kind::loop;
    desc.root = root;
    refinement ref = refinement::of(program[root].shape);
    if (const char* why = program_over(root, ref, scope(), plain_root)) return refuse(why);
    desc.store = store_access(root, ref.root_map());
    if (desc.store < 0)
      return refuse("a fusion group reads more than 32 distinct operand elements");
    return desc;
  }
};

}  // namespace fusedsl::plan::detail
