#pragma once
// A plain-loop reference evaluator for the runtime HLO IR, used to compute the expected outputs
// that XLA's results are compared with. Values are held as doubles and rounded to their element
// type after every op (so bf16/f16/f32 results are the correctly rounded values of each op).
// Semantics follow the XLA operation semantics page (openxla.org/xla/operation_semantics).

#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusedsl/hlo/indexing.hpp"
#include "fusedsl/hlo/ir.hpp"

namespace fusedsl::hlo::reference {

struct value {
  hlo::shape shape;
  std::vector<double> data;  // row-major (logical order; layouts do not change values)
  std::vector<value> tuple;  // when shape is a tuple
};

namespace detail {

inline std::vector<std::int64_t> unravel(std::int64_t i, const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> idx(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    idx[d] = dims[d] ? i % dims[d] : 0;
    i = dims[d] ? i / dims[d] : 0;
  }
  return idx;
}
inline std::int64_t ravel(const std::vector<std::int64_t>& idx,
                          const std::vector<std::int64_t>& dims) {
  std::int64_t i = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) i = i * dims[d] + idx[d];
  return i;
}
inline double store(element_type t, double v) {
  if (t == element_type::s32) return static_cast<double>(static_cast<std::int32_t>(std::trunc(v)));
  return round_to(t, v);
}
inline double apply_unary(opcode op, element_type t, double x) {
  switch (op) {
    case opcode::not_:
      return t == element_type::pred ? static_cast<double>(x == 0)
                                     : static_cast<double>(~static_cast<std::int64_t>(x));
    case opcode::abs:
      return std::fabs(x);
    case opcode::negate:
      return -x;
    case opcode::exponential:
      return std::exp(x);
    case opcode::exponential_minus_one:
      return std::expm1(x);
    case opcode::log:
      return std::log(x);
    case opcode::log_plus_one:
      return std::log1p(x);
    case opcode::sqrt:
      return std::sqrt(x);
    case opcode::rsqrt:
      return 1.0 / std::sqrt(x);
    case opcode::tanh:
      return std::tanh(x);
    case opcode::erf:
      return std::erf(x);
    case opcode::logistic:
      return 1.0 / (1.0 + std::exp(-x));
    case opcode::sign:
      return std::isnan(x) ? x : (x > 0) - (x < 0);
    case opcode::floor:
      return std::floor(x);
    case opcode::ceil:
      return std::ceil(x);
    case opcode::round_nearest_even:
      return std::nearbyint(x);
    case opcode::cosine:
      return std::cos(x);
    case opcode::sine:
      return std::sin(x);
    case opcode::copy:
      return x;
    default:
      throw std::logic_error("reference: not a unary op: " + std::string(to_string(op)));
  }
}
inline double apply_binary(opcode op, element_type t, double a, double b) {
  auto i = [](double v) { return static_cast<std::int64_t>(v); };
  switch (op) {
    case opcode::add:
      return a + b;
    case opcode::subtract:
      return a - b;
    case opcode::multiply:
      return a * b;
    case opcode::divide:
      return is_integral(t) ? static_cast<double>(i(a) / i(b)) : a / b;
    case opcode::maximum:
      return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case opcode::minimum:
      return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case opcode::power:
      return std::pow(a, b);
    case opcode::remainder:
      return std::fmod(a, b);
    case opcode::and_:
      return static_cast<double>(t == element_type::pred ? (a != 0 && b != 0) : (i(a) & i(b)));
    case opcode::or_:
      return static_cast<double>(t == element_type::pred ? (a != 0 || b != 0) : (i(a) | i(b)));
    case opcode::xor_:
      return static_cast<double>(t == element_type::pred ? ((a != 0) != (b != 0)) : (i(a) ^ i(b)));
    default:
      throw std::logic_error("reference: not a binary op: " + std::string(to_string(op)));
  }
}
inline bool compare(comparison_direction d, double a, double b) {
  switch (d) {
    case comparison_direction::eq:
      return a == b;
    case comparison_direction::ne:
      return a != b;
    case comparison_direction::lt:
      return a < b;
    case comparison_direction::le:
      return a <= b;
    case comparison_direction::gt:
      return a > b;
    case comparison_direction::ge:
      return a >= b;
  }
  return false;
}

}  // namespace detail

value evaluate(const module& m, const computation& c, const std::vector<value>& args);

inline value evaluate_instruction(const module& m, const computation& c, const instruction& in,
                                  const std::vector<value>& vals, const std::vector<value>& args) {
  using namespace detail;
  auto arg = [&](std::size_t k) -> const value& { return vals.at(in.operands.at(k)); };
  value r;
  r.shape = in.shape;
  const element_type t = in.shape.type;
  const std::int64_t n = in.shape.is_tuple() ? 0 : in.shape.element_count();
  auto fill = [&](auto&& f) {
    r.data.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) r.data[static_cast<std::size_t>(i)] = store(t, f(i));
  };
  auto at = [](const value& v, std::int64_t i) { return v.data[static_cast<std::size_t>(i)]; };
  switch (in.opcode) {
    case opcode::parameter:
      return args.at(static_cast<std::size_t>(in.parameter_number));
    case opcode::constant:
      fill([&](std::int64_t i) { return in.literal->get(static_cast<std::size_t>(i)); });
      return r;
    case opcode::iota:
      fill([&](std::int64_t i) {
        return static_cast<double>(
            unravel(i, in.shape.dims)[static_cast<std::size_t>(in.iota_dimension)]);
      });
      return r;
    case opcode::convert:
      fill([&](std::int64_t i) {
        double v = at(arg(0), i);
        return t == element_type::pred ? static_cast<double>(v != 0)
               : is_integral(t)        ? std::trunc(v)
                                       : v;
      });
      return r;
    case opcode::compare:
      fill([&](std::int64_t i) {
        return static_cast<double>(compare(*in.direction, at(arg(0), i), at(arg(1), i)));
      });
      return r;
    case opcode::select:
      fill([&](std::int64_t i) {
        double p = arg(0).data.size() == 1 ? arg(0).data[0] : at(arg(0), i);
        return p != 0 ? at(arg(1), i) : at(arg(2), i);
      });
      return r;
    case opcode::clamp:
      fill([&](std::int64_t i) {
        double lo = arg(0).data.size() == 1 ? arg(0).data[0] : at(arg(0), i);
        double hi = arg(2).data.size() == 1 ? arg(2).data[0] : at(arg(2), i);
        return std::min(std::max(at(arg(1), i), lo), hi);
      });
      return r;
    case opcode::dot: {
      const value &a = arg(0), &b = arg(1);
      const auto& dn = *in.dot;
      std::vector<std::size_t> lfree, rfree;
      auto is_in = [](const std::vector<std::int64_t>& v, std::size_t d) {
        for (auto x : v)
          if (static_cast<std::size_t>(x) == d) return true;
        return false;
      };
      for (std::size_t d = 0; d < a.shape.dims.size(); ++d)
        if (!is_in(dn.lhs_batch, d) && !is_in(dn.lhs_contracting, d)) lfree.push_back(d);
      for (std::size_t d = 0; d < b.shape.dims.size(); ++d)
        if (!is_in(dn.rhs_batch, d) && !is_in(dn.rhs_contracting, d)) rfree.push_back(d);
      std::vector<std::int64_t> kdims;
      for (auto d : dn.lhs_contracting) kdims.push_back(a.shape.dims[static_cast<std::size_t>(d)]);
      std::int64_t kcount = 1;
      for (auto k : kdims) kcount *= k;
      fill([&](std::int64_t i) {
        auto ri = unravel(i, in.shape.dims);
        std::vector<std::int64_t> ai(a.shape.dims.size()), bi(b.shape.dims.size());
        std::size_t p = 0;
        for (std::size_t k = 0; k < dn.lhs_batch.size(); ++k, ++p) {
          ai[static_cast<std::size_t>(dn.lhs_batch[k])] = ri[p];
          bi[static_cast<std::size_t>(dn.rhs_batch[k])] = ri[p];
        }
        for (auto d : lfree) ai[d] = ri[p++];
        for (auto d : rfree) bi[d] = ri[p++];
        double sum = 0;
        for (std::int64_t k = 0; k < kcount; ++k) {
          auto ki = unravel(k, kdims);
          for (std::size_t j = 0; j < ki.size(); ++j) {
            ai[static_cast<std::size_t>(dn.lhs_contracting[j])] = ki[j];
            bi[static_cast<std::size_t>(dn.rhs_contracting[j])] = ki[j];
          }
          sum += at(a, ravel(ai, a.shape.dims)) * at(b, ravel(bi, b.shape.dims));
        }
        return sum;
      });
      return r;
    }
    case opcode::broadcast:
      fill([&](std::int64_t i) {
        auto ri = unravel(i, in.shape.dims);
        std::vector<std::int64_t> oi;
        for (auto d : in.dimensions) oi.push_back(ri[static_cast<std::size_t>(d)]);
        return at(arg(0), ravel(oi, arg(0).shape.dims));
      });
      return r;
    case opcode::reduce: {
      // n inputs and n inits; the accumulators combined with each element in row-major order.
      const std::size_t count = in.operands.size() / 2;
      const value& x = arg(0);
      const computation& f = m.get(in.called_computation);
      const std::vector<std::int64_t>& out_dims =
          in.shape.is_tuple() ? in.shape.elements[0].dims : in.shape.dims;
      std::int64_t outs = 1;
      for (auto d : out_dims) outs *= d;
      std::vector<std::vector<double>> acc(count);
      for (std::size_t k = 0; k < count; ++k)
        acc[k].assign(static_cast<std::size_t>(outs), arg(count + k).data[0]);
      std::vector<bool> reduced(x.shape.dims.size(), false);
      for (auto d : in.dimensions) reduced[static_cast<std::size_t>(d)] = true;
      std::vector<value> scalars(2 * count);
      for (std::size_t k = 0; k < 2 * count; ++k)
        scalars[k] = {hlo::shape::scalar(arg(k % count).shape.type), {0}, {}};
      for (std::int64_t i = 0; i < x.shape.element_count(); ++i) {
        auto xi = unravel(i, x.shape.dims);
        std::vector<std::int64_t> oi;
        for (std::size_t d = 0; d < xi.size(); ++d)
          if (!reduced[d]) oi.push_back(xi[d]);
        const auto o = static_cast<std::size_t>(ravel(oi, out_dims));
        for (std::size_t k = 0; k < count; ++k) {
          scalars[k].data[0] = acc[k][o];
          scalars[count + k].data[0] = at(arg(k), i);
        }
        const value next = evaluate(m, f, scalars);
        for (std::size_t k = 0; k < count; ++k)
          acc[k][o] = count == 1 ? next.data[0] : next.tuple.at(k).data[0];
      }
      if (count == 1) {
        r.data = std::move(acc[0]);
        return r;
      }
      for (std::size_t k = 0; k < count; ++k)
        r.tuple.push_back({in.shape.elements[k], std::move(acc[k]), {}});
      return r;
    }
    case opcode::gather: {
      const value &x = arg(0), &ix = arg(1);
      fill([&](std::int64_t i) {
        const auto src =
            gather_source(in, x.shape, ix.shape, unravel(i, in.shape.dims),
                          [&](const std::vector<std::int64_t>& j) {
                            return static_cast<std::int64_t>(at(ix, ravel(j, ix.shape.dims)));
                          });
        return at(x, ravel(src, x.shape.dims));
      });
      return r;
    }
    case opcode::dynamic_slice:
    case opcode::dynamic_update_slice: {
      const bool update = in.opcode == opcode::dynamic_update_slice;
      const value& x = arg(0);
      const std::size_t first = update ? 2 : 1;
      std::vector<std::int64_t> starts;
      for (std::size_t k = first; k < in.operands.size(); ++k)
        starts.push_back(static_cast<std::int64_t>(arg(k).data[0]));
      const std::vector<std::int64_t>& window = update ? arg(1).shape.dims : in.shape.dims;
      starts = clamp_starts(std::move(starts), x.shape.dims, window);
      fill([&](std::int64_t i) {
        auto ri = unravel(i, in.shape.dims);
        if (!update) {
          for (std::size_t d = 0; d < ri.size(); ++d) ri[d] += starts[d];
          return at(x, ravel(ri, x.shape.dims));
        }
        bool inside = true;
        for (std::size_t d = 0; d < ri.size(); ++d) {
          ri[d] -= starts[d];
          inside = inside && ri[d] >= 0 && ri[d] < window[d];
        }
        return inside ? at(arg(1), ravel(ri, window)) : at(x, i);
      });
      return r;
    }
    case opcode::transpose:
      fill([&](std::int64_t i) {
        auto ri = unravel(i, in.shape.dims);
        std::vector<std::int64_t> oi(ri.size());
        for (std::size_t d = 0; d < ri.size(); ++d)
          oi[static_cast<std::size_t>(in.dimensions[d])] = ri[d];
        return at(arg(0), ravel(oi, arg(0).shape.dims));
      });
      return r;
    case opcode::reshape:
    case opcode::copy:
      fill([&](std::int64_t i) { return at(arg(0), i); });
      return r;
    case opcode::slice:
      fill([&](std::int64_t i) {
        auto ri = unravel(i, in.shape.dims);
        for (std::size_t d = 0; d < ri.size(); ++d)
          ri[d] = in.slice[d].start + ri[d] * in.slice[d].stride;
        return at(arg(0), ravel(ri, arg(0).shape.dims));
      });
      return r;
    case opcode::concatenate: {
      const auto cd = static_cast<std::size_t>(in.dimensions[0]);
      fill([&](std::int64_t i) {
        auto ri = unravel(i, in.shape.dims);
        for (std::size_t k = 0;; ++k) {
          const value& o = arg(k);
          if (ri[cd] < o.shape.dims[cd]) return at(o, ravel(ri, o.shape.dims));
          ri[cd] -= o.shape.dims[cd];
        }
      });
      return r;
    }
    case opcode::tuple:
      for (std::size_t k = 0; k < in.operands.size(); ++k) r.tuple.push_back(arg(k));
      return r;
    case opcode::get_tuple_element:
      return arg(0).tuple.at(static_cast<std::size_t>(in.tuple_index));
    case opcode::fusion:
    case opcode::call: {
      std::vector<value> callee_args;
      for (std::size_t k = 0; k < in.operands.size(); ++k) callee_args.push_back(arg(k));
      return evaluate(m, m.get(in.called_computation), callee_args);
    }
    default:
      if (is_elementwise_unary(in.opcode)) {
        fill([&](std::int64_t i) { return apply_unary(in.opcode, t, at(arg(0), i)); });
        return r;
      }
      if (is_elementwise_binary(in.opcode)) {
        fill([&](std::int64_t i) {
          return apply_binary(in.opcode, t, at(arg(0), i), at(arg(1), i));
        });
        return r;
      }
      throw std::logic_error("reference: no rule for " + std::string(to_string(in.opcode)));
  }
  (void)c;
}

inline value evaluate(const module& m, const computation& c, const std::vector<value>& args) {
  std::vector<value> vals;
  vals.reserve(c.instructions.size());
  for (const instruction& in : c.instructions)
    vals.push_back(evaluate_instruction(m, c, in, vals, args));
  return vals.at(c.root);
}

inline value evaluate(const module& m, const std::vector<value>& args) {
  return evaluate(m, m.entry_computation(), args);
}

}  // namespace fusedsl::hlo::reference
