#pragma once
// The bodies of fusedsl/backend/bindings.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).
#include <cstdint>

#include "fusedsl/backend/bindings.hpp"

namespace fusedsl::backend {

namespace detail {

inline std::string expected_got(const tensor_ref& want, const tensor_ref& got) {
  return "expected " + std::string(name_of(want.type)) + to_string(want.shape) + ", got " +
         std::string(name_of(got.type)) + to_string(got.shape);
}

}  // namespace detail

FUSEDSL_DECL std::string binding_prefix(graph::graph_view g, int region, int iter) {
  for (int i = 0; region != 0 && i < g.size; ++i)
    if (g[i].op == graph::op_kind::repeat && g[i].body == region)
      return std::string(g[i].name.view()) + "." + std::to_string(iter) + ".";
  return {};
}

FUSEDSL_DECL int layers_of_region(graph::graph_view g, int region) {
  for (int i = 0; region != 0 && i < g.size; ++i)
    if (g[i].op == graph::op_kind::repeat && g[i].body == region) return g[i].count;
  return 1;
}

FUSEDSL_DECL std::string unknown_binding_message(std::string_view name,
                                                 const std::vector<std::string_view>& names) {
  std::string r =
      "binding \"" + std::string(name) + "\": the program has no input or param of that name";
  const std::size_t shown = names.size() < 12 ? names.size() : 12;
  for (std::size_t i = 0; i < shown; ++i) {
    r += i ? ", " : " (it has: ";
    r += names[i];
  }
  if (shown < names.size()) r += ", ...";
  return r + (shown ? ")" : " (it has no bindings)");
}

FUSEDSL_DECL binding_table::binding_table(graph::graph_view g)
    : g_(g), first_slot_(std::size_t(g.size > 0 ? g.size : 0), -1) {
  for (int i = 0; i < g.size; ++i) {
    const graph::node& n = g[i];
    if (n.op != graph::op_kind::input && n.op != graph::op_kind::param) continue;
    first_slot_[std::size_t(i)] = int(slots_.size());
    const int layers = layers_of_region(g, n.region);
    for (int it = 0; it < layers; ++it) {
      binding_slot s;
      s.name = binding_prefix(g, n.region, it) + std::string(n.name.view());
      s.node = i;
      s.iter = it;
      if (by_name_.count(s.name)) throw binding_error("binding \"" + s.name + "\": declared twice");
      by_name_.emplace(s.name, slots_.size());
      slots_.push_back(std::move(s));
    }
  }
}

FUSEDSL_DECL std::vector<graph::binding_info> binding_table::infos() const {
  std::vector<graph::binding_info> r;
  r.reserve(slots_.size());
  for (const binding_slot& s : slots_) r.push_back(graph::binding_info::of(g_, s.node, s.name));
  return r;
}

FUSEDSL_DECL std::size_t binding_table::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    std::vector<std::string_view> names;
    names.reserve(slots_.size());
    for (const binding_slot& s : slots_) names.push_back(s.name);
    throw binding_error(unknown_binding_message(name, names));
  }
  return it->second;
}

FUSEDSL_DECL std::size_t binding_table::check(std::string_view name, const tensor_ref& t) const {
  const std::size_t k = find(name);
  const binding_slot& s = slots_[k];
  const graph::node& n = g_[s.node];
  if (t.type != n.type || !(t.shape == n.shape))
    throw binding_error("binding \"" + s.name +
                        "\": " + detail::expected_got(tensor_ref{nullptr, n.type, n.shape}, t));
  if (t.data == nullptr) throw binding_error("binding \"" + s.name + "\": null data");
  return k;
}

FUSEDSL_DECL void binding_table::require_bound(const void* const* bound) const {
  for (std::size_t k = 0; k < slots_.size(); ++k)
    if (bound[k] == nullptr) throw binding_error("binding \"" + slots_[k].name + "\": not bound");
}

FUSEDSL_DECL std::string binding_table::first_input_name() const {
  for (const binding_slot& s : slots_)
    if (g_[s.node].op == graph::op_kind::input) return s.name;
  throw binding_error("the program has no input");
}

FUSEDSL_DECL int binding_table::output_node(graph::graph_view g, int k) {
  if (k < 0 || k >= g.n_outputs)
    throw binding_error("output " + std::to_string(k) + ": the program has " +
                        std::to_string(g.n_outputs) + " outputs");
  return g.outputs[k];
}

FUSEDSL_DECL void binding_table::check_output(graph::graph_view g, int k, const tensor_ref& t,
                                              bool to_user) {
  const graph::node& n = g[output_node(g, k)];
  if (const int st = g.state_of_output(k); to_user && st >= 0)
    throw binding_error("output " + std::to_string(k) + ": it is the new value of state \"" +
                        std::string(g[st].name.view()) +
                        "\", written into the state (read it with state())");
  if (t.type != n.type || !(t.shape == n.shape))
    throw binding_error("output " + std::to_string(k) + ": " +
                        detail::expected_got(tensor_ref{nullptr, n.type, n.shape}, t));
  if (t.data == nullptr) throw binding_error("output " + std::to_string(k) + ": null data");
}

FUSEDSL_DECL int binding_table::state_node(graph::graph_view g, std::string_view name) {
  for (int i = 0; i < g.size; ++i)
    if (g[i].op == graph::op_kind::state && g[i].name.view() == name) return i;
  throw binding_error("state \"" + std::string(name) + "\": the program has no state of that name");
}

FUSEDSL_DECL void binding_table::check_state(std::string_view name, const tensor_ref& s,
                                             const tensor_ref& t) {
  if (t.type != s.type || !(t.shape == s.shape))
    throw binding_error("state \"" + std::string(name) + "\": " + detail::expected_got(s, t));
  if (t.data == nullptr) throw binding_error("state \"" + std::string(name) + "\": null data");
}

FUSEDSL_DECL void binding_table::check_no_alias(const void* const* bound,
                                                const void* const* outputs) const {
  auto at = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  auto overlap = [&](const void* a, std::size_t na, const void* b, std::size_t nb) {
    return at(a) < at(b) + nb && at(b) < at(a) + na;
  };
  auto bytes_of = [&](int node) { return std::size_t(g_[node].bytes()); };
  for (int o = 0; o < g_.n_outputs; ++o) {
    const void* out = outputs[o];
    const std::size_t n_out = bytes_of(g_.outputs[o]);
    for (std::size_t k = 0; k < slots_.size(); ++k)
      if (overlap(out, n_out, bound[k], bytes_of(slots_[k].node)))
        throw binding_error("output " + std::to_string(o) +
                            ": its memory overlaps the memory bound to \"" + slots_[k].name +
                            "\" (inputs and parameters are read while outputs are written; bind "
                            "a separate buffer)");
    for (int p = 0; p < o; ++p)
      if (overlap(out, n_out, outputs[p], bytes_of(g_.outputs[p])))
        throw binding_error("output " + std::to_string(o) + ": its memory overlaps output " +
                            std::to_string(p) + "'s (bind a separate buffer to each)");
  }
}

}  // namespace fusedsl::backend
