#pragma once
// plan::plan_memory: live ranges over the fused schedule and arena offsets, all constexpr.
//
// Each value that leaves a fusion group (a group root) is a buffer, unless it is a graph output
// (written straight to user memory) or a block body's result (written to the caller's buffer).
// Offsets come from a greedy best fit by decreasing size within live ranges, the method of XLA's
// heap simulator (xla/service/heap_simulator.cc, GlobalDecreasingSizeBestFitHeap). A group may
// write in place over an operand buffer that dies in it when it reads that buffer only at the
// index it writes (elementwise loops, epilogue operands, row kernels' input).
// A stacked block's body is planned once; the caller reserves one scratch area for it: the body's
// arena plus one carry buffer, and ping-pongs between the carry buffer and its result.
#include <array>
#include <vector>

#include "fusedsl/plan/fusion.hpp"
#include "fusedsl/plan/lower.hpp"

namespace fusedsl::plan {

inline constexpr std::int64_t arena_alignment = 64;
constexpr std::int64_t align_up(std::int64_t b) {
  return (b + arena_alignment - 1) / arena_alignment * arena_alignment;
}

struct live_range {
  int begin = 0, end = 0;  // schedule positions (inclusive) within the region
  constexpr bool overlaps(const live_range& o) const { return begin <= o.end && o.begin <= end; }
};

template <std::size_t N>
struct memory_plan {
  std::array<std::int64_t, N> offset{};  // byte offset in its region's arena; -1: not in the arena
  std::array<std::int64_t, N> size{};    // aligned bytes of each arena buffer
  std::array<live_range, N> live{};      // live range of each arena buffer
  std::array<int, N> position{};         // schedule position of each group within its region
  std::array<int, N> alias_of{};         // node whose storage a buffer reuses in place, or -1
  std::array<std::int64_t, N> scratch_offset{};  // repeat groups: offset of the body's scratch
  // repeat groups: the body writes its result over its own input (every read of the input comes
  // before the group that writes the result), so layers 1..n-1 need no carry buffer.
  std::array<bool, N> body_in_place{};
  std::array<std::int64_t, graph::max_regions> region_arena{};  // arena bytes of each region
  std::int64_t arena_bytes = 0;          // the whole program: region 0's arena (scratch included)

  constexpr bool in_arena(int id) const { return offset[std::size_t(id)] >= 0; }
};

namespace detail {

template <std::size_t N>
struct planner {
  const graph::graph<N>& g;
  const fusion_plan<N>& f;
  memory_plan<N> m{};

  constexpr planner(const graph::graph<N>& g_, const fusion_plan<N>& f_) : g(g_), f(f_) {
    for (std::size_t i = 0; i < N; ++i) {
      m.offset[i] = -1;
      m.alias_of[i] = -1;
      m.scratch_offset[i] = -1;
    }
  }

  constexpr bool is_root(int id) const {
    const int gi = f.group_of[std::size_t(id)];
    if (gi < 0) return false;
    const fusion_group& gr = f.groups[std::size_t(gi)];
    for (int r = 0; r < gr.n_roots; ++r)
      if (gr.roots[std::size_t(r)] == id) return true;
    return false;
  }
  constexpr bool is_user_memory(int id) const {
    for (int o = 0; o < g.n_outputs; ++o)
      if (g.outputs[std::size_t(o)] == id) return true;
    for (int r = 1; r < g.n_regions; ++r)
      if (g.regions[std::size_t(r)].result == id) return true;
    return false;
  }

  // Does group gi's kernel read buffer b only at the element it writes, before it writes it (so
  // its root may overwrite b)? Read off the group's kernel descriptor (plan/lower.hpp): every load
  // of b must be at the store's offset. Loop and row kernels read an element before they write
  // it; a GEMM's epilogue reads its operands after the last k block, so only an unblocked GEMM
  // (k <= 512, kernels/gemm.hpp) may write over one, and never over A or B; reductions, attention
  // and groups the interpreter runs never write over an operand.
  constexpr bool reads_elementwise(int gi, int b, int root) const {
    const fusion_group& gr = f.groups[std::size_t(gi)];
    if (!(g[b].shape == g[root].shape) || size_of(g[b].type) != size_of(g[root].type)) return false;
    if (gr.n_roots != 1 && gr.kind != group_kind::matmul) return false;
    const kernel_desc d = lower_group(g, f, gi);
    auto loads_at = [&](int begin, int end, int store) {
      const affine_row& at = d.c.acc[std::size_t(store)].at;
      for (int i = begin; i < end; ++i) {
        const ins& x = d.c.instr[std::size_t(i)];
        const bool reads_b = (x.kind == ins_kind::load || x.kind == ins_kind::gather) &&
                             d.c.acc[std::size_t(x.ref)].node == b;
        // a gather reads b at a run-time row: never known to be the element written
        if (reads_b && (x.kind == ins_kind::gather || !(d.c.acc[std::size_t(x.ref)].at == at)))
          return false;
      }
      return true;
    };
    switch (d.kind) {
      case kernel_kind::loop:
        return loads_at(0, d.c.n_ins, d.store);
      case kernel_kind::row:
        return loads_at(0, d.c.n_ins, d.store);
      case kernel_kind::update:  // reads x at the element it writes, before the window is written
        return b == d.update_x;
      case kernel_kind::gemm:
        for (int q = 0; q < d.n_gemm; ++q) {
          const gemm_part& p = d.gemm[std::size_t(q)];
          if (p.a.base == b || p.b.base == b) return false;
          if (p.out == root && (p.k > 512 || !loads_at(p.epilogue.begin, p.epilogue.end, p.store)))
            return false;
          if (p.out !=
              root)  // another matmul of the group may run after this one: it must not read b
            for (int i = p.epilogue.begin; i < p.epilogue.end; ++i)
              if ((d.c.instr[std::size_t(i)].kind == ins_kind::load ||
                   d.c.instr[std::size_t(i)].kind == ins_kind::gather) &&
                  d.c.acc[std::size_t(d.c.instr[std::size_t(i)].ref)].node == b)
                return false;
        }
        return true;
      default:
        return false;
    }
  }

  constexpr void plan_region(int r) {
    // Schedule positions of this region's groups.
    int pos = 0;
    for (int k = 0; k < f.n_groups; ++k) {
      const int gi = f.order[std::size_t(k)];
      if (f.groups[std::size_t(gi)].region == r) m.position[std::size_t(gi)] = pos++;
    }
    // Buffers: roots of this region's groups, plus repeat scratch areas (keyed by the repeat node).
    std::vector<int> bufs;
    for (int i = 0; i < int(N); ++i) {
      if (g[i].region != r || !is_root(i)) continue;
      const int gi = f.group_of[std::size_t(i)];
      const int p = m.position[std::size_t(gi)];
      if (is_user_memory(i) && g[i].op != op_kind::repeat) continue;
      m.live[std::size_t(i)] = live_range{p, p};
      bufs.push_back(i);
    }
    // Last uses.
    for (int i = 0; i < int(N); ++i) {
      const int gi = f.group_of[std::size_t(i)];
      if (gi < 0 || g[i].region != r) continue;
      for (int k = 0; k < g[i].n_in; ++k) {
        const int a = g[i].in[std::size_t(k)];
        const int ga = f.group_of[std::size_t(a)];
        if (ga < 0 || ga == gi) continue;
        live_range& lr = m.live[std::size_t(a)];
        const int p = m.position[std::size_t(gi)];
        if (p > lr.end) lr.end = p;
      }
    }
    if (r > 0) mark_in_place_body(r);
    // Sizes. A repeat group's area: its own output (unless user memory), a carry buffer unless the
    // body works in place, and the body's arena.
    std::vector<std::int64_t> sz(N, 0);
    for (int b : bufs) {
      const node& n = g[b];
      if (n.op == op_kind::repeat) {
        const std::int64_t out = is_user_memory(b) ? 0 : align_up(n.bytes());
        const std::int64_t carry = m.body_in_place[std::size_t(b)] ? 0 : align_up(n.bytes());
        sz[std::size_t(b)] = out + carry + m.region_arena[std::size_t(n.body)];
      } else {
        sz[std::size_t(b)] = align_up(n.bytes());
      }
      m.size[std::size_t(b)] = sz[std::size_t(b)];
    }
    // In-place sharing: a root may take the storage of an operand buffer that dies in its group.
    std::vector<int> owner(N, -1);  // alias set representative
    for (int b : bufs) owner[std::size_t(b)] = b;
    for (int b : bufs) {
      if (g[b].op == op_kind::repeat) continue;
      const int gi = f.group_of[std::size_t(b)];
      const int p = m.position[std::size_t(gi)];
      for (int i = 0; i < int(N) && m.alias_of[std::size_t(b)] < 0; ++i) {
        if (f.group_of[std::size_t(i)] != gi) continue;
        for (int k = 0; k < g[i].n_in; ++k) {
          const int a = g[i].in[std::size_t(k)];
          if (owner[std::size_t(a)] < 0 || f.group_of[std::size_t(a)] == gi ||
              g[a].op == op_kind::repeat)
            continue;
          const int rep = owner[std::size_t(a)];
          if (m.live[std::size_t(a)].end != p || sz[std::size_t(rep)] != sz[std::size_t(b)])
            continue;
          if (!reads_elementwise(gi, a, b)) continue;
          // Every member of a's set must die by p (the set's range ends at a's last use).
          if (m.live[std::size_t(rep)].end > p) continue;
          m.alias_of[std::size_t(b)] = a;
          owner[std::size_t(b)] = rep;
          m.live[std::size_t(rep)].end = m.live[std::size_t(b)].end;
          break;
        }
      }
    }
    // Representatives, by decreasing size (then by first use), placed best-fit.
    std::vector<int> reps;
    for (int b : bufs)
      if (owner[std::size_t(b)] == b) reps.push_back(b);
    for (std::size_t i = 1; i < reps.size(); ++i)  // insertion sort: stable and constexpr
      for (std::size_t j = i; j > 0; --j) {
        const int a = reps[j - 1], c = reps[j];
        const bool before = sz[std::size_t(c)] > sz[std::size_t(a)] ||
                            (sz[std::size_t(c)] == sz[std::size_t(a)] &&
                             m.live[std::size_t(c)].begin < m.live[std::size_t(a)].begin);
        if (!before) break;
        reps[j - 1] = c;
        reps[j] = a;
      }
    std::vector<int> placed;
    std::int64_t arena = 0;
    for (int b : reps) {
      const std::int64_t need = sz[std::size_t(b)];
      // Occupied intervals of placed buffers live at the same time, sorted by offset.
      std::vector<std::int64_t> lo, hi;
      for (int q : placed) {
        if (!m.live[std::size_t(q)].overlaps(m.live[std::size_t(b)])) continue;
        const std::int64_t o = m.offset[std::size_t(q)], e = o + sz[std::size_t(q)];
        std::size_t at = lo.size();
        lo.push_back(o);
        hi.push_back(e);
        while (at > 0 && lo[at - 1] > lo[at]) {
          std::swap(lo[at - 1], lo[at]);
          std::swap(hi[at - 1], hi[at]);
          --at;
        }
      }
      std::int64_t best = -1, best_gap = 0, cursor = 0;
      for (std::size_t k = 0; k < lo.size(); ++k) {
        if (lo[k] > cursor) {
          const std::int64_t gap = lo[k] - cursor;
          if (gap >= need && (best < 0 || gap < best_gap)) {
            best = cursor;
            best_gap = gap;
          }
        }
        if (hi[k] > cursor) cursor = hi[k];
      }
      if (best < 0) best = cursor;
      m.offset[std::size_t(b)] = best;
      if (best + need > arena) arena = best + need;
      placed.push_back(b);
    }
    for (int b : bufs)
      if (owner[std::size_t(b)] != b) {
        m.offset[std::size_t(b)] = m.offset[std::size_t(owner[std::size_t(b)])];
        m.live[std::size_t(b)] = m.live[std::size_t(owner[std::size_t(b)])];
      }
    // A repeat's area: [output (if not user memory)][carry][body arena].
    for (int b : bufs)
      if (g[b].op == op_kind::repeat) {
        const std::int64_t out = is_user_memory(b) ? 0 : align_up(g[b].bytes());
        m.scratch_offset[std::size_t(b)] = m.offset[std::size_t(b)] + out;
        if (is_user_memory(b)) m.offset[std::size_t(b)] = -1;
      }
    m.region_arena[std::size_t(r)] = arena;
  }

  // Region r's result may overwrite its input when the input's last reader runs before the group
  // that writes the result, or is that group reading it elementwise.
  constexpr void mark_in_place_body(int r) {
    const int ph = g.regions[std::size_t(r)].placeholder, res = g.regions[std::size_t(r)].result;
    const int gres = f.group_of[std::size_t(res)];
    if (gres < 0) return;
    const int pres = m.position[std::size_t(gres)];
    bool ok = true;
    for (int i = 0; i < int(N); ++i) {
      const int gi = f.group_of[std::size_t(i)];
      if (gi < 0 || g[i].region != r) continue;
      for (int k = 0; k < g[i].n_in; ++k) {
        if (g[i].in[std::size_t(k)] != ph) continue;
        const int p = m.position[std::size_t(gi)];
        if (p > pres || (p == pres && !reads_elementwise(gi, ph, res))) ok = false;
      }
    }
    for (int i = 0; i < int(N); ++i)
      if (g[i].op == op_kind::repeat && g[i].body == r) m.body_in_place[std::size_t(i)] = ok;
  }

  constexpr memory_plan<N> run() {
    // Bodies first: the caller's scratch size depends on them.
    for (int r = g.n_regions - 1; r >= 0; --r) plan_region(r);
    m.arena_bytes = m.region_arena[0];
    return m;
  }
};

}  // namespace detail

template <std::size_t N>
constexpr memory_plan<N> plan_memory(const graph::graph<N>& g, const fusion_plan<N>& f) {
  detail::planner<N> p(g, f);
  return p.run();
}

}  // namespace fusedsl::plan
