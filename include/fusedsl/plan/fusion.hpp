#pragma once
// plan::fuse: partitions the node table into fusion groups, each one kernel.
//
// Rules (docs/fusion.md has a table and a picture per rule):
//  * leaves: inputs, params and the block placeholder live in user memory; constants and iota are
//    recomputed inside every group that reads them and are never materialised;
//  * loop: elementwise ops, casts, broadcasts, reshapes, transposes, slices and concats chain into
//    their consumer's group while they have exactly one consumer (a value read by two groups is
//    materialised once, never recomputed);
//  * matmul: a matmul takes its operands' layout ops (transpose/reshape with one consumer) as the
//    way it reads them, and its single-consumer elementwise successors of the same shape (bias,
//    scale, activation, residual, cast) as its epilogue; matmuls that read the same left operand
//    with parameter right operands run as one group (horizontal fusion: Q, K and V together);
//  * row: softmax, log_softmax, layernorm and rmsnorm, with their elementwise prologue (input
//    fusion) and epilogue;
//  * reduce: a reduction with its elementwise prologue and epilogue;
//  * attention: softmax(f(Q Kᵀ)) V, f any chain of elementwise ops (scale, additive or boolean
//    masks with any fill, biases), from the composite or written by hand, is one flash-style group:
//    the scores never leave it;
//  * every group is made in the richest form that lowers to a kernel (plan/lower.hpp), else with
//    less fused into it (docs/fusion.md, "Refusals");
//  * repeat: a stacked block is one group of its region's caller; its body is planned on its own.
// The pass is constexpr code over arrays; the same code runs at run time.
#include <array>

#include "fusedsl/graph/node.hpp"
#include "fusedsl/plan/groups.hpp"
#include "fusedsl/plan/lower.hpp"

namespace fusedsl::plan {

namespace detail {

constexpr bool is_inlined_leaf(op_kind k) { return k == op_kind::constant || k == op_kind::iota; }
constexpr bool is_external(op_kind k) {
  return k == op_kind::input || k == op_kind::param || k == op_kind::state ||
         k == op_kind::placeholder;
}
constexpr bool is_view_op(op_kind k) {
  return k == op_kind::reshape || k == op_kind::transpose || k == op_kind::broadcast;
}
constexpr bool is_loop_op(op_kind k) {
  return graph::is_elementwise(k) || is_view_op(k) || k == op_kind::slice || k == op_kind::concat ||
         k == op_kind::gather || k == op_kind::dynamic_slice;
}

template <std::size_t N>
struct fuser {
  const graph::graph<N>& g;
  fusion_plan<N> p{};
  std::array<int, N> sole_user{};  // the one consumer of a node, or -1

  constexpr explicit fuser(const graph::graph<N>& graph_) : g(graph_) {
    for (std::size_t i = 0; i < N; ++i) {
      p.group_of[i] = -1;
      sole_user[i] = -1;
    }
    for (int i = 0; i < int(N); ++i)
      for (int k = 0; k < g[i].n_in; ++k) {
        const int u = g[i].in[std::size_t(k)];
        p.n_users[std::size_t(u)] += 1;
        sole_user[std::size_t(u)] = p.n_users[std::size_t(u)] == 1 ? i : -1;
      }
    for (int o = 0; o < g.n_outputs; ++o) bump(g.outputs[std::size_t(o)]);
    for (int r = 1; r < g.n_regions; ++r) bump(g.regions[std::size_t(r)].result);
  }
  constexpr void bump(int id) {
    p.n_users[std::size_t(id)] += 1;
    sole_user[std::size_t(id)] = -1;
  }
  constexpr bool single_use(int id) const {
    return p.n_users[std::size_t(id)] == 1 && sole_user[std::size_t(id)] >= 0;
  }
  constexpr int user(int id) const { return sole_user[std::size_t(id)]; }
  constexpr bool free(int id) const { return p.group_of[std::size_t(id)] < 0; }

  constexpr int new_group(group_kind k, int anchor) {
    const int gi = p.n_groups++;
    fusion_group& gr = p.groups[std::size_t(gi)];
    gr.kind = k;
    gr.anchor = anchor;
    gr.region = g[anchor].region;
    return gi;
  }
  constexpr void take(int id, int gi) { p.group_of[std::size_t(id)] = gi; }

  // Pull single-consumer loop ops feeding `id` into group gi (producer into consumer).
  constexpr void absorb_operands(int id, int gi, bool layout_only) {
    const node& n = g[id];
    // A gather or dynamic slice reads its data from a buffer (only the index computation fuses
    // in); a dynamic update slice fuses nothing.
    if (n.op == op_kind::dynamic_update_slice) return;
    for (int k = (n.op == op_kind::gather || n.op == op_kind::dynamic_slice) ? 1 : 0; k < n.n_in;
         ++k) {
      const int a = n.in[std::size_t(k)];
      const op_kind ak = g[a].op;
      if (!free(a) || !single_use(a)) continue;
      // A matmul reads through layout ops and widening casts (bf16 weights are widened once;
      // an int8 weight's values, whose scale is the matmul's epilogue, are widened as read).
      const dtype from = g[g[a].in[0]].type;
      const bool widening = ak == op_kind::cast && g[a].type == dtype::f32 &&
                            ((size_of(from) < 4 && is_floating(from)) ||
                             (from == dtype::i8 && g[g[a].in[0]].op == op_kind::param));
      if (layout_only ? !(is_view_op(ak) || widening) : !is_loop_op(ak)) continue;
      take(a, gi);
      absorb_operands(a, gi, layout_only);
    }
  }

  // Extend an epilogue: while the tail's only consumer is elementwise over the same shape. For the
  // epilogue of matmul `mm`, it stops before an op whose other operand is a sibling matmul's
  // product through unary ops (SwiGLU written `up(x) * silu(gate(x))`): that matmul's group takes
  // the op, reading mm's product bare, which makes the two a GEMM pair (plan/lower.hpp); the
  // sibling is left in `held_back`.
  constexpr int absorb_epilogue(int tail, int gi, int mm = -1, int* held_back = nullptr) {
    for (;;) {
      if (!single_use(tail)) return tail;
      const int c = user(tail);
      const node& cn = g[c];
      if (!free(c) || !graph::is_elementwise(cn.op) || cn.op == op_kind::select ||
          !(cn.shape == g[tail].shape))
        return tail;
      // The epilogue's other operands must be ready before the group runs: none of them may
      // depend, even through other kernels, on a member of this group.
      for (int k = 0; k < cn.n_in; ++k) {
        const int o = cn.in[std::size_t(k)];
        if (o != tail && depends_on_group(o, gi)) return tail;
        if (o != tail && mm >= 0 && held_back != nullptr) {
          if (const int j = pair_sibling(o, mm); j >= 0) {
            *held_back = j;
            return tail;
          }
        }
      }
      take(c, gi);
      tail = c;
    }
  }

  // The free matmul that `o` reaches through one or more single-consumer unary elementwise ops of
  // matmul mm's shape, if it reads mm's left operand with a parameter right operand (read directly
  // or through a widening cast); else -1. (A bare product, zero ops, is read by mm's epilogue and
  // paired from mm's side.)
  constexpr int pair_sibling(int o, int mm) const {
    const node& a = g[mm];
    int ops = 0;
    while (free(o) && single_use(o) && g[o].n_in == 1 && graph::is_elementwise(g[o].op) &&
           g[o].shape == a.shape && ops < 16) {
      o = g[o].in[0];
      ++ops;
    }
    const node& b = g[o];
    if (ops == 0 || o == mm || b.op != op_kind::matmul || !free(o) || !single_use(o) ||
        b.region != a.region || b.in[0] != a.in[0] || b.trans_a != a.trans_a ||
        !(b.shape == a.shape))
      return -1;
    const node& w = g[b.in[1]];
    const bool param = detail::is_external(w.op) ||
                       (w.op == op_kind::cast && detail::is_external(g[w.in[0]].op));
    return param ? o : -1;
  }

  // Does node id, or any node it reads directly or indirectly, belong to group gi?
  constexpr bool depends_on_group(int id, int gi) const {
    std::array<bool, N> seen{};
    std::array<int, N> stack{};
    int top = 0;
    stack[std::size_t(top++)] = id;
    seen[std::size_t(id)] = true;  // marked when pushed, so each node is pushed once
    while (top > 0) {
      const int v = stack[std::size_t(--top)];
      if (p.group_of[std::size_t(v)] == gi) return true;
      for (int k = 0; k < g[v].n_in; ++k) {
        const int o = g[v].in[std::size_t(k)];
        if (!seen[std::size_t(o)]) {
          seen[std::size_t(o)] = true;
          stack[std::size_t(top++)] = o;
        }
      }
    }
    return false;
  }
  // Does any operand read from outside group gi depend on node id?
  constexpr bool group_inputs_depend_on(int gi, int id) const {
    for (int i = 0; i < int(N); ++i) {
      if (p.group_of[std::size_t(i)] != gi) continue;
      for (int k = 0; k < g[i].n_in; ++k) {
        const int o = g[i].in[std::size_t(k)];
        if (p.group_of[std::size_t(o)] != gi && reaches(o, id)) return true;
      }
    }
    return false;
  }
  constexpr bool reaches(int from, int target) const {
    if (from < target) return false;  // operands come before their users
    std::array<bool, N> seen{};
    std::array<int, N> stack{};
    int top = 0;
    stack[std::size_t(top++)] = from;
    seen[std::size_t(from)] = true;
    while (top > 0) {
      const int v = stack[std::size_t(--top)];
      if (v == target) return true;
      for (int k = 0; k < g[v].n_in; ++k) {
        const int o = g[v].in[std::size_t(k)];
        if (!seen[std::size_t(o)] && o >= target) {
          seen[std::size_t(o)] = true;
          stack[std::size_t(top++)] = o;
        }
      }
    }
    return false;
  }

  constexpr void set_root(int gi, int id) {
    fusion_group& gr = p.groups[std::size_t(gi)];
    gr.roots[std::size_t(gr.n_roots++)] = id;
  }

  // Does id lead, through single-consumer elementwise ops and reshapes, to the scores matmul Q Kᵀ
  // (along exactly one operand at each op)?
  constexpr bool leads_to_scores(int id, int depth) const {
    if (depth > 16 || !single_use(id) || !free(id)) return false;
    const node& n = g[id];
    if (n.op == op_kind::matmul)
      return !n.trans_a && n.shape.rank >= 3 && (n.trans_b || transposed_last_two(n.in[1]));
    if (n.op == op_kind::reshape) return leads_to_scores(n.in[0], depth + 1);
    if (!graph::is_elementwise(n.op) || !(n.shape == g[id].shape)) return false;
    int count = 0;
    for (int k = 0; k < n.n_in; ++k) count += leads_to_scores(n.in[std::size_t(k)], depth + 1);
    return count == 1;
  }
  // A single-consumer transpose of the last two axes (K written as transpose(K)).
  constexpr bool transposed_last_two(int id) const {
    const node& n = g[id];
    if (n.op != op_kind::transpose || !single_use(id) || !free(id)) return false;
    const int r = n.shape.rank;
    for (int i = 0; i < r - 2; ++i)
      if (n.perm[std::size_t(i)] != i) return false;
    return n.perm[std::size_t(r - 2)] == r - 1 && n.perm[std::size_t(r - 1)] == r - 2;
  }

  // softmax(f(Q Kᵀ)) V rooted at the second matmul `pv`, f any chain of elementwise ops and
  // reshapes (scale, masks of any kind, biases) with one operand on the path from the scores.
  struct attention_match {
    bool ok = false;
    int scores = -1, softmax = -1, pv = -1;
    std::array<int, 16> chain{};
    int n_chain = 0;
  };
  constexpr attention_match match_attention(int pv) const {
    attention_match m;
    const node& n = g[pv];
    if (n.op != op_kind::matmul || n.trans_a || n.trans_b) return m;
    int s = n.in[0];
    if (g[s].op != op_kind::softmax || g[s].axis != g[s].shape.rank - 1 || !single_use(s) ||
        !free(s))
      return m;
    if (!leads_to_scores(g[s].in[0], 0)) return m;
    m.softmax = s;
    int cur = g[s].in[0];
    while (g[cur].op != op_kind::matmul) {
      if (m.n_chain == 16) return m;
      m.chain[std::size_t(m.n_chain++)] = cur;
      const node& c = g[cur];
      int next = -1;
      for (int k = 0; k < c.n_in && next < 0; ++k)
        if (leads_to_scores(c.in[std::size_t(k)], 0)) next = c.in[std::size_t(k)];
      cur = next;
    }
    m.scores = cur;
    m.pv = pv;
    m.ok = true;
    return m;
  }

  // The group just made (the last one) taken back: its members are free again.
  constexpr void undo_last_group() {
    const int gi = --p.n_groups;
    for (std::size_t i = 0; i < N; ++i)
      if (p.group_of[i] == gi) p.group_of[i] = -1;
    p.groups[std::size_t(gi)] = fusion_group{};
  }
  constexpr bool lowers(int gi) const { return !lower_group(g, p, gi).refused(); }

  constexpr bool make_attention(int i) {
    const attention_match m = match_attention(i);
    if (!m.ok) return false;
    const int gi = new_group(group_kind::attention, i);
    take(i, gi);
    take(m.softmax, gi);
    take(m.scores, gi);
    for (int c = 0; c < m.n_chain; ++c) {
      take(m.chain[std::size_t(c)], gi);
      absorb_operands(m.chain[std::size_t(c)], gi,
                      false);  // mask computation (iota, compare) fuses in
    }
    absorb_operands(m.scores, gi, true);  // Q and K read through their layout ops
    absorb_operands(i, gi, true);         // V likewise
    int tail = i;
    // The output's merge-heads layout ops become the way the group writes its result.
    while (single_use(tail) && free(user(tail)) && is_view_op(g[user(tail)].op) &&
           g[user(tail)].op != op_kind::broadcast) {
      tail = user(tail);
      take(tail, gi);
    }
    set_root(gi, tail);
    if (lowers(gi)) return true;
    undo_last_group();
    return false;
  }

  // A matmul with (level 2) its operands' layout ops, its epilogue and its siblings, (1) its
  // epilogue only, or (0) alone: the richest form that lowers.
  constexpr void make_matmul(int i) {
    for (int level = 2; level >= 0; --level) {
      const int gi = new_group(group_kind::matmul, i);
      take(i, gi);
      if (level == 2) absorb_operands(i, gi, true);
      int held_back = -1;  // a sibling left to pair with this matmul from its own group
      set_root(gi, level >= 1 ? absorb_epilogue(i, gi, i, &held_back) : i);
      const node& a = g[i];
      for (int j = i + 1; level == 2 && j < int(N) && p.groups[std::size_t(gi)].n_roots < max_roots;
           ++j) {
        const node& b = g[j];
        if (j == held_back || b.op != op_kind::matmul || !free(j) || b.region != a.region ||
            b.in[0] != a.in[0] || b.trans_a != a.trans_a || !detail::is_external(g[b.in[1]].op) ||
            !detail::is_external(g[a.in[1]].op) || b.shape.rank != a.shape.rank ||
            group_inputs_depend_on(gi, j))
          continue;
        take(j, gi);
        set_root(gi, absorb_epilogue(j, gi));
      }
      if (level == 0 || lowers(gi)) return;
      undo_last_group();
    }
  }

  // A row composite or reduction with (2) its elementwise prologue and epilogue, (1) its epilogue,
  // or (0) alone.
  constexpr void make_row_or_reduce(int i, group_kind kind) {
    for (int level = 2; level >= 0; --level) {
      const int gi = new_group(kind, i);
      take(i, gi);
      if (level == 2) absorb_operands(i, gi, false);
      set_root(gi, level >= 1 ? absorb_epilogue(i, gi) : i);
      if (level == 0 || lowers(gi)) return;
      undo_last_group();
    }
  }

  // A loop group: the node with its single-consumer producers, or alone.
  constexpr void make_loop(int i) {
    int gi = new_group(group_kind::loop, i);
    take(i, gi);
    absorb_operands(i, gi, false);
    set_root(gi, i);
    if (lowers(gi)) return;
    undo_last_group();
    gi = new_group(group_kind::loop, i);
    take(i, gi);
    set_root(gi, i);
  }

  constexpr fusion_plan<N> run() {
    // 1. Attention first (it spans a matmul, the softmax and the mask between them).
    for (int i = 0; i < int(N); ++i)
      if (g[i].op == op_kind::matmul && free(i)) make_attention(i);
    // 2. Matmuls with prologue layouts and epilogues; siblings sharing the left operand join.
    for (int i = 0; i < int(N); ++i)
      if (g[i].op == op_kind::matmul && free(i)) make_matmul(i);
    // 3. Row composites with their prologue and epilogue; reductions likewise.
    for (int i = 0; i < int(N); ++i) {
      if (!free(i)) continue;
      if (graph::is_row_composite(g[i].op)) {
        make_row_or_reduce(i, group_kind::row);
      } else if (graph::is_reduce(g[i].op)) {
        make_row_or_reduce(i, group_kind::reduce);
      } else if (g[i].op == op_kind::repeat) {
        const int gi = new_group(group_kind::repeat, i);
        take(i, gi);
        set_root(gi, i);
      }
    }
    // 4. Loop groups: the remaining computed nodes, from the last backwards, each pulling in its
    //    single-consumer producers.
    for (int i = int(N) - 1; i >= 0; --i)
      if (free(i) && !graph::is_leaf(g[i].op)) make_loop(i);
    order_groups();
    return p;
  }

  // Kahn's algorithm over the group graph.
  constexpr void order_groups() {
    std::array<int, N> indeg{};
    std::array<bool, N> done{};
    // group dependency: gi depends on gj when a member of gi reads a member of gj.
    for (int i = 0; i < int(N); ++i) {
      const int gi = p.group_of[std::size_t(i)];
      if (gi < 0) continue;
      for (int k = 0; k < g[i].n_in; ++k) {
        const int gj = p.group_of[std::size_t(g[i].in[std::size_t(k)])];
        if (gj >= 0 && gj != gi) indeg[std::size_t(gi)] += 1;
      }
    }
    int n = 0;
    while (n < p.n_groups) {
      // Pick the ready group whose anchor comes first, so the order is stable and readable.
      int best = -1;
      for (int gi = 0; gi < p.n_groups; ++gi)
        if (!done[std::size_t(gi)] && indeg[std::size_t(gi)] == 0 &&
            (best < 0 || p.groups[std::size_t(gi)].anchor < p.groups[std::size_t(best)].anchor))
          best = gi;
      if (best < 0) throw "plan::fuse: the fusion groups form a cycle";
      done[std::size_t(best)] = true;
      p.order[std::size_t(n++)] = best;
      for (int i = 0; i < int(N); ++i) {
        const int gi = p.group_of[std::size_t(i)];
        if (gi < 0 || gi == best) continue;
        for (int k = 0; k < g[i].n_in; ++k)
          if (p.group_of[std::size_t(g[i].in[std::size_t(k)])] == best) indeg[std::size_t(gi)] -= 1;
      }
    }
  }
};

}  // namespace detail

template <std::size_t N>
constexpr fusion_plan<N> fuse(const graph::graph<N>& g) {
  detail::fuser<N> f(g);
  return f.run();
}

}  // namespace fusedsl::plan
