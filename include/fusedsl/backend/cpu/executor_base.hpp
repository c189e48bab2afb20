#pragma once
// What cpu::executor does that is the same for every program, over a program_view: binding by
// name, the weights' packs and storage, the arena, workspace and states, running the groups in
// order (repeats layer by layer), the interpreter (refused groups; interpreter_only), statistics,
// profiling and the memory footprint. Not a template: compiled once in the compiled mode
// (core/compiled_mode.hpp). The executor (cpu/executor.hpp) adds what depends on the program and
// the target: each group's generated kernel, and how weights are packed for the target's GEMM.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/backend/bindings.hpp"
#include "fusedsl/backend/cpu/executor_types.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/backend/cpu/program_view.hpp"
#include "fusedsl/backend/cpu/weight_packs.hpp"
#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/core/tensor.hpp"

namespace fusedsl::cpu {

using graph::op_kind;

class executor_base;

// How an executor is set up for the target (cpu/weight_packing.hpp): the workspace every kernel
// needs, the packs of the weights, and which groups a GEMM pair computes.
struct executor_setup {
  int threads = 1;
  bool interpreter_only = false, amx = false, amx_attention = false, pair_gemms = true;
  std::size_t scratch_floats = 0;    // out: the kernels' per-thread workspace, in floats
  std::vector<packed_weight> packs;  // out: one per product with a parameter B, per layer
  std::vector<char> paired_away;     // out: per group, its product is another group's pair
};

// The executor's hooks: group gi's generated kernel at layer `it`, and the packing of a weight
// bound to slot `slot` (for the target's GEMM).
struct executor_hooks {
  void (*plan)(const program_view&, executor_setup&) = nullptr;
  void (*const* kernels)(executor_base&, int it) = nullptr;  // per group
  void (*pack)(executor_base&, const backend::binding_slot&, const void* data) = nullptr;
};

class executor_base {
 public:
  std::vector<graph::binding_info> bindings() const { return table_.infos(); }
  FUSEDSL_DECL void bind(std::string_view name, tensor_ref t);
  FUSEDSL_DECL void bind_output(int k, tensor_ref t);
  FUSEDSL_DECL void run();
  FUSEDSL_DECL tensor_ref state(std::string_view name);
  FUSEDSL_DECL void reset_states();
  FUSEDSL_DECL void share_packed_weights(std::shared_ptr<packed_weight_cache> cache);
  FUSEDSL_DECL executor_stats stats() const;
  FUSEDSL_DECL memory_footprint footprint() const;
  FUSEDSL_DECL void profile(bool on);
  std::span<const group_profile> profile_results() const { return profile_; }
  std::int64_t arena_bytes() const { return view_.arena_bytes; }
  std::string first_input_name() const { return table_.first_input_name(); }

  // ---- for the group kernels (cpu/group_kernels.hpp) ----
  void** values() { return val_.data(); }
  float* scratch() { return reinterpret_cast<float*>(scratch_.data()); }
  // The pool when `work` (multiply-adds, or element-ops) pays for waking it, else null (run on
  // the calling thread).
  FUSEDSL_DECL kernels::thread_pool* pool_for(double work);
  weight_packs& packs() { return packs_; }
  bool amx_attention() const { return amx_attention_; }
  void pair_ran() { ++pairs_ran_; }
  const program_view& view() const { return view_; }

 protected:
  FUSEDSL_DECL executor_base(const program_view& v, const executor_hooks& hooks, threads t,
                             interpreter_only io, amx_bf16 amx, gemm_pairs pairs);

 private:
  FUSEDSL_DECL void set_region_values(int r, int it, std::byte* body_arena);
  FUSEDSL_DECL void run_region(int r, int it);
  FUSEDSL_DECL void run_group(int gi, int it);
  FUSEDSL_DECL void count_group(int gi, int it, bool generated);
  FUSEDSL_DECL void run_repeat(int rep);
  FUSEDSL_DECL void write_outputs();
  FUSEDSL_DECL void fill_leaf(const graph::node& n, void* dst) const;
  FUSEDSL_DECL void make_states();
  // Groups whose values depend on no input or state: computed once, at build (no parameter
  // either) or at the first call after a parameter is bound (run_once).
  FUSEDSL_DECL void make_constants();
  enum class group_once : char { at_build, at_bind, per_call };  // in order: more varying last
  FUSEDSL_DECL void run_once(group_once when);
  const void* slot_data(int node, int iter) const {
    const int k = table_.slot_of(node, iter);
    return k < 0 ? nullptr : bound_[std::size_t(k)];
  }
  // The interpreter: every value as an f32 copy (one per node of region 0 and of one layer of
  // each body), a group's members computed node by node.
  FUSEDSL_DECL void make_interpreter_buffers();
  float* f32_of(int id) {
    return reinterpret_cast<float*>(interp_.data()) + f32_offset_[std::size_t(id)];
  }
  FUSEDSL_DECL bool reads(int gi, int node) const;
  FUSEDSL_DECL void run_interpreted();
  FUSEDSL_DECL void interpret_region(int r, int it);
  FUSEDSL_DECL void interpret_members(int gi);
  FUSEDSL_DECL void interpret_group(int gi);

  program_view view_;
  executor_hooks hooks_;
  kernels::thread_pool pool_;
  bool interpreter_only_ = false;
  bool amx_ = false;               // amx_bf16 asked for and available
  bool amx_attention_ = false;     // and attention on the tiles too
  std::vector<char> paired_away_;  // per group: run by its pair
  // Per group: when it runs (make_constants). The values of a group run once live in consts_
  // (at const_offset_, per node; -1 elsewhere), not in the arena that later groups reuse.
  std::vector<group_once> once_;
  std::vector<std::int64_t> const_offset_;
  bool params_changed_ = false;    // a parameter was bound since the at_bind groups last ran
  int pairs_ran_ = 0;              // GEMM pairs the current group ran
  bool profiling_ = false;
  std::vector<group_profile> profile_;
  backend::binding_table table_;
  std::vector<const void*> bound_;  // per slot: the user's memory, of the node's dtype
  weight_packs packs_;
  aligned_buffer arena_, scratch_, interp_, interp_scratch_, states_, consts_;
  std::vector<void*> val_;        // per node: its memory in the current call
  std::vector<void*> state_ptr_;  // per state node: its memory (inside states_)
  std::vector<std::size_t> f32_offset_;
  std::array<void*, graph::max_outputs> outputs_{};
  executor_stats stats_{};
  bool split_ = false;  // the current group's kernels used the pool
  std::vector<int> counted_;
};

}  // namespace fusedsl::cpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/backend/cpu/impl/executor_base.ipp"
#endif
