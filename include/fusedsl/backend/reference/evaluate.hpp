#pragma once
// The reference backend: evaluates a graph node by node, unfused, with Eigen. It is the ground
// truth for every other backend and the "unfused" baseline of the benchmarks.
//
//   fusedsl::reference::evaluator ev{graph};      // any graph<N> or graph_view
//   ev.bind("x", x).bind({{"w", w}, {"b", b}});   // by name; dtype and shape checked here
//   std::vector<fusedsl::dynamic_tensor> y = ev.run();   // one tensor per graph output
//   auto y = fusedsl::reference::run(graph, {{"x", x}, {"w", w}});   // the same in one call
//
// The graph's row composites are first rewritten as primitives (graph::expand), so what runs is
// exactly their documented decomposition. Every intermediate is a new tensor of its node's dtype
// (numerics: see kernels.hpp); a repeat node runs its body `count` times, iteration i reading
// param "q" as "<prefix>.<i>.q". Errors: binding_error for a missing, unknown, mis-shaped or
// mis-typed binding (naming it and both shapes), graph::graph_error for a malformed graph,
// fusedsl::error for a computation without a defined result (integer division by zero).
// Bound tensors are read, not copied: they must stay alive and unchanged until run() returns.
#include <cstring>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusedsl/backend/bindings.hpp"
#include "fusedsl/backend/reference/bindings.hpp"
#include "fusedsl/backend/reference/kernels.hpp"
#include "fusedsl/backend/reference/validate.hpp"
#include "fusedsl/graph/expand.hpp"

namespace fusedsl::reference {

using binding = std::pair<std::string_view, tensor_ref>;

class evaluator {
 public:
  // Checks and expands the graph (graph::graph_error, naming the node, when it is malformed);
  // lists its bindings.
  explicit evaluator(const graph::graph_view& g) : program_(checked_expand(g)) {
    const graph::graph_view v = program();
    validate(v);  // cheap, and guards every index the kernels compute
    required_ = required_bindings(v);
    plan_regions();
  }

  // Bind one tensor by name (a later bind of the same name replaces it).
  evaluator& bind(std::string_view name, tensor_ref t) {
    const binding_spec* spec = find(name);
    if (!spec) {
      std::vector<std::string_view> names;
      for (const binding_spec& s : required_) names.push_back(s.name);
      throw binding_error(backend::unknown_binding_message(name, names));
    }
    check_binding(*spec, t);
    bound_[spec->name] = t;
    return *this;
  }
  evaluator& bind(std::span<const binding> bs) {
    for (const binding& b : bs) bind(b.first, b.second);
    return *this;
  }
  evaluator& bind(std::initializer_list<binding> bs) {
    return bind(std::span<const binding>(bs.begin(), bs.size()));
  }

  // Forget every binding.
  void clear() { bound_.clear(); }

  // Evaluate every output; binding_error first when any binding is missing.
  std::vector<dynamic_tensor> run() const {
    std::string missing;
    for (const binding_spec& s : required_)
      if (!bound_.count(s.name)) {
        if (!missing.empty()) missing += "; ";
        missing +=
            "binding \"" + s.name + "\": missing (expected " + describe(s.type, s.shape) + ")";
      }
    if (!missing.empty()) throw binding_error(missing);

    const graph::graph_view g = program();
    std::vector<slot> vals(std::size_t(g.size));
    run_region(0, "", vals);
    std::vector<dynamic_tensor> outs;
    for (int o = 0; o < g.n_outputs; ++o)
      outs.push_back(copy_of(vals[std::size_t(g.outputs[o])].ref));
    return outs;
  }

  // What the program needs bound, in the order it reads them.
  const std::vector<binding_spec>& required() const { return required_; }
  // The graph that runs: the input graph with its row composites expanded.
  graph::graph_view program() const { return graph::view_of(program_); }

 private:
  // A node's value: a tensor of its own, or a reference to a bound tensor or a block's carry.
  struct slot {
    dynamic_tensor owned;
    tensor_ref ref{};
  };

  graph::builder program_;
  std::vector<binding_spec> required_;
  std::map<std::string, tensor_ref, std::less<>> bound_;
  std::vector<std::vector<int>> region_nodes_;   // the ids of each region's nodes, in order
  std::vector<std::vector<int>> release_after_;  // per node: operands whose last reader it is

  static graph::builder checked_expand(const graph::graph_view& g) {
    validate(g, true);  // errors name the caller's node ids, not the expanded table's
    return graph::expand(g);
  }

  const binding_spec* find(std::string_view name) const {
    for (const binding_spec& s : required_)
      if (s.name == name) return &s;
    return nullptr;
  }

  // Free each intermediate after its last reader in its own region; values read by a block body
  // from outside it, region results and outputs live until the end.
  void plan_regions() {
    const graph::graph_view g = program();
    region_nodes_.assign(std::size_t(g.n_regions), {});
    release_after_.assign(std::size_t(g.size), {});
    std::vector<int> last(std::size_t(g.size), -1);
    std::vector<bool> pinned(std::size_t(g.size), false);
    for (int i = 0; i < g.size; ++i) {
      region_nodes_[std::size_t(g[i].region)].push_back(i);
      for (int k = 0; k < g[i].n_in; ++k) {
        const int o = g[i].in[std::size_t(k)];
        if (g[o].region == g[i].region)
          last[std::size_t(o)] = i;
        else
          pinned[std::size_t(o)] = true;
      }
    }
    for (int o = 0; o < g.n_outputs; ++o) pinned[std::size_t(g.outputs[o])] = true;
    for (int r = 1; r < g.n_regions; ++r) pinned[std::size_t(g.regions[r].result)] = true;
    for (int i = 0; i < g.size; ++i)
      if (!pinned[std::size_t(i)] && last[std::size_t(i)] >= 0)
        release_after_[std::size_t(last[std::size_t(i)])].push_back(i);
  }

  static dynamic_tensor copy_of(const tensor_ref& t) {
    dynamic_tensor r(t.type, t.shape);
    if (t.bytes()) std::memcpy(r.raw(), t.data, t.bytes());
    return r;
  }
  static void set(slot& s, dynamic_tensor t) {
    s.owned = std::move(t);
    s.ref = s.owned.ref();
  }

  // An operand's value, converted to dtype `want` when it is a weak constant of another dtype.
  static tensor_ref operand_as(const graph::node& c, const tensor_ref& v, dtype want,
                               dynamic_tensor& scratch) {
    if (c.op != graph::op_kind::constant || !c.weak || c.type == want) return v;
    scratch = kernels::fill(want, c.shape, c.value);
    return scratch.ref();
  }

  void run_region(int region, const std::string& param_prefix, std::vector<slot>& vals) const {
    const graph::graph_view g = program();
    for (int i : region_nodes_[std::size_t(region)]) {
      const graph::node& n = g[i];
      slot& out = vals[std::size_t(i)];
      switch (n.op) {
        case graph::op_kind::input:
        case graph::op_kind::state:  // bound by name to the state's current value
          out.ref = bound_.find(n.name.view())->second;
          break;
        case graph::op_kind::param:
          out.ref = bound_.find(param_prefix + std::string(n.name.view()))->second;
          break;
        case graph::op_kind::placeholder:
          break;  // set by the repeat node that runs this region
        case graph::op_kind::repeat:
          run_repeat(n, param_prefix, vals, out);
          break;
        default:
          try {
            set(out, compute(n, vals));
          } catch (const binding_error&) {
            throw;
          } catch (const error& e) {
            throw error(std::string(e.what()) + " (at node %" + std::to_string(i) + ": " +
                        graph::describe(n) + " " + describe(n.type, n.shape) + ")");
          }
      }
      for (int o : release_after_[std::size_t(i)]) vals[std::size_t(o)] = slot{};
    }
  }

  void run_repeat(const graph::node& n, const std::string& param_prefix, std::vector<slot>& vals,
                  slot& out) const {
    const graph::region_info& body = program().regions[n.body];
    dynamic_tensor carry = copy_of(vals[std::size_t(n.in[0])].ref);
    const std::string prefix = param_prefix + std::string(n.name.view());
    for (int l = 0; l < n.count; ++l) {
      slot& ph = vals[std::size_t(body.placeholder)];
      ph.owned = dynamic_tensor{};
      ph.ref = carry.ref();
      run_region(n.body, layer_name(prefix, l, ""), vals);
      slot& res = vals[std::size_t(body.result)];
      dynamic_tensor next = res.owned.raw() && res.ref.data == res.owned.raw()
                                ? std::move(res.owned)
                                : copy_of(res.ref);
      res = slot{};
      carry = std::move(next);
    }
    set(out, std::move(carry));
  }

  dynamic_tensor compute(const graph::node& n, const std::vector<slot>& vals) const {
    using graph::op_kind;
    const graph::graph_view g = program();
    auto in = [&](int k) -> const tensor_ref& {
      return vals[std::size_t(n.in[std::size_t(k)])].ref;
    };
    auto arg = [&](int k) -> const graph::node& { return g[n.in[std::size_t(k)]]; };
    dynamic_tensor s1, s2;  // weak constants converted to the dtype they meet
    if (graph::is_binary(n.op) || graph::is_compare(n.op)) {
      const dtype t = detail::compute_type(arg(0), arg(1));
      return kernels::binary(n.op, operand_as(arg(0), in(0), t, s1),
                             operand_as(arg(1), in(1), t, s2), n.shape, n.type);
    }
    if (n.op == op_kind::select)
      return kernels::select(in(0), operand_as(arg(1), in(1), n.type, s1),
                             operand_as(arg(2), in(2), n.type, s2), n.shape, n.type);
    switch (n.op) {
      case op_kind::constant:
        return kernels::fill(n.type, n.shape, n.value);
      case op_kind::iota:
        return kernels::iota(n.type, n.shape, n.axis);
      case op_kind::cast:
        return kernels::cast(in(0), n.type);
      case op_kind::matmul:
        return kernels::matmul(in(0), in(1), n.trans_a, n.trans_b, n.shape, n.type);
      case op_kind::transpose:
        return kernels::transpose(
            in(0), std::span<const int>(n.perm.data(), std::size_t(n.shape.rank)), n.shape);
      case op_kind::reshape:
        return kernels::reshape(in(0), n.shape);
      case op_kind::broadcast:
        return kernels::broadcast(in(0), n.shape);
      case op_kind::slice:
        return kernels::slice(in(0), n.axis, n.begin, n.shape);
      case op_kind::concat: {
        std::vector<tensor_ref> parts;
        for (int k = 0; k < n.n_in; ++k) parts.push_back(in(k));
        return kernels::concat(parts, n.axis, n.shape);
      }
      case op_kind::gather:
        return kernels::gather_rows(in(0), in(1), n.shape);
      case op_kind::dynamic_slice:
        return kernels::dynamic_slice(in(0), in(1), n.axis, n.shape);
      case op_kind::dynamic_update_slice:
        return kernels::dynamic_update_slice(in(0), in(1), in(2), n.axis);
      case op_kind::argmax:
        return kernels::argmax(in(0), n.axis, n.shape);
      default:
        break;
    }
    if (graph::is_unary(n.op)) return kernels::unary(n.op, in(0), n.type);
    if (graph::is_reduce(n.op)) return kernels::reduce(n.op, in(0), n.axis, n.shape, n.type);
    throw error("reference: no kernel for " + std::string(graph::name_of(n.op)));
  }
};

// Evaluate g once with the given bindings: `reference::run(g, {{"x", x}, {"w", w}})`.
inline std::vector<dynamic_tensor> run(const graph::graph_view& g,
                                       std::initializer_list<binding> bs) {
  evaluator ev{g};
  ev.bind(bs);
  return ev.run();
}
inline std::vector<dynamic_tensor> run(const graph::graph_view& g, std::span<const binding> bs) {
  evaluator ev{g};
  ev.bind(bs);
  return ev.run();
}

}  // namespace fusedsl::reference
