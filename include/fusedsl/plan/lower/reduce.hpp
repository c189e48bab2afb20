#pragma once
// Reduce groups: the reduced operand's program over its refined shape, the reduced axes, the
// epilogue on the reduced value.
#include "fusedsl/plan/lower/lowering.hpp"

namespace fusedsl::plan::detail {

// A reduce group.
template <std::size_t N>
struct reduce_lowering : lowering<N> {
  FUSEDSL_LOWERING_BASE_NAMES

  constexpr kernel_desc lower() {
    const fusion_group& grp = this_group();
    const int red = grp.anchor;
    const node& rn = program[red];
    const int x = rn.in[0];
    desc.kind = kernel_kind::reduce;
    desc.reduce_op = rn.op;
    desc.reduce_length = program[x].shape[rn.axis];
    refinement ref = refinement::of(program[x].shape);
    if (const char* why = program_over(x, ref, scope(), plain_root)) return refuse(why);
    if (desc.n_seg != 1) return refuse("a concat across a reduced axis");
    desc.reduce_first = ref.first[std::size_t(rn.axis)];
    desc.reduce_count = ref.count[std::size_t(rn.axis)];
    // The reduced value's map: the operand's without the reduced axis (or with it at 0).
    const index_map xm = ref.root_map();
    index_map rm;
    rm.rank = rn.shape.rank;
    for (int c = 0, o = 0; c < program[x].shape.rank; ++c) {
      if (c == rn.axis) {
        if (rn.keepdims) ++o;  // a kept axis of extent 1 reads index 0
        continue;
      }
      rm.row[std::size_t(o++)] = xm.row[std::size_t(c)];
    }
    const int root = grp.roots[0];
    desc.root = root;
    if (root != red) {  // an epilogue on the reduced value
      emit_scope sc = scope();
      sc.input_node[0] = red;
      iter_space sp = ref.space();
      const int begin = desc.c.n_ins;
      emitter<emit_scope> e(sc, desc.c, sp);
      const int r = e.emit(root, rm);
      if (!e.req.ok())
        return refuse(e.req.kind == refine_request::fail ? e.req.why
                                                         : "a reduce epilogue that reshapes");
      desc.epilogue = {std::int16_t(begin), std::int16_t(desc.c.n_ins), std::int16_t(r)};
    }
    desc.store = store_access(root, rm);
    if (desc.store < 0)
      return refuse("a fusion group reads more than 32 distinct operand elements");
    return desc;
  }
};

}  // namespace fusedsl::plan::detail
