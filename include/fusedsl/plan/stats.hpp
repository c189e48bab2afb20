#pragma once
// plan::memory_stats: the figures that compare fused and planned memory with the alternatives.
//   naive_bytes       every intermediate materialised at once, unfused (each layer counted);
//   eager_peak_bytes  unfused, one op at a time, each intermediate freed after its last use;
//   fused_bytes       fused, every group result materialised, no reuse;
//   arena_bytes       fused and planned.
// Intermediates exclude inputs, params and outputs (user memory) and inlined constants/iota.
#include <vector>

#include "fusedsl/plan/memory.hpp"

namespace fusedsl::plan {

struct memory_stats {
  std::int64_t naive_bytes = 0;
  std::int64_t eager_peak_bytes = 0;
  std::int64_t fused_bytes = 0;
  std::int64_t arena_bytes = 0;
  int kernels = 0;             // kernels per call (a stacked block counts once per layer)
  int kernels_per_layer = 0;   // kernels of the (first) block body, or of the graph without stacks
  int layers = 1;
};

namespace detail {

template <std::size_t N>
constexpr bool is_materialised_intermediate(const graph::graph<N>& g, int i) {
  const node& n = g[i];
  if (graph::is_leaf(n.op) || n.op == op_kind::repeat) return false;
  for (int o = 0; o < g.n_outputs; ++o)
    if (g.outputs[std::size_t(o)] == i) return false;
  for (int r = 1; r < g.n_regions; ++r)
    if (g.regions[std::size_t(r)].result == i) return false;
  return true;
}

// Eager peak of one region, one op at a time in node order; a repeat node holds its body's peak.
// In a block body, the block's input (the previous layer's output) is an intermediate too: it is
// held until its last use in the body.
template <std::size_t N>
constexpr std::int64_t eager_peak(const graph::graph<N>& g, int r,
                                  const std::vector<std::int64_t>& body_peak) {
  std::vector<int> last(N, -1);
  for (int i = 0; i < int(N); ++i)
    for (int k = 0; k < g[i].n_in; ++k) last[std::size_t(g[i].in[std::size_t(k)])] = i;
  auto counted = [&](int i) {
    return is_materialised_intermediate(g, i) || g[i].op == op_kind::placeholder;
  };
  std::int64_t live = 0, peak = 0;
  for (int i = 0; i < int(N); ++i) {
    const node& n = g[i];
    if (n.region != r) continue;
    std::int64_t during = live;
    if (counted(i)) during += n.bytes();
    if (n.op == op_kind::repeat) {
      bool user = false;
      for (int o = 0; o < g.n_outputs; ++o) user = user || g.outputs[std::size_t(o)] == i;
      during += body_peak[std::size_t(n.body)] + (user ? 0 : n.bytes());
    }
    if (during > peak) peak = during;
    live = during - (n.op == op_kind::repeat ? body_peak[std::size_t(n.body)] : 0);
    for (int k = 0; k < n.n_in; ++k) {
      const int a = n.in[std::size_t(k)];
      if (last[std::size_t(a)] == i && counted(a)) live -= g[a].bytes();
    }
  }
  return peak;
}

}  // namespace detail

template <std::size_t N>
constexpr memory_stats stats(const graph::graph<N>& g, const fusion_plan<N>& f,
                             const memory_plan<N>& m) {
  memory_stats s;
  // Multiplicity of each region: how many times its nodes run per call.
  std::vector<std::int64_t> times(graph::max_regions, 0);
  times[0] = 1;
  for (int i = 0; i < int(N); ++i)
    if (g[i].op == op_kind::repeat)
      times[std::size_t(g[i].body)] += times[std::size_t(g[i].region)] * g[i].count;
  for (int i = 0; i < int(N); ++i) {
    if (detail::is_materialised_intermediate(g, i))
      s.naive_bytes += g[i].bytes() * times[std::size_t(g[i].region)];
    if (g[i].op == op_kind::repeat) {
      bool user = false;
      for (int o = 0; o < g.n_outputs; ++o) user = user || g.outputs[std::size_t(o)] == i;
      if (!user) s.naive_bytes += g[i].bytes() * times[std::size_t(g[i].region)];
    }
  }
  std::vector<std::int64_t> body_peak(graph::max_regions, 0);
  for (int r = g.n_regions - 1; r >= 0; --r)
    body_peak[std::size_t(r)] = detail::eager_peak(g, r, body_peak);
  s.eager_peak_bytes = body_peak[0];
  for (int i = 0; i < int(N); ++i) {
    const int gi = f.group_of[std::size_t(i)];
    if (gi < 0 || !detail::is_materialised_intermediate(g, i)) continue;
    const fusion_group& gr = f.groups[std::size_t(gi)];
    for (int k = 0; k < gr.n_roots; ++k)
      if (gr.roots[std::size_t(k)] == i)
        s.fused_bytes += align_up(g[i].bytes()) * times[std::size_t(g[i].region)];
  }
  s.arena_bytes = m.arena_bytes;
  for (int gi = 0; gi < f.n_groups; ++gi) {
    const fusion_group& gr = f.groups[std::size_t(gi)];
    if (gr.kind != group_kind::repeat) s.kernels += int(times[std::size_t(gr.region)]);
  }
  int layers = 0;
  for (int i = 0; i < int(N); ++i)
    if (g[i].op == op_kind::repeat) layers += g[i].count;
  s.layers = layers > 0 ? layers : 1;
  s.kernels_per_layer = g.n_regions > 1 ? f.kernels_in_region(1) : s.kernels;
  return s;
}

}  // namespace fusedsl::plan
