#pragma once
// plan::verify: checks a fusion and memory plan, in constexpr code or at run time.
//  * every node that is computed belongs to exactly one group, and leaves to none;
//  * every group's inputs exist before it runs (produced by an earlier group or external);
//  * no two arena buffers that are live at the same time overlap, unless one reuses the other's
//    storage in place in the group where the other dies;
//  * every buffer lies inside its region's arena and is 64-byte aligned.
#include "fusedsl/plan/memory.hpp"

namespace fusedsl::plan {

struct verify_result {
  const char* error = nullptr;  // nullptr: the plan is valid
  int node = -1;                // the node at fault
  int other = -1;               // the second node, for overlaps
  constexpr bool ok() const { return error == nullptr; }
};

// Updates of states (fd::update): the new value is written into the state's own memory by the
// group that computes it, so the state must be read before that group runs or by that group
// itself, and then only at the element it writes (as an in-place buffer, memory.hpp).
enum class state_problem : std::uint8_t { none, read_after_update, read_at_other_elements };

template <std::size_t N>
constexpr state_problem check_states(const graph::graph<N>& g, const fusion_plan<N>& f) {
  std::array<int, N> position{};
  for (int k = 0; k < f.n_groups; ++k) position[std::size_t(f.order[std::size_t(k)])] = k;
  for (int o = 0; o < g.n_outputs; ++o) {
    const int st = g.output_state[std::size_t(o)], v = g.outputs[std::size_t(o)];
    if (st < 0) continue;
    const int gv = f.group_of[std::size_t(v)];
    if (gv < 0) continue;  // a leaf copied in after every group has run
    for (int i = 0; i < int(N); ++i) {
      bool reads = false;
      for (int k = 0; k < g[i].n_in; ++k) reads = reads || g[i].in[std::size_t(k)] == st;
      const int gi = f.group_of[std::size_t(i)];
      if (!reads || gi < 0) continue;
      if (gi != gv && position[std::size_t(gi)] > position[std::size_t(gv)])
        return state_problem::read_after_update;
    }
    bool gv_reads = false;
    for (int i = 0; i < int(N); ++i)
      if (f.group_of[std::size_t(i)] == gv)
        for (int k = 0; k < g[i].n_in; ++k) gv_reads = gv_reads || g[i].in[std::size_t(k)] == st;
    if (gv_reads && !detail::planner<N>(g, f).reads_elementwise(gv, st, v))
      return state_problem::read_at_other_elements;
  }
  return state_problem::none;
}

template <std::size_t N>
constexpr verify_result verify(const graph::graph<N>& g, const fusion_plan<N>& f,
                               const memory_plan<N>& m) {
  std::array<int, N> ran_at{};  // position in the global order of the group computing each node
  for (std::size_t i = 0; i < N; ++i) ran_at[i] = -1;
  for (int k = 0; k < f.n_groups; ++k) {
    const int gi = f.order[std::size_t(k)];
    for (int i = 0; i < int(N); ++i)
      if (f.group_of[std::size_t(i)] == gi) ran_at[std::size_t(i)] = k;
  }
  for (int i = 0; i < int(N); ++i) {
    const node& n = g[i];
    const int gi = f.group_of[std::size_t(i)];
    if (graph::is_leaf(n.op)) {
      if (gi >= 0) return {"a leaf belongs to a group", i};
      continue;
    }
    if (gi < 0 || gi >= f.n_groups) return {"a computed node belongs to no group", i};
    for (int k = 0; k < n.n_in; ++k) {
      const int a = n.in[std::size_t(k)];
      if (a < 0 || a >= i) return {"an operand does not come before its user", i, a};
      if (graph::is_leaf(g[a].op)) continue;
      if (ran_at[std::size_t(a)] > ran_at[std::size_t(i)])
        return {"a value is read before it is written", i, a};
    }
  }
  for (int a = 0; a < int(N); ++a) {
    if (!m.in_arena(a)) continue;
    const std::int64_t oa = m.offset[std::size_t(a)], ea = oa + m.size[std::size_t(a)];
    if (oa % arena_alignment != 0) return {"a buffer is not 64-byte aligned", a};
    if (ea > m.region_arena[std::size_t(g[a].region)])
      return {"a buffer lies outside its arena", a};
    for (int b = a + 1; b < int(N); ++b) {
      if (!m.in_arena(b) || g[b].region != g[a].region) continue;
      const std::int64_t ob = m.offset[std::size_t(b)], eb = ob + m.size[std::size_t(b)];
      if (ob >= ea || oa >= eb) continue;
      // Storage shared in place: b reuses a (or a chain leading to it) in the group where a dies.
      bool shared = false;
      for (int c = b; c >= 0 && !shared; c = m.alias_of[std::size_t(c)])
        shared = m.alias_of[std::size_t(c)] == a;
      for (int c = a; c >= 0 && !shared; c = m.alias_of[std::size_t(c)])
        shared = m.alias_of[std::size_t(c)] == b;
      if (shared) continue;
      const live_range ra = m.live[std::size_t(a)], rb = m.live[std::size_t(b)];
      if (ra.overlaps(rb)) return {"two buffers live at the same time overlap", a, b};
    }
  }
  return {};
}

}  // namespace fusedsl::plan
