#pragma once
// plan::lower: each fusion group as a kernel descriptor, or the reason it cannot be one.
//
// The one place that knows what a group's members mean as a kernel; the backends implement
// descriptors and recognise no patterns themselves:
//   loop       an iteration space (the root's shape, refined) cut into segments, each a straight-
//              line program (plan/code.hpp) computing the root's element from loads, constants
//              and iotas; the store of the root
//   reduce     a program computing the reduced operand at each point of its iteration space, the
//              reduced iteration axes and the op; an epilogue on the reduced value; the store
//   row        softmax / log_softmax / layernorm / rmsnorm over the last iteration axis: a
//              prologue program computing the row input, gamma and beta, an epilogue program on
//              the row's result, the store
//   gemm       per matmul of the group: A and B as strided views with batch strides (A's batch
//              folded into its rows when they are laid out that way), the epilogue program on
//              the accumulator (input register 0) over the output's index space, the store
//   attention  Q, K, V, O as strided views [batch..., heads, seq, head_dim], grouped heads, the
//              scale, causal (iota-compare select with -inf), and anything else between Q Kᵀ and
//              the softmax as a score program over (batch..., kv head, group, query, key)
//   update     dynamic_update_slice: the operand copied to the result (nothing, when the result
//              takes the operand's buffer) and the update written at the run-time start
//   repeat     a stacked block (its body's groups have descriptors of their own)
// A refused group names its reason; the reasons are a closed list (docs/fusion.md, "Refusals"),
// and backends run such a group through their general path (the CPU interpreter).
//
// One file per kind under plan/lower/ (loop.hpp with update, reduce, row, gemm with the pairing
// of GEMMs across groups, attention), each a `*_lowering` over what plan/lower/lowering.hpp
// shares; the descriptor's types are in plan/kernel_desc.hpp.
#include <array>

#include "fusedsl/plan/kernel_desc.hpp"
#include "fusedsl/plan/lower/attention.hpp"
#include "fusedsl/plan/lower/gemm.hpp"
#include "fusedsl/plan/lower/loop.hpp"
#include "fusedsl/plan/lower/reduce.hpp"
#include "fusedsl/plan/lower/row.hpp"

namespace fusedsl::plan {

// The kernel descriptor of group `group`.
template <std::size_t N>
constexpr kernel_desc lower_group(const graph::graph<N>& program, const fusion_plan<N>& fusion,
                                  int group) {
  detail::lowering<N> l(program, fusion, group);
  const fusion_group& grp = l.this_group();
  for (int i = 0; i < int(N); ++i)
    if (l.member(i) && !is_floating(program[i].type) && !is_integer(program[i].type) &&
        program[i].type != dtype::boolean)
      return l.refuse("a value of an unknown dtype");
  switch (grp.kind) {
    case group_kind::loop:
      return detail::loop_lowering<N>(program, fusion, group).lower();
    case group_kind::reduce:
      return detail::reduce_lowering<N>(program, fusion, group).lower();
    case group_kind::row:
      return detail::row_lowering<N>(program, fusion, group).lower();
    case group_kind::matmul:
      return detail::gemm_lowering<N>(program, fusion, group).lower();
    case group_kind::attention:
      return detail::attention_lowering<N>(program, fusion, group).lower();
    case group_kind::repeat: {
      if (program[grp.anchor].region != 0) return l.refuse("a stack inside a stack");
      kernel_desc r;
      r.kind = kernel_kind::repeat;
      r.group = group;
      r.root = grp.anchor;
      return r;
    }
  }
  return l.refuse("a group of an unknown kind");
}

// Every group's descriptor, indexed by group.
template <std::size_t N, int G>
struct lowered_plan {
  std::array<kernel_desc, std::size_t(G > 0 ? G : 1)> desc{};
  int n_refused = 0;
  constexpr const kernel_desc& operator[](int gi) const { return desc[std::size_t(gi)]; }
};

template <int G, std::size_t N>
constexpr lowered_plan<N, G> lower(const graph::graph<N>& g, const fusion_plan<N>& f) {
  lowered_plan<N, G> p;
  for (int gi = 0; gi < G; ++gi) {
    p.desc[std::size_t(gi)] = lower_group(g, f, gi);
    p.n_refused += p.desc[std::size_t(gi)].refused();
  }
  detail::pair_gemms<N, G>(g, f, p.desc);
  return p;
}

}  // namespace fusedsl::plan
