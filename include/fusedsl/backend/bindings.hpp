#pragma once
// Binding by name, shared by the executors (cpu::executor, cuda::executor): the names of a
// program's inputs and parameters, each looked up by name, and the checks of what a caller binds
// (dtype, shape, data), of its outputs and of its states, with one set of messages.
//
// A value bound once per layer of a repeat (a stacked parameter) has one name per layer: the
// repeat's name, the layer and its own name ("layers.1.attn.q.w").
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/graph/node.hpp"

namespace fusedsl::backend {

// One name a program binds: an input or a parameter, at one layer of its region.
struct binding_slot {
  std::string name;
  int node = -1;
  int iter = 0;  // the layer, for a value inside a repeat's body
};

// The prefix of the names of the values bound in region `region` at layer `iter`: the repeat's
// name and the layer ("layers.1."), empty in region 0.
FUSEDSL_DECL std::string binding_prefix(graph::graph_view g, int region, int iter);

// How many layers region `region` runs: the count of the repeat whose body it is, 1 for region 0.
FUSEDSL_DECL int layers_of_region(graph::graph_view g, int region);

// The error for a name the program does not bind: `binding "wq": the program has no input or
// param of that name (it has: x, w)`, listing the first twelve of `names`.
FUSEDSL_DECL std::string unknown_binding_message(std::string_view name,
                                                 const std::vector<std::string_view>& names);

class binding_table {
 public:
  binding_table() = default;
  // Every input and parameter of `g`, in node order, a value in a repeat's body once per layer.
  // Throws binding_error when two have the same name.
  FUSEDSL_DECL explicit binding_table(graph::graph_view g);

  std::size_t size() const { return slots_.size(); }
  const binding_slot& operator[](std::size_t k) const { return slots_[k]; }
  const std::vector<binding_slot>& slots() const { return slots_; }
  // The slot of (node, layer), or -1. Constant time: a node's layers have consecutive slots.
  int slot_of(int node, int iter) const {
    if (node < 0 || std::size_t(node) >= first_slot_.size() || first_slot_[std::size_t(node)] < 0)
      return -1;
    const std::size_t k = std::size_t(first_slot_[std::size_t(node)] + iter);
    return iter >= 0 && k < slots_.size() && slots_[k].node == node ? int(k) : -1;
  }

  // Names, dtypes and shapes, for executor::bindings().
  FUSEDSL_DECL std::vector<graph::binding_info> infos() const;
  // The slot named `name`; binding_error if the program binds nothing of that name.
  FUSEDSL_DECL std::size_t find(std::string_view name) const;
  // The slot named `name`, checked against what is bound to it: its dtype, shape and data.
  FUSEDSL_DECL std::size_t check(std::string_view name, const tensor_ref& t) const;
  // Throws binding_error naming the first slot k with no memory, `bound[k]` null ("not bound").
  FUSEDSL_DECL void require_bound(const void* const* bound) const;
  // The first input's name (run(x, out)); binding_error if the program has none.
  FUSEDSL_DECL std::string first_input_name() const;

  // Output k's node, checked: k in range and, with `t`, its dtype, shape and data; `to_user`:
  // binding_error if it is a state's new value (written into the state, never to user memory).
  FUSEDSL_DECL static int output_node(graph::graph_view g, int k);
  FUSEDSL_DECL static void check_output(graph::graph_view g, int k, const tensor_ref& t,
                                        bool to_user);
  // The state node called `name`; binding_error if there is none.
  FUSEDSL_DECL static int state_node(graph::graph_view g, std::string_view name);
  // What is read or written as state `name` (of dtype and shape `s`): its dtype, shape and data.
  FUSEDSL_DECL static void check_state(std::string_view name, const tensor_ref& s,
                                       const tensor_ref& t);
  // binding_error when an output's memory overlaps a bound value's or another output's: the
  // kernels read the bindings while others write the outputs, so an aliased buffer would be
  // silently wrong (XLA aliases only the buffers a program declares, JAX only donated ones).
  // `bound[k]` is slot k's memory (null: unbound), `outputs[o]` output o's. No allocation.
  FUSEDSL_DECL void check_no_alias(const void* const* bound, const void* const* outputs) const;

 private:
  graph::graph_view g_;
  std::vector<binding_slot> slots_;
  std::vector<int> first_slot_;  // per node: the slot of its layer 0, -1 for a node bound nowhere
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

}  // namespace fusedsl::backend

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/backend/impl/bindings.ipp"
#endif
