#pragma once
// What every kind's lowering shares (plan/lower.hpp): the program, the fusion plan, the group
// lowered and the descriptor built up; membership, refusal, the store's access, and the program
// over a refined iteration space cut into segments at concats.
#include <array>

#include "fusedsl/plan/code.hpp"
#include "fusedsl/plan/groups.hpp"
#include "fusedsl/plan/kernel_desc.hpp"
#include "fusedsl/plan/view.hpp"

// The names a kind's lowering (a struct deriving from lowering<N>) takes from its base, which
// unqualified lookup does not search (a dependent base): its constructor and the shared members.
#define FUSEDSL_LOWERING_BASE_NAMES \
  using base = lowering<N>;         \
  using base::base;                 \
  using base::desc;                 \
  using base::fusion;               \
  using base::group;                \
  using base::member;               \
  using base::plain_root;           \
  using base::program;              \
  using base::program_over;         \
  using base::refuse;               \
  using base::scope;                \
  using base::store_access;         \
  using base::this_group;

namespace fusedsl::plan::detail {

template <std::size_t N>
struct lowering {
  const graph::graph<N>& program;  // the program's nodes
  const fusion_plan<N>& fusion;
  int group;           // the group lowered
  kernel_desc desc{};  // its descriptor, built up

  constexpr lowering(const graph::graph<N>& program_, const fusion_plan<N>& fusion_, int group_)
      : program(program_), fusion(fusion_), group(group_) {
    desc.group = group;
  }
  constexpr const fusion_group& this_group() const { return fusion.groups[std::size_t(group)]; }

  constexpr emit_scope scope() const {
    emit_scope s;
    s.nodes = program.data();
    s.group_of = fusion.group_of.data();
    s.group = group;
    return s;
  }
  constexpr bool member(int id) const { return fusion.group_of[std::size_t(id)] == group; }
  constexpr kernel_desc refuse(const char* why) {
    kernel_desc r;
    r.group = group;
    r.kind = kernel_kind::refused;
    r.why = why;
    return r;
  }
  constexpr int store_access(int id, const index_map& m) {
    access a;
    a.node = id;
    a.type = program[id].type;
    a.at = offset_row(m, program[id].shape);
    return desc.c.add_access(a);
  }

  // The program computing `node` over the iteration space of the refined shape of `root`, cut
  // into segments; refines `ref` as the maps need. Sets desc's space and segments. nullptr or why.
  template <class Scope>
  constexpr const char* program_over(int node, refinement& ref, const Scope& sc,
                                     index_map (*root_map)(const refinement&)) {
    for (int attempt = 0; attempt < 16; ++attempt) {
      desc.c = code{};
      desc.n_seg = 1;
      const iter_space full = ref.space();
      desc.seg[0] = segment{};
      desc.seg[0].lo = full.lo;
      desc.seg[0].hi = full.hi;
      bool restart = false;
      for (int s = 0; s < desc.n_seg && !restart; ++s) {
        iter_space sp = full;
        sp.lo = desc.seg[std::size_t(s)].lo;
        sp.hi = desc.seg[std::size_t(s)].hi;
        const int begin = desc.c.n_ins;
        emitter<Scope> e(sc, desc.c, sp);
        const int r = e.emit(node, root_map(ref));
        if (e.req.kind == refine_request::split_axis) {
          if (!ref.split(e.req.axis, e.req.at))
            return "a reshape needs a finer iteration than the kernel has axes";
          restart = true;
        } else if (e.req.kind == refine_request::split_box) {
          if (desc.n_seg == max_segments)
            return "concats cut the iteration into more than eight parts";
          const int t = e.req.axis;
          segment cut = desc.seg[std::size_t(s)];
          desc.seg[std::size_t(s)].hi[std::size_t(t)] = e.req.at;
          cut.lo[std::size_t(t)] = e.req.at;
          desc.seg[std::size_t(desc.n_seg++)] = cut;
          desc.c.n_ins = begin;  // lower this segment again, now narrower
          --s;
        } else if (e.req.kind == refine_request::fail) {
          return e.req.why;
        } else {
          desc.seg[std::size_t(s)].begin = std::int16_t(begin);
          desc.seg[std::size_t(s)].end = std::int16_t(desc.c.n_ins);
          desc.seg[std::size_t(s)].result = std::int16_t(r);
        }
      }
      if (!restart) {
        desc.rank = ref.rank;
        desc.extent = ref.extent;
        return nullptr;
      }
    }
    return "the iteration could not be refined to an affine one";
  }

  static constexpr index_map plain_root(const refinement& r) { return r.root_map(); }
};

}  // namespace fusedsl::plan::detail
