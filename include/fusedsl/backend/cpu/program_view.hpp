#pragma once
// A run-time view of a compiled program's plans (graph, fusion groups, memory, kernel
// descriptors), so that the executor's code that is the same for every program (binding, weight
// packing, workspace, the interpreter, states) is not a template on the program and is compiled
// once (core/compiled_mode.hpp).
#include <cstdint>

#include "fusedsl/graph/node.hpp"
#include "fusedsl/plan/groups.hpp"
#include "fusedsl/plan/lower.hpp"

namespace fusedsl::cpu {

struct program_view {
  graph::graph_view g;
  // fusion (plan::fusion_plan)
  const int* group_of = nullptr;  // per node: its group, or -1
  const plan::fusion_group* groups = nullptr;
  const int* order = nullptr;  // groups in execution order
  int n_groups = 0;
  // memory (plan::memory_plan)
  const std::int64_t* offset = nullptr;  // per node: byte offset in its region's arena, or -1
  const std::int64_t* scratch_offset = nullptr;  // per repeat: its body's scratch
  const bool* body_in_place = nullptr;           // per repeat: the body writes over its input
  std::int64_t arena_bytes = 0;
  // lowering (plan::lowered_plan): per group, its kernel
  const plan::kernel_desc* desc = nullptr;
  int n_refused = 0;

  bool in_arena(int id) const { return offset[id] >= 0; }
  const plan::fusion_group& group(int gi) const { return groups[gi]; }
  const plan::kernel_desc& kernel(int gi) const { return desc[gi]; }
};

template <class Program, class Lowered>
constexpr program_view view_of(const Lowered& lowered) {
  constexpr auto& fp = Program::fusion;
  constexpr auto& mp = Program::memory;
  program_view v;
  v.g = graph::graph_view(Program::graph);
  v.group_of = fp.group_of.data();
  v.groups = fp.groups.data();
  v.order = fp.order.data();
  v.n_groups = fp.n_groups;
  v.offset = mp.offset.data();
  v.scratch_offset = mp.scratch_offset.data();
  v.body_in_place = mp.body_in_place.data();
  v.arena_bytes = mp.arena_bytes;
  v.desc = lowered.desc.data();
  v.n_refused = lowered.n_refused;
  return v;
}

}  // namespace fusedsl::cpu
