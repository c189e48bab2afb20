#pragma once
// The bodies of fusedsl/backend/cpu/executor_base.hpp's functions: included at the end of that
// header in header-only mode, compiled once into fusedsl::compiled otherwise
// (core/compiled_mode.hpp).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>

#include "fusedsl/backend/cpu/executor_base.hpp"
#include "fusedsl/backend/cpu/interpret.hpp"
#include "fusedsl/backend/cpu/values.hpp"
#include "fusedsl/plan/memory.hpp"

namespace fusedsl::cpu {

namespace detail {

inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace detail

FUSEDSL_DECL executor_base::executor_base(const program_view& v, const executor_hooks& hooks,
                                          threads t, interpreter_only io, amx_bf16 amx,
                                          gemm_pairs pairs)
    : view_(v),
      hooks_(hooks),
      pool_(t.count, t.spin),
      interpreter_only_(io.value),
      amx_(amx.value),
      amx_attention_(amx.value && amx.attention),
      table_(v.g) {
  const std::size_t n = std::size_t(v.g.size), groups = std::size_t(v.n_groups);
  executor_setup setup;
  setup.threads = pool_.size();
  setup.interpreter_only = interpreter_only_;
  setup.amx = amx_;
  setup.amx_attention = amx_attention_;
  setup.pair_gemms = pairs.value;
  setup.paired_away.assign(groups, 0);
  hooks_.plan(view_, setup);
  paired_away_ = std::move(setup.paired_away);
  packs_.packs = std::move(setup.packs);
  bound_.assign(table_.size(), nullptr);
  profile_.resize(groups);
  val_.assign(n, nullptr);
  state_ptr_.assign(n, nullptr);
  f32_offset_.assign(n, 0);
  arena_ = aligned_buffer(std::size_t(v.arena_bytes) + 64);
  scratch_ = aligned_buffer(setup.scratch_floats * sizeof(float) + 64);
  packs_.assign_storage();
  if (interpreter_only_ || v.n_refused > 0) make_interpreter_buffers();
  make_states();
  for (int o = 0; o < v.g.n_outputs; ++o) {
    const int st = v.g.state_of_output(o);
    outputs_[std::size_t(o)] = st >= 0 ? state_ptr_[std::size_t(st)] : nullptr;
  }
  counted_.reserve(groups + 1);
  make_constants();
}

FUSEDSL_DECL void executor_base::bind(std::string_view name, tensor_ref t) {
  const std::size_t k = table_.check(name, t);
  bound_[k] = t.data;
  const backend::binding_slot& s = table_[k];
  if (view_.g[s.node].op == op_kind::param) {
    hooks_.pack(*this, s, t.data);
    params_changed_ = true;  // the groups of parameters alone run again, at the next call
  }
}

FUSEDSL_DECL void executor_base::bind_output(int k, tensor_ref t) {
  backend::binding_table::check_output(view_.g, k, t, true);
  outputs_[std::size_t(k)] = t.data;
}

FUSEDSL_DECL void executor_base::run() {
  table_.require_bound(bound_.data());
  for (int o = 0; o < view_.g.n_outputs; ++o)
    if (outputs_[std::size_t(o)] == nullptr)
      throw binding_error("output " + std::to_string(o) + ": not bound");
  table_.check_no_alias(bound_.data(), outputs_.data());
  if (interpreter_only_) {
    run_interpreted();
    return;
  }
  set_region_values(0, 0, nullptr);
  if (params_changed_) {
    run_once(group_once::at_bind);
    params_changed_ = false;
  }
  run_region(0, 0);
  write_outputs();
}

// An output that is a leaf, or the same node as an earlier output, is copied into place.
FUSEDSL_DECL void executor_base::write_outputs() {
  const graph::graph_view& g = view_.g;
  for (int o = 0; o < g.n_outputs; ++o) {
    const int id = g.outputs[o];
    const graph::node& n = g[id];
    void* dst = outputs_[std::size_t(o)];
    if (n.op == op_kind::constant || n.op == op_kind::iota) {
      fill_leaf(n, dst);
      continue;
    }
    const void* src = graph::is_leaf(n.op) ? slot_data(id, 0) : val_[std::size_t(id)];
    if (src != dst) std::memcpy(dst, src, std::size_t(n.bytes()));
  }
}

FUSEDSL_DECL tensor_ref executor_base::state(std::string_view name) {
  const int i = backend::binding_table::state_node(view_.g, name);
  return tensor_ref{state_ptr_[std::size_t(i)], view_.g[i].type, view_.g[i].shape};
}

FUSEDSL_DECL void executor_base::reset_states() {
  if (states_.size()) std::memset(states_.data(), 0, states_.size());
}

FUSEDSL_DECL void executor_base::share_packed_weights(std::shared_ptr<packed_weight_cache> cache) {
  for (std::size_t k = 0; k < table_.size(); ++k)
    if (view_.g[table_[k].node].op == op_kind::param && bound_[k] != nullptr)
      throw binding_error("share_packed_weights: \"" + table_[k].name +
                          "\" is bound already (share before binding any parameter)");
  packs_.share(std::move(cache));
}

FUSEDSL_DECL executor_stats executor_base::stats() const {
  executor_stats s = stats_;
  s.amx_matmuls += packs_.amx_ready();
  return s;
}

FUSEDSL_DECL memory_footprint executor_base::footprint() const {
  memory_footprint f;
  f.arena = arena_.size();
  f.workspace = scratch_.size();
  f.packed_weights = packs_.own_bytes();
  f.shared_weights = packs_.shared_bytes();
  f.interpreter = interp_.size() + interp_scratch_.size();
  f.states = states_.size();
  f.constants = consts_.size();
  return f;
}

FUSEDSL_DECL void executor_base::profile(bool on) {
  profiling_ = on;
  for (int gi = 0; gi < view_.n_groups; ++gi) {
    group_profile& p = profile_[std::size_t(gi)];
    p = group_profile{};
    p.kind = view_.group(gi).kind;
    p.region = view_.group(gi).region;
  }
}

FUSEDSL_DECL kernels::thread_pool* executor_base::pool_for(double work) {
  const double threshold = pool_.spin().count() > 0 ? double(FUSEDSL_CPU_PARALLEL_MACS_POLLING)
                                                    : double(FUSEDSL_CPU_PARALLEL_MACS);
  if (pool_.size() == 1 || work < threshold) return nullptr;
  split_ = true;
  return &pool_;
}

// ---- per call ----

// Pointers for every value of region r at iteration it.
FUSEDSL_DECL void executor_base::set_region_values(int r, int it, std::byte* body_arena) {
  const graph::graph_view& g = view_.g;
  std::byte* base = r == 0 ? arena_.data() : body_arena;
  for (int i = 0; i < g.size; ++i) {
    const graph::node& n = g[i];
    if (n.region != r) continue;
    if (n.op == op_kind::input || n.op == op_kind::param)
      val_[std::size_t(i)] = const_cast<void*>(slot_data(i, it));
    else if (n.op == op_kind::state)
      val_[std::size_t(i)] = state_ptr_[std::size_t(i)];
    else if (const_offset_[std::size_t(i)] >= 0)
      val_[std::size_t(i)] = consts_.data() + const_offset_[std::size_t(i)];
    else if (view_.in_arena(i))
      val_[std::size_t(i)] = base + view_.offset[i];
  }
  if (r == 0)  // computed outputs are written straight to user memory; leaf outputs are copied
    for (int o = 0; o < g.n_outputs; ++o)
      if (!graph::is_leaf(g[g.outputs[o]].op))
        val_[std::size_t(g.outputs[o])] = outputs_[std::size_t(o)];
}

FUSEDSL_DECL void executor_base::run_region(int r, int it) {
  for (int k = 0; k < view_.n_groups; ++k) {
    const int gi = view_.order[k];
    if (view_.group(gi).region == r && once_[std::size_t(gi)] == group_once::per_call)
      run_group(gi, it);
  }
}

FUSEDSL_DECL void executor_base::run_group(int gi, int it) {
  const plan::fusion_group& gr = view_.group(gi);
  if (gr.kind == plan::group_kind::repeat) {
    run_repeat(gr.anchor);
    return;
  }
  const auto t0 =
      profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const double c0 = profiling_ ? detail::thread_cpu_seconds() : 0.0;
  split_ = false;
  pairs_ran_ = 0;
  const bool generated = !view_.kernel(gi).refused();
  if (paired_away_[std::size_t(gi)]) {  // its product is its pair's second accumulator
    count_group(gi, it, true);
    return;
  }
  if (generated)
    hooks_.kernels[gi](*this, it);
  else
    interpret_group(gi);
  if (profiling_) {
    group_profile& pr = profile_[std::size_t(gi)];
    pr.calls += 1;
    pr.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pr.cpu_seconds += detail::thread_cpu_seconds() - c0;
  }
  count_group(gi, it, generated);
}

FUSEDSL_DECL void executor_base::count_group(int gi, int it, bool generated) {
  if (it != 0 || counted_.size() >= counted_.capacity()) return;
  for (int c : counted_)
    if (c == gi) return;
  counted_.push_back(gi);
  (generated ? stats_.fast_groups : stats_.interpreted_groups) += 1;
  stats_.parallel_groups += split_;
  stats_.paired_gemms += pairs_ran_;
  if (generated && view_.group(gi).kind == plan::group_kind::attention && amx_attention_ &&
      view_.kernel(gi).att.score.empty())
    stats_.amx_attention += 1;
}

FUSEDSL_DECL void executor_base::run_repeat(int rep) {
  const graph::graph_view& g = view_.g;
  const graph::node& n = g[rep];
  const int r = n.body;
  const int ph = g.regions[r].placeholder, res = g.regions[r].result;
  void* dest = val_[std::size_t(rep)];
  if (dest == nullptr) dest = arena_.data() + view_.offset[rep];
  std::byte* scratch_base = arena_.data() + view_.scratch_offset[rep];
  const bool in_place = view_.body_in_place[rep];
  void* carry = scratch_base;
  std::byte* body_arena = scratch_base + (in_place ? 0 : plan::align_up(n.bytes()));
  const void* input = val_[std::size_t(n.in[0])];
  for (int it = 0; it < n.count; ++it) {
    void* out = in_place ? dest : (((n.count - 1 - it) % 2 == 0) ? dest : carry);
    set_region_values(r, it, body_arena);
    val_[std::size_t(ph)] = const_cast<void*>(input);
    val_[std::size_t(res)] = out;
    run_region(r, it);
    input = out;
  }
}

// A constant or iota written as an output.
FUSEDSL_DECL void executor_base::fill_leaf(const graph::node& n, void* dst) const {
  std::vector<float> tmp(std::size_t(n.shape.size() > 0 ? n.shape.size() : 1));
  interpret(view_.g.nodes, n, nullptr, tmp.data());
  store_from_f32(n.type, tmp.data(), dst, n.shape.size());
}

FUSEDSL_DECL void executor_base::make_states() {
  const graph::graph_view& g = view_.g;
  std::size_t bytes = 0;
  std::vector<std::size_t> at(std::size_t(g.size), 0);
  for (int i = 0; i < g.size; ++i)
    if (g[i].op == op_kind::state) {
      at[std::size_t(i)] = bytes;
      bytes += std::size_t(plan::align_up(g[i].bytes()));
    }
  states_ = aligned_buffer(bytes);
  for (int i = 0; i < g.size; ++i)
    if (g[i].op == op_kind::state) state_ptr_[std::size_t(i)] = states_.data() + at[std::size_t(i)];
}

// Rule 0 of docs/fusion.md recomputes a cheap producer in every group that reads it; a group of
// the top level whose value depends on no input or state is instead computed once, by its
// generated kernel, into storage of its own that no other group reuses: here, when it depends on
// nothing at all (iota tables, sin and cos of positions, masks and buckets from iota); at the
// first call after a parameter is bound, when it depends on parameters (a bias gathered from a
// table by position buckets, a weight's transpose or slice, a dequantized weight). A group that
// writes a program output still runs on every call (it writes into the caller's memory), and the
// interpreter modes compute everything on every call.
FUSEDSL_DECL void executor_base::make_constants() {
  const graph::graph_view& g = view_.g;
  once_.assign(std::size_t(view_.n_groups), group_once::per_call);
  const_offset_.assign(std::size_t(g.size), -1);
  if (interpreter_only_) return;
  // Per node: what its value depends on, the most varying of its operands'.
  std::vector<group_once> dep(std::size_t(g.size), group_once::at_build);
  for (int i = 0; i < g.size; ++i) {
    const graph::node& n = g[i];
    group_once d = n.region != 0 || n.op == op_kind::input || n.op == op_kind::state ||
                           n.op == op_kind::placeholder
                       ? group_once::per_call
                   : n.op == op_kind::param ? group_once::at_bind
                                            : group_once::at_build;
    for (int k = 0; k < n.n_in; ++k) d = std::max(d, dep[std::size_t(n.in[std::size_t(k)])]);
    dep[std::size_t(i)] = d;
  }
  // In execution order, so that every group a group reads from is decided before it: a group
  // that reads the value of a group run per call (one writing an output) runs per call too.
  for (int k = 0; k < view_.n_groups; ++k) {
    const int gi = view_.order[k];
    const plan::fusion_group& gr = view_.group(gi);
    group_once o = gr.region == 0 && gr.kind != plan::group_kind::repeat &&
                           !view_.kernel(gi).refused() && !paired_away_[std::size_t(gi)]
                       ? group_once::at_build
                       : group_once::per_call;
    for (int i = 0; i < g.size && o != group_once::per_call; ++i) {
      if (view_.group_of[i] != gi) continue;
      o = std::max(o, dep[std::size_t(i)]);
      for (int a = 0; a < g[i].n_in; ++a) {
        const int from = view_.group_of[g[i].in[std::size_t(a)]];
        if (from >= 0 && from != gi) o = std::max(o, once_[std::size_t(from)]);
      }
    }
    for (int j = 0; j < g.n_outputs; ++j)
      if (view_.group_of[g.outputs[j]] == gi) o = group_once::per_call;
    once_[std::size_t(gi)] = o;
  }
  std::int64_t bytes = 0;
  for (int i = 0; i < g.size; ++i) {
    const int gi = view_.group_of[i];
    if (gi < 0 || once_[std::size_t(gi)] == group_once::per_call || !view_.in_arena(i)) continue;
    const_offset_[std::size_t(i)] = bytes;
    bytes += plan::align_up(g[i].bytes());
  }
  if (bytes == 0) {  // nothing kept: every group runs per call
    once_.assign(std::size_t(view_.n_groups), group_once::per_call);
    return;
  }
  consts_ = aligned_buffer(std::size_t(bytes));
  for (group_once o : once_) stats_.parameter_groups += o == group_once::at_bind;
  set_region_values(0, 0, nullptr);
  run_once(group_once::at_build);
}

// The groups computed once of kind `when`, in execution order (values set for region 0).
FUSEDSL_DECL void executor_base::run_once(group_once when) {
  for (int k = 0; k < view_.n_groups; ++k) {
    const int gi = view_.order[k];
    if (once_[std::size_t(gi)] != when) continue;
    run_group(gi, 0);
    if (when == group_once::at_build) stats_.constant_groups += 1;
  }
}

// ---- the interpreter (refused groups; every group with interpreter_only) ----

// Whether group gi reads `node` (one of its members does).
FUSEDSL_DECL bool executor_base::reads(int gi, int node) const {
  const graph::graph_view& g = view_.g;
  for (int j = 0; j < g.size; ++j)
    if (view_.group_of[j] == gi)
      for (int k = 0; k < g[j].n_in; ++k)
        if (g[j].in[std::size_t(k)] == node) return true;
  return false;
}

FUSEDSL_DECL void executor_base::make_interpreter_buffers() {
  const graph::graph_view& g = view_.g;
  std::size_t floats = 0, scratch = 64;
  for (int i = 0; i < g.size; ++i) {
    f32_offset_[std::size_t(i)] = floats;
    floats += std::size_t(g[i].shape.size()) + 16;
  }
  for (int gi = 0; gi < view_.n_groups; ++gi) {
    std::size_t need = 64;
    for (int i = 0; i < g.size; ++i)
      if (view_.group_of[i] == gi || reads(gi, i)) need += std::size_t(g[i].shape.size()) + 16;
    scratch = std::max(scratch, need);
  }
  interp_ = aligned_buffer(floats * sizeof(float) + 64);
  interp_scratch_ = aligned_buffer(scratch * sizeof(float) + 64);
}

// Every group through the interpreter, values in f32 copies.
FUSEDSL_DECL void executor_base::run_interpreted() {
  const graph::graph_view& g = view_.g;
  for (int i = 0; i < g.size; ++i) {
    if (g[i].region == 0 && (g[i].op == op_kind::input || g[i].op == op_kind::param))
      load_to_f32(g[i].type, slot_data(i, 0), f32_of(i), g[i].shape.size());
    if (g[i].op == op_kind::state)
      load_to_f32(g[i].type, state_ptr_[std::size_t(i)], f32_of(i), g[i].shape.size());
  }
  interpret_region(0, 0);
  for (int o = 0; o < g.n_outputs; ++o) {
    const int id = g.outputs[o];
    const graph::node& n = g[id];
    if (n.op == op_kind::constant || n.op == op_kind::iota) {
      fill_leaf(n, outputs_[std::size_t(o)]);
      continue;
    }
    store_from_f32(n.type, f32_of(id), outputs_[std::size_t(o)], n.shape.size());
  }
}

FUSEDSL_DECL void executor_base::interpret_region(int r, int it) {
  const graph::graph_view& g = view_.g;
  for (int k = 0; k < view_.n_groups; ++k) {
    const int gi = view_.order[k];
    const plan::fusion_group& gr = view_.group(gi);
    if (gr.region != r) continue;
    if (gr.kind == plan::group_kind::repeat) {
      const graph::node& n = g[gr.anchor];
      const int body = n.body, ph = g.regions[body].placeholder, res = g.regions[body].result;
      const std::size_t bytes = std::size_t(n.shape.size()) * sizeof(float);
      std::memcpy(f32_of(ph), f32_of(n.in[0]), bytes);
      for (int layer = 0; layer < n.count; ++layer) {
        for (int i = 0; i < g.size; ++i)
          if (g[i].region == body && (g[i].op == op_kind::input || g[i].op == op_kind::param))
            load_to_f32(g[i].type, slot_data(i, layer), f32_of(i), g[i].shape.size());
        interpret_region(body, layer);
        std::memcpy(f32_of(ph), f32_of(res), bytes);
      }
      std::memcpy(f32_of(gr.anchor), f32_of(ph), bytes);
      continue;
    }
    interpret_members(gi);
    count_group(gi, it, false);
  }
}

FUSEDSL_DECL void executor_base::interpret_members(int gi) {
  const graph::graph_view& g = view_.g;
  float* cursor = reinterpret_cast<float*>(interp_scratch_.data());
  for (int i = 0; i < g.size; ++i) {
    if (view_.group_of[i] != gi) continue;
    const graph::node& n = g[i];
    const float* ops[graph::max_operands]{};
    for (int k = 0; k < n.n_in; ++k) {
      const int o = n.in[std::size_t(k)];
      const graph::node& on = g[o];
      if ((on.op == op_kind::constant || on.op == op_kind::iota) && view_.group_of[o] != gi) {
        interpret(g.nodes, on, nullptr, cursor);
        ops[k] = cursor;
        cursor += on.shape.size() + 16;
      } else {
        ops[k] = f32_of(o);
      }
    }
    float* y = f32_of(i);
    interpret(g.nodes, n, ops, y);
    // bf16/f16/i32/bool values are rounded to their dtype, as the generated kernels do
    if (n.type != dtype::f32) {
      store_from_f32(n.type, y, cursor, n.shape.size());
      load_to_f32(n.type, cursor, y, n.shape.size());
    }
  }
}

// A refused group in a normal run: operands as f32 copies, the group interpreted, its roots
// converted into their buffers.
FUSEDSL_DECL void executor_base::interpret_group(int gi) {
  const graph::graph_view& g = view_.g;
  for (int i = 0; i < g.size; ++i) {
    if (view_.group_of[i] == gi || !reads(gi, i)) continue;
    if (g[i].op != op_kind::constant && g[i].op != op_kind::iota)
      load_to_f32(g[i].type, val_[std::size_t(i)], f32_of(i), g[i].shape.size());
  }
  interpret_members(gi);
  const plan::fusion_group& gr = view_.group(gi);
  for (int k = 0; k < gr.n_roots; ++k) {
    const int id = gr.roots[std::size_t(k)];
    store_from_f32(g[id].type, f32_of(id), val_[std::size_t(id)], g[id].shape.size());
  }
}

}  // namespace fusedsl::cpu
