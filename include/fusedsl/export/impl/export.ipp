#pragma once
// The exporter core: a graph_view (and its fusion plan) to an HLO module.
// The bodies of fusedsl/export/export.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/export/export.hpp"
#include "fusedsl/export/impl/op_bodies.ipp"
#include "fusedsl/graph/bindings.hpp"

namespace fusedsl::hlo {

namespace detail {

// The entry parameters: the graph's bindings (graph/bindings.hpp), in its order.
inline std::vector<export_binding> collect_bindings(const graph::graph_view& g) {
  std::vector<export_binding> out;
  for (graph::binding_spec& b : graph::required_bindings(g))
    out.push_back({std::move(b.name), b.type, b.shape, b.kind});
  return out;
}

constexpr element_type element_of(dtype t) {
  switch (t) {
    case dtype::f32: return element_type::f32;
    case dtype::bf16: return element_type::bf16;
    case dtype::f16: return element_type::f16;
    case dtype::i32: return element_type::s32;
    case dtype::boolean: return element_type::pred;
    case dtype::i8:
      return element_type::s8;
    case dtype::u8:
      return element_type::u8;
  }
  return element_type::f32;
}

inline std::vector<std::int64_t> to_vector(const dims& d) {
  return std::vector<std::int64_t>(d.d.begin(), d.d.begin() + d.rank);
}

// Emits fusedsl nodes as HLO instructions into one computation.
class node_emitter {
 public:
  node_emitter(module& m, const graph::graph_view& g, computation_builder& b)
      : m_(m), g_(g), b_(b) {}

  using value_of = std::function<instruction_id(int node)>;

  // The HLO value of node id (a non-leaf, or iota); operands through `value`.
  instruction_id emit(int id, const value_of& value) {
    const graph::node& n = g_[id];
    const std::vector<std::int64_t> out = to_vector(n.shape);
    const element_type et = element_of(n.type);
    const element_type ct = compute_type(n.type);
    auto arg = [&](int k, element_type t, const std::vector<std::int64_t>& to) {
      return operand(n.in[std::size_t(k)], t, to, value);
    };
    switch (n.op) {
      case op_kind::constant: return broadcast_to(scalar(n.value, et), out);
      case op_kind::iota: return b_.add_iota(hlo::shape::array(et, out), n.axis);
      case op_kind::input: case op_kind::param: case op_kind::state: case op_kind::placeholder:
      case op_kind::repeat:
        throw graph::graph_error("hlo::export: a leaf or repeat reached the node emitter");
      case op_kind::cast: return b_.add_convert(value(n.in[0]), et);
      case op_kind::select: {
        const instruction_id p = arg(0, element_type::pred, out);
        const instruction_id a = arg(1, et, out);
        return b_.add_select(p, a, arg(2, et, out));
      }
      case op_kind::eq:
      case op_kind::ne:
      case op_kind::lt:
      case op_kind::le:
      case op_kind::gt:
      case op_kind::ge: {
        const element_type t = operand_type(n);
        const instruction_id a = arg(0, t, out);
        return b_.add_compare(a, arg(1, t, out), direction_of(n.op));
      }
      case op_kind::reduce_sum:
      case op_kind::reduce_mean:
      case op_kind::reduce_max:
      case op_kind::reduce_min:
        return emit_reduce(n, value);
      case op_kind::argmax:
        return emit_argmax(n, value);
      case op_kind::gather:
        return emit_gather(n, value);
      case op_kind::dynamic_slice:
      case op_kind::dynamic_update_slice:
        return emit_dynamic_slice(n, value);
      case op_kind::matmul: return emit_matmul(n, value);
      case op_kind::transpose:
        return b_.add_transpose(value(n.in[0]), std::vector<std::int64_t>(
                                                    n.perm.begin(), n.perm.begin() + n.shape.rank));
      case op_kind::reshape: return b_.add_reshape(value(n.in[0]), out);
      case op_kind::broadcast: return broadcast_to(value(n.in[0]), out);
      case op_kind::slice: {
        std::vector<slice_dim> r;
        const graph::node& x = g_[n.in[0]];
        for (int d = 0; d < x.shape.rank; ++d)
          r.push_back(d == n.axis ? slice_dim{n.begin, n.end, 1} : slice_dim{0, x.shape[d], 1});
        return b_.add_slice(value(n.in[0]), std::move(r));
      }
      case op_kind::concat: {
        std::vector<instruction_id> xs;
        for (int k = 0; k < n.n_in; ++k) xs.push_back(value(n.in[std::size_t(k)]));
        return b_.add_concatenate(std::move(xs), n.axis);
      }
      case op_kind::softmax: case op_kind::log_softmax:
        return narrow(emit_softmax(arg(0, ct, out), n.axis, n.op == op_kind::log_softmax), et);
      case op_kind::layernorm: case op_kind::rmsnorm: {
        const instruction_id x = arg(0, ct, out), gamma = arg(1, ct, out);
        const long beta = n.n_in > 2 ? long(arg(2, ct, out)) : -1;
        return narrow(emit_norm(n.op, x, gamma, beta, n.value), et);
      }
      default: break;
    }
    if (graph::is_unary(n.op)) return narrow(emit_unary(n.op, arg(0, ct, out)), et);
    if (graph::is_binary(n.op)) {
      const instruction_id a = arg(0, ct, out);
      return narrow(b_.add_binary(direct_opcode(n.op), a, arg(1, ct, out)), et);
    }
    throw graph::graph_error("hlo::export: no HLO mapping for op " +
                             std::string(graph::name_of(n.op)));
  }

  // A scalar constant of type t (integers exact, floats rounded to t by the literal).
  instruction_id scalar(double v, element_type t) {
    if (is_integral(t)) return b_.add_constant(literal::scalar_int(t, std::int64_t(v)));
    return b_.add_constant(literal::scalar(t, v));
  }

 private:
  static element_type compute_type(dtype t) {
    return t == dtype::bf16 || t == dtype::f16 ? element_type::f32 : element_of(t);
  }
  // The dtype a compare reads its operands in: a weak constant takes the other operand's.
  element_type operand_type(const graph::node& n) const {
    const graph::node& a = g_[n.in[0]];
    const graph::node& b = g_[n.in[1]];
    if (a.op == op_kind::constant && a.weak) return element_of(b.type);
    return element_of(a.type);
  }
  static comparison_direction direction_of(op_kind k) {
    switch (k) {
      case op_kind::eq: return comparison_direction::eq;
      case op_kind::ne: return comparison_direction::ne;
      case op_kind::lt: return comparison_direction::lt;
      case op_kind::le: return comparison_direction::le;
      case op_kind::gt: return comparison_direction::gt;
      default: return comparison_direction::ge;
    }
  }
  // The HLO opcode the op table names for k (an op lowered by one instruction).
  static opcode direct_opcode(op_kind k) {
    const std::optional<opcode> op = parse_opcode(graph::info_of(k).hlo);
    if (!op)
      throw graph::graph_error("hlo::export: op " + std::string(graph::name_of(k)) +
                               " has no single HLO opcode");
    return *op;
  }

  std::vector<std::int64_t> dims_of(instruction_id x) const {
    return b_.shape_of(x).dims;
  }  // a copy: ids outlive appends
  element_type type_of(instruction_id x) const { return b_.shape_of(x).type; }

  instruction_id narrow(instruction_id x, element_type t) {
    return type_of(x) == t ? x : b_.add_convert(x, t);
  }

  // Operand node `id` as type t with dims `to` (NumPy broadcasting); constants are made in t.
  instruction_id operand(int id, element_type t, const std::vector<std::int64_t>& to,
                         const value_of& value) {
    const graph::node& o = g_[id];
    if (o.op == op_kind::constant) return broadcast_to(scalar(o.value, t), to);
    return broadcast_to(narrow(value(id), t), to);
  }

  // NumPy broadcasting as HLO: drop the size-1 axes that grow, then `broadcast` with dimensions.
  instruction_id broadcast_to(instruction_id x, const std::vector<std::int64_t>& to) {
    const std::vector<std::int64_t> from = dims_of(x);
    if (from == to) return x;
    const std::size_t lead = to.size() - from.size();
    std::vector<std::int64_t> kept, mapped;
    for (std::size_t i = 0; i < from.size(); ++i)
      if (from[i] == to[lead + i]) {
        kept.push_back(from[i]);
        mapped.push_back(std::int64_t(lead + i));
      }
    if (kept.size() != from.size()) x = b_.add_reshape(x, kept);
    return b_.add_broadcast(x, to, mapped);
  }

  // Every dimension but `axis`, for broadcasting a reduced row back over its axis.
  static std::vector<std::int64_t> all_but(std::size_t rank, std::int64_t axis) {
    std::vector<std::int64_t> r;
    for (std::size_t i = 0; i < rank; ++i)
      if (std::int64_t(i) != axis) r.push_back(std::int64_t(i));
    return r;
  }
  instruction_id full(double v, element_type t, const std::vector<std::int64_t>& to) {
    return broadcast_to(scalar(v, t), to);
  }

  std::string reducer(opcode op, element_type t) {
    const std::string name = std::string(op == opcode::add       ? "sum"
                                         : op == opcode::maximum ? "max"
                                                                 : "min") +
                             "_" + std::string(to_string(t));
    if (!m_.find(name)) m_.add_computation(make_scalar_computation(name, op, t));
    return name;
  }

  // reduce x over `axis` (no keepdims) with op; init is op's identity.
  instruction_id reduce(instruction_id x, std::int64_t axis, opcode op) {
    const element_type t = type_of(x);
    double init = 0;
    if (op != opcode::add) {
      const bool is_max = op == opcode::maximum;
      if (is_integral(t))
        init = is_max ? double(std::numeric_limits<std::int32_t>::min())
                      : double(std::numeric_limits<std::int32_t>::max());
      else
        init = is_max ? -std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::infinity();
    }
    const instruction_id zero = scalar(init, t);
    const std::string name = reducer(op, t);
    return b_.add_reduce(x, zero, {axis}, m_.get(name));
  }

  instruction_id emit_reduce(const graph::node& n, const value_of& value) {
    const graph::node& xn = g_[n.in[0]];
    const element_type ct = compute_type(n.type);
    const instruction_id x = narrow(value(n.in[0]), ct);
    const opcode op = n.op == op_kind::reduce_max ? opcode::maximum
                      : n.op == op_kind::reduce_min ? opcode::minimum : opcode::add;
    instruction_id r = reduce(x, n.axis, op);
    if (n.op == op_kind::reduce_mean)
      r = b_.add_binary(opcode::divide, r, full(double(xn.shape[n.axis]), ct, dims_of(r)));
    r = narrow(r, element_of(n.type));
    if (n.keepdims) r = b_.add_reshape(r, to_vector(n.shape));
    return r;
  }

  // jnp.argmax's lowering: x and an s32 iota along the axis reduced together from (lowest, 0) by
  // argmax_comparator; the index is the second result.
  instruction_id emit_argmax(const graph::node& n, const value_of& value) {
    const instruction_id x = value(n.in[0]);
    const element_type t = type_of(x);
    const std::vector<std::int64_t> s = dims_of(x);
    const instruction_id io = b_.add_iota(hlo::shape::array(element_type::s32, s), n.axis);
    const double lowest = is_floating(t) ? -std::numeric_limits<double>::infinity()
                          : t == element_type::pred || t == element_type::u8 ? 0.0
                          : t == element_type::s8
                              ? -128.0
                              : double(std::numeric_limits<std::int32_t>::min());
    const instruction_id init = scalar(lowest, t);
    const instruction_id zero = scalar(0, element_type::s32);
    const instruction_id r =
        b_.add_reduce({x, io}, {init, zero}, {n.axis}, m_.get(argmax_comparator(t)));
    instruction_id i = b_.add_get_tuple_element(r, 1);
    if (n.keepdims) i = b_.add_reshape(i, to_vector(n.shape));
    return i;
  }

  // (a, ia, b, ib) -> the pair that comes first in the order "larger value first, NaN above every
  // number, then the lower index": a total order, so the result does not depend on the order in
  // which XLA combines elements, and it is NumPy's first maximum (an all -inf row gives 0).
  std::string argmax_comparator(element_type t) {
    const std::string name = "argmax_" + std::string(to_string(t));
    if (m_.find(name)) return name;
    computation_builder c(name);
    const instruction_id a = c.add_parameter(hlo::shape::scalar(t), "a");
    const instruction_id ia = c.add_parameter(hlo::shape::scalar(element_type::s32), "a_index");
    const instruction_id b = c.add_parameter(hlo::shape::scalar(t), "b");
    const instruction_id ib = c.add_parameter(hlo::shape::scalar(element_type::s32), "b_index");
    auto both = [&](instruction_id p, instruction_id q) {
      return c.add_binary(opcode::and_, p, q);
    };
    auto either = [&](instruction_id p, instruction_id q) {
      return c.add_binary(opcode::or_, p, q);
    };
    instruction_id wins = c.add_compare(a, b, comparison_direction::gt, "greater");
    instruction_id same = c.add_compare(a, b, comparison_direction::eq, "equal");
    if (is_floating(t)) {
      const instruction_id a_nan = c.add_compare(a, a, comparison_direction::ne, "a_is_nan");
      const instruction_id b_nan = c.add_compare(b, b, comparison_direction::ne, "b_is_nan");
      wins = either(wins, both(a_nan, c.add_unary(opcode::not_, b_nan)));
      same = either(same, both(a_nan, b_nan));
    }
    const instruction_id first = c.add_compare(ia, ib, comparison_direction::lt, "lower_index");
    const instruction_id take_a = either(wins, both(same, first));
    c.add_tuple({c.add_select(take_a, a, b), c.add_select(take_a, ia, ib)});
    m_.add_computation(c.build());
    return name;
  }

  // table[ids] as XLA's gather: each id a one-entry index vector (index_vector_dim = the ids'
  // rank) into table dim 0, which is collapsed; the row's other dims follow the ids' dims.
  instruction_id emit_gather(const graph::node& n, const value_of& value) {
    const instruction_id table = value(n.in[0]);
    const instruction_id ids = value(n.in[1]);
    std::vector<std::int64_t> sizes = dims_of(table);
    const std::int64_t r = std::int64_t(dims_of(ids).size());
    gather_dimension_numbers dn;
    for (std::size_t d = 1; d < sizes.size(); ++d)
      dn.offset_dims.push_back(r + std::int64_t(d) - 1);
    dn.collapsed_slice_dims = {0};
    dn.start_index_map = {0};
    dn.index_vector_dim = r;
    sizes[0] = 1;
    return b_.add_gather(table, ids, std::move(dn), std::move(sizes));
  }

  // XLA's dynamic-slice / dynamic-update-slice: one s32 start per dimension, the node's start on
  // its axis and 0 on the others (XLA clamps each so the window fits, as the op table says).
  instruction_id emit_dynamic_slice(const graph::node& n, const value_of& value) {
    const bool update = n.op == op_kind::dynamic_update_slice;
    const instruction_id x = value(n.in[0]);
    const instruction_id start = value(n.in[update ? 2 : 1]);
    const std::size_t rank = dims_of(x).size();
    std::vector<instruction_id> starts(rank, start);
    if (rank > 1) {
      const instruction_id zero = scalar(0, element_type::s32);
      for (std::size_t d = 0; d < rank; ++d)
        if (std::int64_t(d) != n.axis) starts[d] = zero;
    }
    if (update) return b_.add_dynamic_update_slice(x, value(n.in[1]), std::move(starts));
    return b_.add_dynamic_slice(x, std::move(starts), to_vector(n.shape));
  }

  // NumPy matmul as `dot`: [..., M, K] x [..., K, N]. A rank-2 right operand (a weight) is
  // contracted directly, the left operand's batch axes being free dims; otherwise both operands
  // are broadcast to the result's batch axes, which become the dot's batch dimensions.
  instruction_id emit_matmul(const graph::node& n, const value_of& value) {
    const element_type ct = compute_type(n.type);
    instruction_id a = narrow(value(n.in[0]), ct), b = narrow(value(n.in[1]), ct);
    const std::int64_t ra = std::int64_t(dims_of(a).size()), rb = std::int64_t(dims_of(b).size());
    dot_dimension_numbers dn;
    if (rb == 2) {
      dn.lhs_contracting = {n.trans_a ? ra - 2 : ra - 1};
      dn.rhs_contracting = {n.trans_b ? 1 : 0};
      // The free dims of a come out as (batch..., M) for either trans_a: NumPy's order already.
      return narrow(b_.add_dot(a, b, dn), element_of(n.type));
    }
    const std::int64_t out_rank = n.shape.rank, nb = out_rank - 2;
    auto lift = [&](instruction_id x) {
      std::vector<std::int64_t> to(n.shape.d.begin(), n.shape.d.begin() + nb);
      const std::vector<std::int64_t> s = dims_of(x);
      to.push_back(s[s.size() - 2]);
      to.push_back(s[s.size() - 1]);
      return broadcast_to(x, to);
    };
    a = lift(a);
    b = lift(b);
    for (std::int64_t i = 0; i < nb; ++i) {
      dn.lhs_batch.push_back(i);
      dn.rhs_batch.push_back(i);
    }
    dn.lhs_contracting = {n.trans_a ? nb : nb + 1};
    dn.rhs_contracting = {n.trans_b ? nb + 1 : nb};
    return narrow(b_.add_dot(a, b, dn), element_of(n.type));
  }

  // A unary op: its table row's HLO opcode, or, for a composite row, the table's body written
  // out as HLO (op_bodies.ipp).
  instruction_id emit_unary(op_kind k, instruction_id x) {
    if (graph::info_of(k).hlo != "composite") return b_.add_unary(direct_opcode(k), x);
    const element_type t = type_of(x);
    const std::vector<std::int64_t> s = dims_of(x);
    const body_value body = unary_body(k);
    return emit_body(b_, body.expr(), x, [&](double v) { return full(v, t, s); });
  }

  // where(v == from, to, v)
  instruction_id replace(instruction_id v, double from, double to) {
    const element_type t = type_of(v);
    const std::vector<std::int64_t> s = dims_of(v);
    const instruction_id hit = b_.add_compare(v, full(from, t, s), comparison_direction::eq);
    return b_.add_select(hit, full(to, t, s), v);
  }

  // graph/expand.hpp's softmax: m' = where(m == -inf, 0, m); e = exp(x - m'); s' = where(s == 0, 1,
  // s).
  instruction_id emit_softmax(instruction_id x, std::int64_t axis, bool log) {
    const std::vector<std::int64_t> s = dims_of(x);
    const std::vector<std::int64_t> keep = all_but(s.size(), axis);
    const instruction_id m =
        replace(reduce(x, axis, opcode::maximum), -std::numeric_limits<double>::infinity(), 0.0);
    const instruction_id shifted = b_.add_binary(opcode::subtract, x, b_.add_broadcast(m, s, keep));
    const instruction_id e = b_.add_unary(opcode::exponential, shifted);
    const instruction_id sum = replace(reduce(e, axis, opcode::add), 0.0, 1.0);
    if (log)
      return b_.add_binary(opcode::subtract, shifted,
                           b_.add_broadcast(b_.add_unary(opcode::log, sum), s, keep));
    return b_.add_binary(opcode::divide, e, b_.add_broadcast(sum, s, keep));
  }

  // mean over the last axis, broadcast back to x's dims.
  instruction_id row_mean(instruction_id x) {
    const std::vector<std::int64_t> s = dims_of(x);
    const std::int64_t last = std::int64_t(s.size()) - 1;
    const instruction_id sum = reduce(x, last, opcode::add);
    const instruction_id mean =
        b_.add_binary(opcode::divide, sum, full(double(s.back()), type_of(x), dims_of(sum)));
    return b_.add_broadcast(mean, s, all_but(s.size(), last));
  }

  // beta < 0: none (rmsnorm).
  instruction_id emit_norm(op_kind k, instruction_id x, instruction_id gamma, long beta,
                           double eps) {
    const element_type t = type_of(x);
    const std::vector<std::int64_t> s = dims_of(x);
    auto mul = [&](instruction_id p, instruction_id q) {
      return b_.add_binary(opcode::multiply, p, q);
    };
    const instruction_id xc =
        k == op_kind::rmsnorm ? x : b_.add_binary(opcode::subtract, x, row_mean(x));
    const instruction_id var = row_mean(mul(xc, xc));
    const instruction_id r =
        b_.add_unary(opcode::rsqrt, b_.add_binary(opcode::add, var, full(eps, t, s)));
    const instruction_id y = mul(mul(xc, r), gamma);
    return beta >= 0 ? b_.add_binary(opcode::add, y, instruction_id(beta)) : y;
  }

  module& m_;
  const graph::graph_view& g_;
  computation_builder& b_;
};

inline fusion_kind fusion_kind_of(plan::group_kind k) {
  switch (k) {
    case plan::group_kind::matmul: case plan::group_kind::attention: return fusion_kind::output;
    case plan::group_kind::row: case plan::group_kind::reduce: return fusion_kind::input;
    default: return fusion_kind::loop;
  }
}

class exporter {
 public:
  exporter(const graph::graph_view& g, const fusion_view* f, const export_options& o)
      : g_(g), f_(f), o_(o) {
    m_.name = o.module_name;
  }

  module run() {
    computation_builder entry("main");
    const std::vector<export_binding> bs = collect_bindings(g_);
    for (const export_binding& b : bs) {
      const instruction_id p =
          entry.add_parameter(hlo::shape::array(element_of(b.type), to_vector(b.shape)), b.name);
      entry.set_op_name(p, b.name);
      if (o_.sharding)
        if (auto s = o_.sharding(b.name, b.shape)) entry.set_sharding(p, *s);
      params_[b.name] = p;
    }
    std::vector<long> val(std::size_t(g_.size), -1);
    emit_region(entry, 0, -1, "", val);
    std::vector<instruction_id> outs;
    std::vector<hlo::sharding> out_shardings;
    bool any_sharding = false;
    node_emitter ne(m_, g_, entry);
    for (int k = 0; k < g_.n_outputs; ++k) {
      const int id = g_.outputs[k];
      outs.push_back(value(ne, val, id));
      const std::string name = g_.n_outputs == 1 ? "output" : "output." + std::to_string(k);
      std::optional<hlo::sharding> s = o_.sharding ? o_.sharding(name, g_[id].shape) : std::nullopt;
      any_sharding = any_sharding || s.has_value();
      out_shardings.push_back(s.value_or(hlo::sharding::replicated()));
    }
    instruction_id root = outs[0];
    if (outs.size() > 1) {
      root = entry.add_tuple(outs);
      if (any_sharding) entry.set_sharding(root, hlo::sharding::make_tuple(out_shardings));
    } else if (any_sharding) {
      // A parameter returned as it is keeps its own annotation; a copy carries the output's.
      if (entry.get(root).opcode == opcode::parameter) root = entry.add_unary(opcode::copy, root);
      entry.set_sharding(root, out_shardings[0]);
    }
    m_.set_entry(entry.build(root));
    // A state's new value may take the buffer of the state's entry parameter (as jax's
    // donate_argnums): the caller passes the returned array as that parameter next call.
    for (int k = 0; k < g_.n_outputs; ++k) {
      const int st = g_.state_of_output(k);
      if (st < 0) continue;
      std::int64_t number = -1;
      for (std::size_t i = 0; i < bs.size(); ++i)
        if (bs[i].kind == op_kind::state && bs[i].name == g_[st].name.view())
          number = std::int64_t(i);
      if (number < 0)
        throw graph::graph_error("hlo::export: no entry parameter for state \"" +
                                 std::string(g_[st].name.view()) + "\"");
      io_alias a;
      if (outs.size() > 1) a.output_index = {k};
      a.parameter_number = number;
      m_.input_output_alias.push_back(std::move(a));
    }
    verify(m_);
    return std::move(m_);
  }

 private:
  // The value of node id in the computation `b` is building (leaves made on first use).
  instruction_id value(node_emitter& ne, std::vector<long>& val, int id) {
    long& v = val[std::size_t(id)];
    if (v < 0) {
      const graph::node& n = g_[id];
      if (n.op != op_kind::constant && n.op != op_kind::iota)
        throw graph::graph_error("hlo::export: node " + std::to_string(id) + " (" +
                                 std::string(graph::name_of(n.op)) +
                                 ") is read before it is computed");
      v = long(ne.emit(id, {}));
    }
    return instruction_id(v);
  }

  instruction_id param_of(const graph::node& n, const std::string& prefix) {
    const std::string name =
        (n.op == op_kind::param ? prefix : std::string()) + std::string(n.name.view());
    auto it = params_.find(name);
    if (it == params_.end())
      throw graph::graph_error("hlo::export: no entry parameter for binding \"" + name + "\"");
    return it->second;
  }

  // Emits the nodes of `region` into b; val maps node ids to b's instructions.
  void emit_region(computation_builder& b, int region, long placeholder, const std::string& prefix,
                   std::vector<long>& val) {
    node_emitter ne(m_, g_, b);
    auto get = [&](int id) { return value(ne, val, id); };
    const bool fused = o_.form == export_form::fused && f_ != nullptr;
    // Leaves first; in the fused form the groups follow in plan order, else nodes in table order.
    for (int i = 0; i < g_.size; ++i) {
      const graph::node& n = g_[i];
      if (n.region != region) continue;
      if (n.op == op_kind::input || n.op == op_kind::param || n.op == op_kind::state)
        val[std::size_t(i)] = long(param_of(n, prefix));
      else if (n.op == op_kind::placeholder) val[std::size_t(i)] = placeholder;
    }
    if (!fused) {
      for (int i = 0; i < g_.size; ++i) {
        const graph::node& n = g_[i];
        if (n.region != region || graph::is_leaf(n.op)) continue;
        if (n.op == op_kind::repeat)
          val[std::size_t(i)] = long(emit_repeat(b, n, get(n.in[0]), prefix));
        else val[std::size_t(i)] = long(ne.emit(i, get));
      }
    } else {
      for (int k = 0; k < f_->n_groups; ++k) {
        const int gi = f_->order[k];
        const plan::fusion_group& gr = f_->groups[gi];
        if (gr.region != region) continue;
        if (gr.kind == plan::group_kind::repeat) {
          const graph::node& n = g_[gr.anchor];
          val[std::size_t(gr.anchor)] = long(emit_repeat(b, n, get(n.in[0]), prefix));
        } else {
          emit_group(b, gi, val, get);
        }
      }
    }
    if (region > 0) {
      const int result = g_.regions[region].result;
      val[std::size_t(result)] = long(get(result));
    }
  }

  instruction_id emit_repeat(computation_builder& b, const graph::node& n, instruction_id x,
                             const std::string& prefix) {
    instruction_id cur = x;
    for (int l = 0; l < n.count; ++l) {
      std::vector<long> val(std::size_t(g_.size), -1);
      emit_region(b, n.body, long(cur),
                  prefix + std::string(n.name.view()) + "." + std::to_string(l) + ".", val);
      cur = instruction_id(val[std::size_t(g_.regions[n.body].result)]);
    }
    return cur;
  }

  bool in_group(int id, int gi) const { return f_->group_of[id] == gi; }

  // Members of group gi whose values are read outside it (other groups, outputs, region results).
  std::vector<int> group_outputs(int gi) const {
    std::vector<bool> out(std::size_t(g_.size), false);
    for (int i = 0; i < g_.size; ++i)
      if (!in_group(i, gi))
        for (int k = 0; k < g_[i].n_in; ++k)
          if (in_group(g_[i].in[std::size_t(k)], gi))
            out[std::size_t(g_[i].in[std::size_t(k)])] = true;
    for (int k = 0; k < g_.n_outputs; ++k)
      if (in_group(g_.outputs[k], gi)) out[std::size_t(g_.outputs[k])] = true;
    for (int r = 1; r < g_.n_regions; ++r)
      if (g_.regions[r].result >= 0 && in_group(g_.regions[r].result, gi))
        out[std::size_t(g_.regions[r].result)] = true;
    std::vector<int> r;
    for (int i = 0; i < g_.size; ++i)
      if (out[std::size_t(i)]) r.push_back(i);
    return r;
  }

  // The computation of group gi: the members its `roots` need, reading its operands as
  // parameters. Returns the computation's name and the external operands in parameter order.
  struct fused_computation {
    std::string name;
    std::vector<int> operands;
    std::vector<int> roots;
  };

  // The group's computation (not yet in the module) and its external operands and roots.
  std::pair<computation, fused_computation> build_group(int gi, const std::vector<int>& roots) {
    const plan::fusion_group& gr = f_->groups[gi];
    // Members the roots depend on (within the group), in table order.
    std::vector<bool> need(std::size_t(g_.size), false);
    for (int r : roots) need[std::size_t(r)] = true;
    for (int i = g_.size - 1; i >= 0; --i) {
      if (!need[std::size_t(i)] || !in_group(i, gi)) continue;
      for (int k = 0; k < g_[i].n_in; ++k) need[std::size_t(g_[i].in[std::size_t(k)])] = true;
    }
    fused_computation fc;
    fc.roots = roots;
    const std::string name =
        "fused_" + std::string(plan::name_of(gr.kind)) + "_" + std::to_string(gi);
    computation_builder fb(name);
    std::vector<long> val(std::size_t(g_.size), -1);
    for (int i = 0; i < g_.size; ++i) {
      if (!need[std::size_t(i)] || in_group(i, gi)) continue;
      const op_kind k = g_[i].op;
      if (k == op_kind::constant || k == op_kind::iota) continue;  // recomputed inside the fusion
      const graph::node& n = g_[i];
      const std::string pname = n.op == op_kind::input || n.op == op_kind::param
                                    ? std::string(n.name.view())
                                    : "p" + std::to_string(fc.operands.size());
      val[std::size_t(i)] =
          long(fb.add_parameter(hlo::shape::array(element_of(n.type), to_vector(n.shape)), pname));
      fc.operands.push_back(i);
    }
    node_emitter ne(m_, g_, fb);
    auto get = [&](int id) { return value(ne, val, id); };
    for (int i = 0; i < g_.size; ++i)
      if (need[std::size_t(i)] && in_group(i, gi)) val[std::size_t(i)] = long(ne.emit(i, get));
    instruction_id root = instruction_id(val[std::size_t(roots[0])]);
    if (roots.size() > 1) {
      std::vector<instruction_id> rs;
      for (int r : roots) rs.push_back(instruction_id(val[std::size_t(r)]));
      root = fb.add_tuple(rs);
    }
    fc.name = name;
    return {fb.build(root), fc};
  }

  fused_computation make_fusion(int gi, const std::vector<int>& roots) {
    auto [c, fc] = build_group(gi, roots);
    fc.name = m_.add_computation(std::move(c));
    return fc;
  }

  // group_calls::xla_cpu: the group's kLoop parts, made once per group.
  struct split_group {
    fused_computation fc;
    fusion_split split;
    std::vector<std::string> names;
  };

  const split_group& make_split(int gi) {
    auto it = splits_.find(gi);
    if (it != splits_.end()) return it->second;
    auto [c, fc] = build_group(gi, group_outputs(gi));
    split_group sg{fc, split_for_xla_cpu(c, o_.xla_cpu), {}};
    for (const fusion_part& p : sg.split.parts)
      sg.names.push_back(p.library_dot ? p.body.name : m_.add_computation(p.body));
    return splits_.emplace(gi, std::move(sg)).first->second;
  }

  // A part that is one dot of its parameters, as a plain `dot` of the matching arguments.
  static instruction_id emit_library_dot(computation_builder& b, const computation& part,
                                         const std::vector<instruction_id>& args) {
    const instruction& d = part.root_instruction();
    auto arg = [&](std::size_t k) {
      return args.at(std::size_t(part.instructions[d.operands[k]].parameter_number));
    };
    return b.add_dot(arg(0), arg(1), *d.dot, d.shape.type);
  }

  template <class Get>
  void emit_split_group(computation_builder& b, int gi, std::vector<long>& val, Get& get) {
    const split_group& sg = make_split(gi);
    const plan::fusion_group& gr = f_->groups[gi];
    std::vector<instruction_id> part_ids;
    std::map<std::pair<std::size_t, std::int64_t>, instruction_id> elements;  // of tuple parts
    auto value_of = [&](const part_value& v) {
      if (!v.from_part) return instruction_id(get(sg.fc.operands[v.index]));
      if (v.tuple_index < 0) return part_ids[v.index];
      auto [it, added] = elements.try_emplace({v.index, v.tuple_index}, 0);
      if (added) it->second = b.add_get_tuple_element(part_ids[v.index], v.tuple_index);
      return it->second;
    };
    const std::size_t n = sg.split.parts.size();
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<instruction_id> args;
      for (const part_value& v : sg.split.parts[k].operands) args.push_back(value_of(v));
      const fusion_part& part = sg.split.parts[k];
      const instruction_id f = part.library_dot
                                   ? emit_library_dot(b, part.body, args)
                                   : b.add_fusion(args, m_.get(sg.names[k]), fusion_kind::loop);
      // Which plan group (and part of it) this fusion computes, for XLA's profiles and dumps.
      b.set_op_name(
          f, "fusedsl group " + std::to_string(gi) + " (" + std::string(plan::name_of(gr.kind)) +
                 ")" + (n > 1 ? " part " + std::to_string(k + 1) + "/" + std::to_string(n) : ""));
      part_ids.push_back(f);
    }
    for (std::size_t r = 0; r < sg.fc.roots.size(); ++r)
      val[std::size_t(sg.fc.roots[r])] = long(value_of(sg.split.outputs[r]));
  }

  template <class Get>
  void emit_group(computation_builder& b, int gi, std::vector<long>& val, Get& get) {
    if (o_.groups == group_calls::xla_cpu) return emit_split_group(b, gi, val, get);
    auto it = fusions_.find(gi);
    if (it == fusions_.end()) {
      // Made once per group: every layer of a stack calls the same computations.
      it = fusions_.emplace(gi, make_fusion(gi, group_outputs(gi))).first;
    }
    const fused_computation& fc = it->second;
    std::vector<instruction_id> args;
    for (int o : fc.operands) args.push_back(get(o));
    const instruction_id f =
        o_.groups == group_calls::call
            ? b.add_call(args, m_.get(fc.name))
            : b.add_fusion(args, m_.get(fc.name), fusion_kind_of(f_->groups[gi].kind));
    if (fc.roots.size() == 1) {
      val[std::size_t(fc.roots[0])] = long(f);
    } else {
      for (std::size_t r = 0; r < fc.roots.size(); ++r)
        val[std::size_t(fc.roots[r])] = long(b.add_get_tuple_element(f, std::int64_t(r)));
    }
  }

  const graph::graph_view& g_;
  const fusion_view* f_;
  const export_options& o_;
  module m_;
  std::map<std::string, instruction_id> params_;
  std::map<int, fused_computation> fusions_;
  std::map<int, split_group> splits_;
};

}  // namespace detail

FUSEDSL_DECL std::vector<export_binding> export_bindings(const graph::graph_view& g) {
  return detail::collect_bindings(g);
}

FUSEDSL_DECL module to_module(const graph::graph_view& g, const fusion_view* fusion,
                              const export_options& o) {
  if (o.form == export_form::fused && fusion == nullptr)
    throw graph::graph_error("hlo::export: the fused form needs the program's fusion plan");
  return detail::exporter(g, fusion, o).run();
}

}  // namespace fusedsl::hlo
