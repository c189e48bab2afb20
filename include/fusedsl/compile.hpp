#pragma once
// fusedsl::compile: the one step, and the front door above the expressions (expr/) and the
// passes (plan/). The result's type carries the node table, the fusion plan and the memory plan as
// constexpr values; every backend takes a program.
#include "fusedsl/expr/flatten.hpp"
#include "fusedsl/expr/nn.hpp"
#include "fusedsl/plan/fusion.hpp"
#include "fusedsl/plan/memory.hpp"
#include "fusedsl/plan/stats.hpp"
#include "fusedsl/plan/verify.hpp"

namespace fusedsl {

template <expression... Outs>
struct program {
  static constexpr const auto& graph = expr::flattened<Outs...>::value;
  static constexpr std::size_t node_count = expr::flattened<Outs...>::size;
  static constexpr plan::fusion_plan<node_count> fusion = plan::fuse(graph);
  static constexpr plan::memory_plan<node_count> memory = plan::plan_memory(graph, fusion);
  static constexpr plan::verify_result check = plan::verify(graph, fusion, memory);
  static_assert(
      check.ok(),
      "compile: the fusion/memory plan failed verification (a fusedsl bug; please report it)");
  // States (fd::update) are written in place by the kernel computing their new value.
  static constexpr plan::state_problem states = plan::check_states(graph, fusion);
  static_assert(states != plan::state_problem::read_after_update,
                "update: a state is read by a kernel that runs after the one that writes its new "
                "value (read the new value instead, or compute what needs the old one from it "
                "first)");
  static_assert(states != plan::state_problem::read_at_other_elements,
                "update: the kernel writing a state's new value reads the state at elements other "
                "than the one it writes");

  static constexpr int kernel_count() { return fusion.n_groups; }
  static constexpr std::int64_t arena_bytes() { return memory.arena_bytes; }
  static constexpr plan::memory_stats stats() { return plan::stats(graph, fusion, memory); }
};

// Flatten, fuse and plan: all at compile time.
template <expression... Outs>
constexpr program<Outs...> compile(Outs...) { return {}; }

}  // namespace fusedsl
