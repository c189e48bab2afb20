#pragma once
// Reports of a compiled program: the fusion plan as text and as DOT (groups drawn as clusters), and
// the memory figures as text or one JSON object.
#include <sstream>
#include <string>

#include "fusedsl/graph/print.hpp"
#include "fusedsl/plan/lower.hpp"
#include "fusedsl/plan/stats.hpp"

namespace fusedsl::plan {

// One line on a kernel descriptor: its kind and iteration, or why the group is refused.
inline std::string describe(const kernel_desc& d) {
  std::ostringstream os;
  if (d.refused()) {
    os << "refused (runs in the interpreter): " << d.why;
    return os.str();
  }
  auto space = [&] {
    os << "[";
    for (int t = 0; t < d.rank; ++t) os << (t ? "," : "") << d.extent[std::size_t(t)];
    os << "]";
  };
  os << "generated " << name_of(d.kind) << " kernel";
  switch (d.kind) {
    case kernel_kind::loop:
      os << " over ";
      space();
      os << ", " << d.n_seg << " segment" << (d.n_seg == 1 ? "" : "s") << ", " << d.c.n_ins
         << " instructions";
      break;
    case kernel_kind::reduce:
      os << ": " << graph::name_of(d.reduce_op) << " over ";
      space();
      os << ", " << d.c.n_ins << " instructions";
      break;
    case kernel_kind::row:
      os << ": " << graph::name_of(d.row_op) << " over ";
      space();
      os << ", prologue " << (d.seg[0].end - d.seg[0].begin) << " and epilogue "
         << (d.epilogue.end - d.epilogue.begin) << " instructions";
      break;
    case kernel_kind::gemm:
      for (int q = 0; q < d.n_gemm; ++q) {
        const gemm_part& p = d.gemm[std::size_t(q)];
        os << (q ? "; " : ": ") << p.m << "x" << p.n << "x" << p.k;
        if (!p.folded && p.batch_rank > 0) os << " x" << p.batch.size() << " batches";
        os << (p.b_param ? ", B packed at bind" : ", B packed per call") << ", epilogue "
           << (p.epilogue.end - p.epilogue.begin) << " instructions";
      }
      break;
    case kernel_kind::attention:
      os << ": " << d.att.heads << " heads (" << d.att.kv_heads << " kv), " << d.att.seq_q << "x"
         << d.att.seq_kv << ", head_dim " << d.att.head_dim;
      if (d.att.batch.size() > 1) os << ", batch " << d.att.batch.size();
      if (d.att.causal) os << ", causal";
      if (!d.att.score.empty())
        os << ", score program " << (d.att.score.end - d.att.score.begin) << " instructions";
      break;
    default:
      break;
  }
  return os.str();
}

template <std::size_t N>
std::string print_plan(const graph::graph<N>& g, const fusion_plan<N>& f, const memory_plan<N>& m) {
  std::ostringstream os;
  for (int r = 0; r < g.n_regions; ++r) {
    os << (r == 0 ? std::string("program") : "block body (region " + std::to_string(r) + ")")
       << ": " << f.kernels_in_region(r) << " kernels, arena " << m.region_arena[std::size_t(r)]
       << " bytes\n";
    int k = 0;
    for (int s = 0; s < f.n_groups; ++s) {
      const int gi = f.order[std::size_t(s)];
      const fusion_group& gr = f.groups[std::size_t(gi)];
      if (gr.region != r) continue;
      os << "  kernel " << k++ << ": " << name_of(gr.kind) << "  [";
      bool first = true;
      for (int i = 0; i < int(N); ++i)
        if (f.group_of[std::size_t(i)] == gi) {
          os << (first ? "" : " ") << "%" << i << ":" << graph::name_of(g[i].op);
          first = false;
        }
      os << "]\n";
      for (int q = 0; q < gr.n_roots; ++q) {
        const int root = gr.roots[std::size_t(q)];
        os << "    writes %" << root << " " << name_of(g[root].type) << to_string(g[root].shape);
        if (m.in_arena(root))
          os << " at arena+" << m.offset[std::size_t(root)] << " (" << m.size[std::size_t(root)]
             << " B, live " << m.live[std::size_t(root)].begin << ".."
             << m.live[std::size_t(root)].end << ")";
        else
          os << (g[root].region == 0 ? " to user memory" : " to the block's result buffer");
        if (m.alias_of[std::size_t(root)] >= 0)
          os << " in place of %" << m.alias_of[std::size_t(root)];
        os << "\n";
      }
      os << "    " << describe(lower_group(g, f, gi)) << "\n";
      if (gr.kind == group_kind::repeat) {
        const node& n = g[gr.anchor];
        os << "    runs region " << n.body << " x" << n.count << ", scratch at arena+"
           << m.scratch_offset[std::size_t(gr.anchor)]
           << (m.body_in_place[std::size_t(gr.anchor)] ? ", in place (no carry buffer)"
                                                       : ", with a carry buffer")
           << "\n";
      }
    }
  }
  return os.str();
}

template <std::size_t N>
std::string plan_to_dot(const graph::graph<N>& g, const fusion_plan<N>& f) {
  std::ostringstream os;
  os << "digraph fusedsl_plan {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (int i = 0; i < int(N); ++i)
    if (f.group_of[std::size_t(i)] < 0)
      os << "  n" << i << " [label=\"%" << i << " " << graph::dot_escape(graph::describe(g[i]))
         << "\", style=rounded];\n";
  for (int gi = 0; gi < f.n_groups; ++gi) {
    os << "  subgraph cluster_g" << gi << " {\n    label=\"kernel " << gi << ": "
       << name_of(f.groups[std::size_t(gi)].kind) << "\";\n    style=filled; color=lightgrey;\n";
    for (int i = 0; i < int(N); ++i)
      if (f.group_of[std::size_t(i)] == gi)
        os << "    n" << i << " [label=\"%" << i << " " << graph::dot_escape(graph::describe(g[i]))
           << "\\n"
           << name_of(g[i].type) << to_string(g[i].shape) << "\"];\n";
    os << "  }\n";
  }
  for (int i = 0; i < int(N); ++i)
    for (int k = 0; k < g[i].n_in; ++k)
      os << "  n" << g[i].in[std::size_t(k)] << " -> n" << i << ";\n";
  os << "}\n";
  return os.str();
}

inline std::string to_json(const memory_stats& s, std::string_view config) {
  std::ostringstream os;
  os << "{\"config\": \"" << config << "\", \"kernels_per_layer\": " << s.kernels_per_layer
     << ", \"kernels\": " << s.kernels << ", \"layers\": " << s.layers
     << ", \"naive_bytes\": " << s.naive_bytes << ", \"eager_peak_bytes\": " << s.eager_peak_bytes
     << ", \"fused_bytes\": " << s.fused_bytes << ", \"arena_bytes\": " << s.arena_bytes << "}";
  return os.str();
}

inline std::string to_text(const memory_stats& s, std::string_view config) {
  std::ostringstream os;
  auto pct = [](std::int64_t a, std::int64_t b) { return b ? 100.0 * double(a) / double(b) : 0.0; };
  os.precision(1);
  os << std::fixed;
  os << config << ": " << s.layers << " layer(s), " << s.kernels_per_layer << " kernels per layer, "
     << s.kernels << " kernels per call\n"
     << "  naive (unfused, all intermediates)  " << s.naive_bytes << " B\n"
     << "  eager peak (unfused, freed early)   " << s.eager_peak_bytes << " B\n"
     << "  fused, unplanned                    " << s.fused_bytes << " B\n"
     << "  fused, planned arena                " << s.arena_bytes << " B  ("
     << pct(s.arena_bytes, s.naive_bytes) << "% of naive, "
     << pct(s.arena_bytes, s.eager_peak_bytes) << "% of eager peak)\n";
  return os.str();
}

}  // namespace fusedsl::plan
