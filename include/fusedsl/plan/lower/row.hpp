#pragma once
// Row groups: the row axis made the last iteration axis, the prologue computing the row input,
// gamma and beta, the epilogue on the row op's result.
#include "fusedsl/plan/lower/lowering.hpp"

namespace fusedsl::plan::detail {

// A row group.
template <std::size_t N>
struct row_lowering : lowering<N> {
  FUSEDSL_LOWERING_BASE_NAMES

  constexpr kernel_desc lower() {
    const fusion_group& grp = this_group();
    const int op = grp.anchor;
    const node& n = program[op];
    desc.kind = kernel_kind::row;
    desc.row_op = n.op;
    desc.eps = float(n.value);
    const dims& s = n.shape;
    // The row axis becomes the last iteration axis: iterate over s with that axis moved last.
    dims it = s;
    std::array<int, max_rank> from{};  // iteration axis -> axis of s
    for (int c = 0, o = 0; c < s.rank; ++c)
      if (c != n.axis) {
        it[o] = s[c];
        from[std::size_t(o++)] = c;
      }
    it[s.rank - 1] = s[n.axis];
    from[std::size_t(s.rank - 1)] = n.axis;
    refinement ref = refinement::of(it);
    // root map of s (and of every same-shape member) from the permuted iteration
    struct permuted {
      static constexpr index_map map(const refinement& r, const std::array<int, max_rank>& fr) {
        const index_map im = r.root_map();
        index_map m;
        m.rank = im.rank;
        for (int o = 0; o < im.rank; ++o)
          m.row[std::size_t(fr[std::size_t(o)])] = im.row[std::size_t(o)];
        return m;
      }
    };
    // A prologue program for the row input (x computed in the group, or a load of it).
    const int x = n.in[0];
    for (int attempt = 0; attempt < 8; ++attempt) {
      desc.c = code{};
      const iter_space sp = ref.space();
      emitter<emit_scope> e(scope(), desc.c, sp);
      const index_map m = permuted::map(ref, from);
      const int rx = e.emit(x, m);
      if (e.req.kind == refine_request::split_axis) {
        if (e.req.axis == ref.rank - 1 || !ref.split(e.req.axis, e.req.at))
          return refuse("a row prologue that reshapes the row axis");
        continue;
      }
      if (!e.req.ok())
        return refuse(e.req.kind == refine_request::fail ? e.req.why
                                                         : "a concat in a row prologue");
      desc.n_seg = 1;
      desc.seg[0].lo = sp.lo;
      desc.seg[0].hi = sp.hi;
      desc.seg[0].begin = 0;
      desc.seg[0].end = std::int16_t(desc.c.n_ins);
      desc.seg[0].result = std::int16_t(rx);
      if (ref.count[std::size_t(s.rank - 1)] != 1)
        return refuse("a row prologue that reshapes the row axis");
      // gamma, beta: [C] loads along the row axis
      for (int k = 1; k < n.n_in; ++k) {
        const int p = n.in[std::size_t(k)];
        if (member(p)) return refuse("a norm whose gamma or beta is computed in its group");
        access a;
        a.node = p;
        a.type = program[p].type;
        a.at = offset_row(broadcast_map(m, program[p].shape, s), program[p].shape);
        const int ref_k = desc.c.add_access(a);
        if (ref_k < 0) return refuse("a fusion group reads more than 32 distinct operand elements");
        (k == 1 ? desc.gamma : desc.beta) = ref_k;
      }
      const int root = grp.roots[0];
      desc.root = root;
      if (root != op) {
        emit_scope sc = scope();
        sc.input_node[0] = op;
        const int begin = desc.c.n_ins;
        emitter<emit_scope> e2(sc, desc.c, sp);
        const int r = e2.emit(root, m);
        if (!e2.req.ok())
          return refuse(e2.req.kind == refine_request::fail ? e2.req.why
                                                            : "a row epilogue that reshapes");
        desc.epilogue = {std::int16_t(begin), std::int16_t(desc.c.n_ins), std::int16_t(r)};
      }
      desc.rank = ref.rank;
      desc.extent = ref.extent;
      desc.store = store_access(root, m);
      if (desc.store < 0)
        return refuse("a fusion group reads more than 32 distinct operand elements");
      return desc;
    }
    return refuse("a row prologue that reshapes the row axis");
  }
};

}  // namespace fusedsl::plan::detail
