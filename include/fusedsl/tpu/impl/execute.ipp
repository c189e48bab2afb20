#pragma once
// The TPU-style executor: runs a schedule tile by tile.
// The bodies of fusedsl/tpu/execute.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/tpu/execute.hpp"

namespace fusedsl::tpu {

namespace detail {

inline std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> st(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) st[i - 1] = st[i] * dims[i];
  return st;
}

inline void unravel(std::int64_t lin, const std::vector<std::int64_t>& dims,
                    std::vector<std::int64_t>& idx) {
  idx.resize(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    const std::int64_t e = dims[d] == 0 ? 1 : dims[d];
    idx[d] = lin % e;
    lin /= e;
  }
}

inline double apply_unary(hlo::opcode op, double x, hlo::element_type out, hlo::element_type in) {
  using hlo::opcode;
  switch (op) {
    case opcode::abs: return std::fabs(x);
    case opcode::negate: return -x;
    case opcode::exponential: return std::exp(x);
    case opcode::exponential_minus_one: return std::expm1(x);
    case opcode::log: return std::log(x);
    case opcode::log_plus_one: return std::log1p(x);
    case opcode::sqrt: return std::sqrt(x);
    case opcode::rsqrt: return 1.0 / std::sqrt(x);
    case opcode::tanh: return std::tanh(x);
    case opcode::erf: return std::erf(x);
    case opcode::logistic: return 1.0 / (1.0 + std::exp(-x));
    case opcode::sign: return std::isnan(x) ? x : (x > 0) - (x < 0);
    case opcode::floor: return std::floor(x);
    case opcode::ceil: return std::ceil(x);
    case opcode::round_nearest_even: return std::nearbyint(x);
    case opcode::cosine: return std::cos(x);
    case opcode::sine: return std::sin(x);
    case opcode::not_: return in == hlo::element_type::pred ? double(x == 0.0)
                                                           : double(~std::int64_t(x));
    case opcode::copy: return x;
    case opcode::convert:
      if (hlo::is_integral(out) && std::isnan(x)) return 0.0;
      return x;
    default: break;
  }
  throw tpu_error(std::string("execute: unary op ") + std::string(to_string(op)) +
                  " is not supported");
}

inline double apply_binary(hlo::opcode op, double a, double b, hlo::element_type t,
                           const hlo::instruction& in) {
  using hlo::opcode;
  const bool integral = hlo::is_integral(t);
  switch (op) {
    case opcode::add: return a + b;
    case opcode::subtract: return a - b;
    case opcode::multiply: return a * b;
    case opcode::divide:
      if (integral) return b == 0 ? -1.0 : std::trunc(a / b);
      return a / b;
    case opcode::maximum:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
      return std::max(a, b);
    case opcode::minimum:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
      return std::min(a, b);
    case opcode::power: return std::pow(a, b);
    case opcode::remainder:
      return integral ? (b == 0 ? a : double(std::int64_t(a) % std::int64_t(b))) : std::fmod(a, b);
    case opcode::and_:
      return t == hlo::element_type::pred ? double(a != 0 && b != 0)
                                          : double(std::int64_t(a) & std::int64_t(b));
    case opcode::or_:
      return t == hlo::element_type::pred ? double(a != 0 || b != 0)
                                          : double(std::int64_t(a) | std::int64_t(b));
    case opcode::xor_:
      return t == hlo::element_type::pred ? double((a != 0) != (b != 0))
                                          : double(std::int64_t(a) ^ std::int64_t(b));
    case opcode::compare:
      switch (*in.direction) {
        case hlo::comparison_direction::eq: return a == b;
        case hlo::comparison_direction::ne: return a != b;
        case hlo::comparison_direction::lt: return a < b;
        case hlo::comparison_direction::le: return a <= b;
        case hlo::comparison_direction::gt: return a > b;
        case hlo::comparison_direction::ge: return a >= b;
      }
      break;
    default: break;
  }
  throw tpu_error("execute: " + in.name + ": binary op " + std::string(to_string(op)) +
                  " is not supported");
}

// The reducer of a reduce when its computation's root applies one binary op to its two
// parameters (add, maximum, ...): that op, applied directly. Otherwise none.
inline std::optional<hlo::opcode> reducer_op(const hlo::module& m, const hlo::instruction& in) {
  const auto& c = m.get(in.called_computation);
  const auto& r = c.root_instruction();
  using hlo::opcode;
  const bool ok = (r.opcode == opcode::add || r.opcode == opcode::maximum ||
                   r.opcode == opcode::minimum || r.opcode == opcode::multiply ||
                   r.opcode == opcode::and_ || r.opcode == opcode::or_) &&
                  r.operands.size() == 2 &&
                  c.instructions[r.operands[0]].opcode == opcode::parameter &&
                  c.instructions[r.operands[1]].opcode == opcode::parameter;
  if (!ok) return std::nullopt;
  return r.opcode;
}

// A scalar computation (a reduce's to_apply, e.g. argmax's comparator) on scalar arguments, op
// by op, each result rounded to its type; returns the root's value, one per tuple element.
inline std::vector<double> eval_scalar_computation(const hlo::computation& c,
                                                   const std::vector<double>& args) {
  using hlo::opcode;
  std::vector<std::vector<double>> v(c.instructions.size());
  for (std::size_t i = 0; i < c.instructions.size(); ++i) {
    const auto& in = c.instructions[i];
    auto fail = [&](const std::string& why) -> void {
      throw tpu_error("execute: reduce computation " + c.name + ", " + in.name + ": " + why);
    };
    if (in.opcode == opcode::tuple) {
      for (auto o : in.operands) v[i].push_back(v[o].at(0));
      continue;
    }
    if (in.shape.is_tuple() || in.shape.rank() != 0) fail("only scalar values are supported");
    const auto t = in.shape.type;
    auto arg = [&](std::size_t k) { return v[in.operands.at(k)].at(0); };
    auto type_of = [&](std::size_t k) { return c.instructions[in.operands.at(k)].shape.type; };
    double r = 0;
    if (in.opcode == opcode::parameter) {
      r = args.at(std::size_t(in.parameter_number));
    } else if (in.opcode == opcode::constant) {
      r = in.literal->get(0);
    } else if (in.opcode == opcode::select) {
      r = arg(0) != 0 ? arg(1) : arg(2);
    } else if (in.opcode == opcode::clamp) {
      r = std::min(std::max(arg(1), arg(0)), arg(2));
    } else if (hlo::is_elementwise_unary(in.opcode)) {
      r = apply_unary(in.opcode, arg(0), t, type_of(0));
    } else if (hlo::is_elementwise_binary(in.opcode)) {
      r = apply_binary(in.opcode, arg(0), arg(1), type_of(0), in);
    } else {
      fail("op " + std::string(to_string(in.opcode)) + " is not supported");
    }
    v[i] = {hlo::round_to(t, r)};
  }
  return v[c.root];
}

// An integer index held as a double, kept far from int64's limits (indices are clamped anyway).
inline std::int64_t to_index(double x) {
  constexpr double limit = 0x1p62;
  return std::int64_t(std::clamp(x, -limit, limit));
}
inline std::int64_t linear(const std::vector<std::int64_t>& idx,
                           const std::vector<std::int64_t>& st) {
  std::int64_t j = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) j += idx[d] * st[d];
  return j;
}

// Output elements [lo, hi) of `in` when it is a select, clamp, constant, iota or layout op
// (reshape, broadcast, transpose, slice, concatenate), through put(i, v); false for other ops.
template <class Put>
bool layout_range(const hlo::instruction& in, const std::vector<const value*>& ops,
                  std::int64_t lo, std::int64_t hi, Put&& put) {
  using hlo::opcode;
  const auto& sh = in.shape;
  std::vector<std::int64_t> idx, src;
  auto at = [&](const value* v, std::int64_t i) {  // scalar operands broadcast (select, clamp)
    return v->data.size() == 1 ? v->data[0] : v->data[std::size_t(i)];
  };
  // Element i of the result read from element j of operand `from` (layout ops), for each i.
  auto gather_by = [&](const value& from, auto&& source) {
    for (auto i = lo; i < hi; ++i) {
      unravel(i, sh.dims, idx);
      put(i, from.data[std::size_t(source())]);
    }
  };
  switch (in.opcode) {
    case opcode::select:
      for (auto i = lo; i < hi; ++i) put(i, at(ops[0], i) != 0 ? at(ops[1], i) : at(ops[2], i));
      return true;
    case opcode::clamp:
      for (auto i = lo; i < hi; ++i)
        put(i, std::min(std::max(at(ops[1], i), at(ops[0], i)), at(ops[2], i)));
      return true;
    case opcode::constant: {
      const auto& l = *in.literal;
      for (auto i = lo; i < hi; ++i)
        put(i, l.element_count() == 1 ? l.get(0) : l.get(std::size_t(i)));
      return true;
    }
    case opcode::iota:
      for (auto i = lo; i < hi; ++i) {
        unravel(i, sh.dims, idx);
        put(i, double(idx[std::size_t(in.iota_dimension)]));
      }
      return true;
    case opcode::reshape:
      for (auto i = lo; i < hi; ++i) put(i, ops[0]->data[std::size_t(i)]);
      return true;
    case opcode::broadcast: {
      const auto st = strides_of(ops[0]->shape.dims);
      gather_by(*ops[0], [&] {
        std::int64_t j = 0;
        for (std::size_t d = 0; d < in.dimensions.size(); ++d)
          j += idx[std::size_t(in.dimensions[d])] * st[d];
        return j;
      });
      return true;
    }
    case opcode::transpose: {
      const auto st = strides_of(ops[0]->shape.dims);
      gather_by(*ops[0], [&] {
        std::int64_t j = 0;
        for (std::size_t d = 0; d < idx.size(); ++d)
          j += idx[d] * st[std::size_t(in.dimensions[d])];
        return j;
      });
      return true;
    }
    case opcode::slice: {
      const auto st = strides_of(ops[0]->shape.dims);
      gather_by(*ops[0], [&] {
        std::int64_t j = 0;
        for (std::size_t d = 0; d < idx.size(); ++d)
          j += (in.slice[d].start + idx[d] * in.slice[d].stride) * st[d];
        return j;
      });
      return true;
    }
    case opcode::concatenate: {
      const auto cd = std::size_t(in.dimensions.at(0));
      std::vector<std::vector<std::int64_t>> strides;  // per operand, once
      for (const value* v : ops) strides.push_back(strides_of(v->shape.dims));
      for (auto i = lo; i < hi; ++i) {
        unravel(i, sh.dims, idx);
        std::int64_t off = idx[cd];
        std::size_t which = 0;
        while (off >= ops[which]->shape.dims[cd]) off -= ops[which]->shape.dims[cd], ++which;
        src = idx;
        src[cd] = off;
        put(i, ops[which]->data[std::size_t(linear(src, strides[which]))]);
      }
      return true;
    }
    default: return false;
  }
}

// Output elements [lo, hi) of a gather, dynamic slice or dynamic update slice, through put(i, v);
// false for other ops.
template <class Put>
bool indexed_range(const hlo::instruction& in, const std::vector<const value*>& ops,
                   std::int64_t lo, std::int64_t hi, Put&& put) {
  using hlo::opcode;
  const auto& sh = in.shape;
  std::vector<std::int64_t> idx, src;
  if (in.opcode == opcode::gather) {
    const value& x = *ops[0];
    const value& ix = *ops[1];
    const auto xs = strides_of(x.shape.dims), is = strides_of(ix.shape.dims);
    for (auto i = lo; i < hi; ++i) {
      unravel(i, sh.dims, idx);
      src = hlo::gather_source(in, x.shape, ix.shape, idx, [&](const std::vector<std::int64_t>& j) {
        return to_index(ix.data[std::size_t(linear(j, is))]);
      });
      put(i, x.data[std::size_t(linear(src, xs))]);
    }
    return true;
  }
  if (in.opcode != opcode::dynamic_slice && in.opcode != opcode::dynamic_update_slice) return false;
  const bool update = in.opcode == opcode::dynamic_update_slice;
  const value& x = *ops[0];
  std::vector<std::int64_t> starts;
  for (std::size_t k = update ? 2 : 1; k < ops.size(); ++k)
    starts.push_back(to_index(ops[k]->data.at(0)));
  const auto& window = update ? ops[1]->shape.dims : sh.dims;
  starts = hlo::clamp_starts(std::move(starts), x.shape.dims, window);
  const auto xs = strides_of(x.shape.dims), ws = strides_of(window);
  for (auto i = lo; i < hi; ++i) {
    unravel(i, sh.dims, idx);
    bool inside = true;
    for (std::size_t d = 0; d < idx.size(); ++d) {
      idx[d] += update ? -starts[d] : starts[d];
      inside = inside && idx[d] >= 0 && idx[d] < window[d];
    }
    if (!update)
      put(i, x.data[std::size_t(linear(idx, xs))]);
    else
      put(i, inside ? ops[1]->data[std::size_t(linear(idx, ws))] : x.data[std::size_t(i)]);
  }
  return true;
}

}  // namespace detail

class executor {
 public:
  explicit executor(const schedule& s) : s_(s), g_(s.graph) {}

  // Runs the schedule on `inputs` (by parameter number); returns the entry root's value.
  value run(const std::vector<value>& inputs) {
    if (inputs.size() != g_.inputs.size())
      throw tpu_error("execute: the module takes " + std::to_string(g_.inputs.size()) +
                      " inputs, got " + std::to_string(inputs.size()));
    env_.assign(g_.nodes.size(), value{});
    done_.assign(g_.nodes.size(), false);
    for (std::size_t n = 0; n < inputs.size(); ++n) {
      const auto id = g_.inputs[n];
      const auto& want = g_.shape(id);
      if (!want.compatible(inputs[n].shape))
        throw tpu_error("execute: input " + std::to_string(n) + " (" + g_.nodes[id].name +
                        ") must be " + hlo::to_short_string(want) + ", got " +
                        hlo::to_short_string(inputs[n].shape));
      env_[id] = inputs[n];
      env_[id].shape = want;
      for (auto& x : env_[id].data) x = hlo::round_to(want.type, x);
      done_[id] = true;
    }
    for (std::size_t k = 0; k < s_.groups.size(); ++k) run_kernel(k);
    return get(g_.root);
  }

 private:
  const schedule& s_;
  const flat_graph& g_;
  std::vector<value> env_;
  std::vector<bool> done_;

  const value& get(std::size_t id) {
    if (!done_[id]) {
      if (!is_layout_op(g_.op(id)))
        throw tpu_error("execute: value of " + g_.nodes[id].name + " used before its kernel ran");
      eval_whole(id);
    }
    return env_[id];
  }

  void eval_whole(std::size_t id) {
    const auto& in = *g_.nodes[id].inst;
    if (in.opcode == hlo::opcode::tuple) {
      value v;
      v.shape = in.shape;
      for (auto o : g_.nodes[id].operands) v.elements.push_back(get(o));
      env_[id] = std::move(v);
      done_[id] = true;
      return;
    }
    if (in.opcode == hlo::opcode::parameter)
      throw tpu_error("execute: input " + g_.nodes[id].name + " was not bound");
    if (in.opcode == hlo::opcode::get_tuple_element) {  // of a variadic reduce
      env_[id] = get(g_.nodes[id].operands.at(0)).elements.at(std::size_t(in.tuple_index));
      done_[id] = true;
      return;
    }
    if (in.shape.is_tuple()) {
      if (in.opcode != hlo::opcode::reduce)
        throw tpu_error("execute: " + g_.nodes[id].name + ": a tuple-shaped " +
                        std::string(to_string(in.opcode)) + " is not supported");
      env_[id] = reduce_tuple(id);
      done_[id] = true;
      return;
    }
    env_[id] = value::zeros(in.shape);
    eval_range(id, 0, in.shape.element_count());
    done_[id] = true;
  }

  // Output elements [lo, hi) of a non-dot array op.
  void eval_range(std::size_t id, std::int64_t lo, std::int64_t hi) {
    const auto& node = g_.nodes[id];
    const auto& in = *node.inst;
    const auto& sh = in.shape;
    const auto t = sh.type;
    std::vector<const value*> ops;
    for (auto o : node.operands) ops.push_back(&get(o));
    auto& out = env_[id].data;
    using hlo::opcode;
    auto put = [&](std::int64_t i, double v) { out[std::size_t(i)] = hlo::round_to(t, v); };
    if (hlo::is_elementwise_unary(in.opcode)) {
      const auto in_t = ops[0]->shape.type;
      for (auto i = lo; i < hi; ++i)
        put(i, detail::apply_unary(in.opcode, ops[0]->data[std::size_t(i)], t, in_t));
      return;
    }
    if (hlo::is_elementwise_binary(in.opcode)) {
      const auto op_t = ops[0]->shape.type;
      for (auto i = lo; i < hi; ++i)
        put(i, detail::apply_binary(in.opcode, ops[0]->data[std::size_t(i)],
                                    ops[1]->data[std::size_t(i)], op_t, in));
      return;
    }
    if (detail::layout_range(in, ops, lo, hi, put) || detail::indexed_range(in, ops, lo, hi, put))
      return;
    if (in.opcode == opcode::reduce) {
      const auto rop = detail::reducer_op(*g_.module, in);
      const auto& f = g_.module->get(in.called_computation);
      const auto& is = ops[0]->shape;
      const double init = ops[1]->data.at(0);
      for (auto i = lo; i < hi; ++i) {
        double acc = init;
        for_each_reduced(in, is, i, [&](std::int64_t j) {
          const double x = ops[0]->data[std::size_t(j)];
          acc = rop ? detail::apply_binary(*rop, acc, x, is.type, in)
                    : detail::eval_scalar_computation(f, {acc, x}).at(0);
        });
        put(i, acc);
      }
      return;
    }
    throw tpu_error("execute: " + node.name + ": op " + std::string(to_string(in.opcode)) +
                    " is not supported");
  }

  // Calls f(j) for the input elements that output element i of reduce `in` combines, in index
  // order (input shape is).
  template <class F>
  static void for_each_reduced(const hlo::instruction& in, const hlo::shape& is, std::int64_t i,
                               F&& f) {
    const auto st = detail::strides_of(is.dims);
    std::vector<bool> reduced(is.dims.size(), false);
    for (auto d : in.dimensions) reduced[std::size_t(d)] = true;
    std::vector<std::int64_t> rdims, rstr, kept, idx, ridx;
    for (std::size_t d = 0; d < is.dims.size(); ++d)
      if (reduced[d])
        rdims.push_back(is.dims[d]), rstr.push_back(st[d]);
      else
        kept.push_back(is.dims[d]);
    std::int64_t rcount = 1;
    for (auto d : rdims) rcount *= d;
    detail::unravel(i, kept, idx);
    std::int64_t base = 0;
    for (std::size_t d = 0, k = 0; d < is.dims.size(); ++d)
      if (!reduced[d]) base += idx[k++] * st[d];
    for (std::int64_t r = 0; r < rcount; ++r) {
      detail::unravel(r, rdims, ridx);
      f(base + detail::linear(ridx, rstr));
    }
  }

  // A variadic reduce (argmax: value and index): the accumulators combined with each element
  // through its to_apply, in index order; one result array per input.
  value reduce_tuple(std::size_t id) {
    const auto& in = *g_.nodes[id].inst;
    const auto& f = g_.module->get(in.called_computation);
    std::vector<const value*> ops;
    for (auto o : g_.nodes[id].operands) ops.push_back(&get(o));
    const std::size_t n = ops.size() / 2;
    value out;
    out.shape = in.shape;
    for (const auto& e : in.shape.elements) out.elements.push_back(value::zeros(e));
    const auto& is = ops[0]->shape;
    std::vector<double> args(2 * n);
    const std::int64_t count = in.shape.elements.at(0).element_count();
    for (std::int64_t i = 0; i < count; ++i) {
      for (std::size_t k = 0; k < n; ++k) args[k] = ops[n + k]->data.at(0);
      for_each_reduced(in, is, i, [&](std::int64_t j) {
        for (std::size_t k = 0; k < n; ++k) args[n + k] = ops[k]->data[std::size_t(j)];
        const auto r = detail::eval_scalar_computation(f, args);
        for (std::size_t k = 0; k < n; ++k) args[k] = r.at(k);
      });
      for (std::size_t k = 0; k < n; ++k) out.elements[k].data[std::size_t(i)] = args[k];
    }
    return out;
  }

  void run_kernel(std::size_t k) {
    const auto& grp = s_.groups[k];
    const auto& kp = s_.kernels[k];
    if (kp.kind == kernel_kind::fused) {
      run_fused(grp, kp);
      return;
    }
    if (grp.dot) {
      run_matmul(grp, kp);
      return;
    }
    for (auto id : grp.nodes) {
      if (done_[id]) continue;
      const auto& sh = g_.shape(id);
      if (sh.is_tuple() || is_layout_op(g_.op(id))) {
        eval_whole(id);
        continue;
      }
      env_[id] = value::zeros(sh);
      const auto n = sh.element_count();
      const auto chunks = std::int64_t(std::max<std::size_t>(kp.steps.size(), 1));
      for (std::int64_t c = 0; c < chunks; ++c)
        eval_range(id, n * c / chunks, n * (c + 1) / chunks);
      done_[id] = true;
    }
  }

  // Gathers a dot operand into [batch][rows][cols] float, rows/cols being the given dim lists.
  template <class T>
  std::vector<T> canonical(const value& v, const std::vector<std::int64_t>& batch,
                           const std::vector<std::int64_t>& rows,
                           const std::vector<std::int64_t>& cols) {
    const auto st = detail::strides_of(v.shape.dims);
    std::vector<std::int64_t> order = batch;
    order.insert(order.end(), rows.begin(), rows.end());
    order.insert(order.end(), cols.begin(), cols.end());
    std::vector<std::int64_t> dims, strides;
    for (auto d : order)
      dims.push_back(v.shape.dims[std::size_t(d)]), strides.push_back(st[std::size_t(d)]);
    std::int64_t total = 1;
    for (auto d : dims) total *= d;
    std::vector<T> out(static_cast<std::size_t>(total));
    std::vector<std::int64_t> idx;
    for (std::int64_t i = 0; i < total; ++i) {
      detail::unravel(i, dims, idx);
      std::int64_t j = 0;
      for (std::size_t d = 0; d < idx.size(); ++d) j += idx[d] * strides[d];
      out[std::size_t(i)] = T(v.data[std::size_t(j)]);
    }
    return out;
  }

  void run_matmul(const kernel_group& grp, const kernel_plan& kp) {
    run_dot(*grp.dot, grp.nodes, kp.mm, kp.blocks);
  }

  // A fused kernel: its ops in order, each dot tiled in its own blocks.
  void run_fused(const kernel_group& grp, const kernel_plan& kp) {
    for (auto id : grp.nodes) {
      if (done_[id]) continue;
      const auto it = std::find(kp.dot_nodes.begin(), kp.dot_nodes.end(), id);
      if (it != kp.dot_nodes.end()) {
        const auto i = std::size_t(it - kp.dot_nodes.begin());
        run_dot(id, {id}, kp.dot_problems[i], kp.dot_blocks[i]);
      } else {
        eval_whole(id);
      }
    }
  }

  // Computes `dot` tile by tile in grid order (batch, i, j, k), k innermost, applying the
  // elementwise ops of `nodes` that follow it to each finished tile.
  void run_dot(std::size_t dot, const std::vector<std::size_t>& nodes, const matmul_problem& p,
               const matmul_blocks& blk) {
    const auto& in = *g_.nodes[dot].inst;
    const auto& dn = *in.dot;
    // Nodes before the dot's tiles: those that do not depend on it (prologue, broadcasts).
    std::vector<bool> dep(g_.nodes.size(), false);
    dep[dot] = true;
    std::vector<std::size_t> pre, tile_epi, post;
    const auto& dot_dims = g_.shape(dot).dims;
    for (auto id : nodes) {
      if (id == dot) continue;
      bool d = false;
      for (auto o : g_.nodes[id].operands) d = d || dep[o];
      dep[id] = d;
      if (!d) pre.push_back(id);
      else if (post.empty() && hlo::is_elementwise(g_.op(id)) && g_.shape(id).dims == dot_dims)
        tile_epi.push_back(id);
      else
        post.push_back(id);
    }
    for (auto id : pre)
      if (!done_[id]) eval_whole(id);
    const value& a = get(g_.nodes[dot].operands[0]);
    const value& b = get(g_.nodes[dot].operands[1]);
    std::vector<bool> ua(a.shape.dims.size(), false), ub(b.shape.dims.size(), false);
    for (auto d : dn.lhs_batch) ua[std::size_t(d)] = true;
    for (auto d : dn.lhs_contracting) ua[std::size_t(d)] = true;
    for (auto d : dn.rhs_batch) ub[std::size_t(d)] = true;
    for (auto d : dn.rhs_contracting) ub[std::size_t(d)] = true;
    std::vector<std::int64_t> a_free, b_free;
    for (std::size_t d = 0; d < ua.size(); ++d)
      if (!ua[d]) a_free.push_back(std::int64_t(d));
    for (std::size_t d = 0; d < ub.size(); ++d)
      if (!ub[d]) b_free.push_back(std::int64_t(d));
    env_[dot] = value::zeros(g_.shape(dot));
    for (auto id : tile_epi) env_[id] = value::zeros(g_.shape(id));
    // f32 accumulation, as the MXU's accumulators for floating dots; integer dots (int8 products
    // into s32) sum exactly, as the MXU's integer accumulators do.
    if (hlo::is_integral(g_.shape(dot).type))
      dot_tiles<double>(dot, a, b, a_free, b_free, tile_epi, p, blk);
    else
      dot_tiles<float>(dot, a, b, a_free, b_free, tile_epi, p, blk);
    done_[dot] = true;
    for (auto id : tile_epi) done_[id] = true;
    for (auto id : post)
      if (!done_[id]) eval_whole(id);
  }

  template <class T>
  void dot_tiles(std::size_t dot, const value& a, const value& b,
                 const std::vector<std::int64_t>& a_free, const std::vector<std::int64_t>& b_free,
                 const std::vector<std::size_t>& tile_epi, const matmul_problem& p,
                 const matmul_blocks& blk) {
    const auto& dn = *g_.nodes[dot].inst->dot;
    const auto A = canonical<T>(a, dn.lhs_batch, a_free, dn.lhs_contracting);
    const auto B = canonical<T>(b, dn.rhs_batch, dn.rhs_contracting, b_free);
    const auto grid = grid_of(p, blk);
    using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using cmap = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
    const auto out_t = g_.shape(dot).type;
    mat acc;
    for (std::int64_t bi = 0; bi < p.batch; ++bi)
    for (std::int64_t i = 0; i < grid.gm; ++i)
    for (std::int64_t j = 0; j < grid.gn; ++j)
    for (std::int64_t kk = 0; kk < grid.gk; ++kk) {
      const std::int64_t r0 = i * blk.bm, c0 = j * blk.bn, k0 = kk * blk.bk;
      const std::int64_t rows = std::min(blk.bm, p.m - r0), cols = std::min(blk.bn, p.n - c0);
      const std::int64_t depth = std::min(blk.bk, p.k - k0);
      if (kk == 0) acc = mat::Zero(rows, cols);
      cmap Ab(A.data() + (bi * p.m + r0) * p.k + k0, rows, depth, Eigen::OuterStride<>(p.k));
      cmap Bb(B.data() + (bi * p.k + k0) * p.n + c0, depth, cols, Eigen::OuterStride<>(p.n));
      acc.noalias() += Ab * Bb;
      if (kk + 1 != grid.gk) continue;
      // Output tile complete: round to the dot's type, then the fused epilogue on this tile.
      auto& out = env_[dot].data;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          out[std::size_t((bi * p.m + r0 + r) * p.n + c0 + c)] =
              hlo::round_to(out_t, double(acc(r, c)));
      for (auto id : tile_epi) {
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::int64_t lo = (bi * p.m + r0 + r) * p.n + c0;
          eval_epilogue_row(id, lo, lo + cols);
        }
      }
    }
  }

  // Elementwise epilogue op over output elements [lo, hi), operands read from the tiles already
  // produced (dot and earlier epilogue ops) or from finished values.
  void eval_epilogue_row(std::size_t id, std::int64_t lo, std::int64_t hi) {
    for (auto o : g_.nodes[id].operands)
      if (!done_[o] && env_[o].data.empty() && is_layout_op(g_.op(o))) eval_whole(o);
    const auto& node = g_.nodes[id];
    const auto& in = *node.inst;
    auto& out = env_[id].data;
    const auto t = in.shape.type;
    auto val = [&](std::size_t o, std::int64_t i) {
      const auto& d = env_[o].data;
      return d.size() == 1 ? d[0] : d[std::size_t(i)];
    };
    for (auto i = lo; i < hi; ++i) {
      double v;
      if (hlo::is_elementwise_unary(in.opcode))
        v = detail::apply_unary(in.opcode, val(node.operands[0], i), t,
                                g_.shape(node.operands[0]).type);
      else if (hlo::is_elementwise_binary(in.opcode))
        v = detail::apply_binary(in.opcode, val(node.operands[0], i), val(node.operands[1], i),
                                 g_.shape(node.operands[0]).type, in);
      else if (in.opcode == hlo::opcode::select)
        v = val(node.operands[0], i) != 0 ? val(node.operands[1], i) : val(node.operands[2], i);
      else
        v = std::min(std::max(val(node.operands[1], i), val(node.operands[0], i)),
                     val(node.operands[2], i));
      out[std::size_t(i)] = hlo::round_to(t, v);
    }
  }
};

FUSEDSL_DECL value execute(const schedule& s, const std::vector<value>& inputs) {
  executor ex(s);
  return ex.run(inputs);
}

}  // namespace fusedsl::tpu
