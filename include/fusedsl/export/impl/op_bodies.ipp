#pragma once
// The op table's bodies (graph/ops.hpp) written out as HLO instructions: a math policy whose
// values are expressions over one instruction x, so an op that no single HLO opcode computes
// (relu, the GELUs, silu: the table's "composite" rows) is exported with the very formula the
// CPU kernels, the CUDA kernels and the interpreter compute, not a second copy of it. The body
// builds the expression; it is emitted afterwards, operands before their users and left to right,
// so the text does not depend on the order a compiler evaluates arguments in.
// Part of export.ipp (included there).
#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <utility>

#include "fusedsl/graph/ops.hpp"
#include "fusedsl/hlo/builder.hpp"

namespace fusedsl::hlo::detail {

struct body_expr;
using body_ref = std::shared_ptr<const body_expr>;

// One node of a body's expression: x itself, a constant (the body's splat), or an instruction
// over earlier nodes.
struct body_expr {
  enum class kind { x, constant, unary, binary, compare, select };
  kind k = kind::x;
  opcode op = opcode::add;  // unary, binary
  comparison_direction dir = comparison_direction::eq;
  double value = 0;  // constant
  body_ref a, b, c;  // operands (select: predicate, on true, on false)
};

// The policy's value type: a handle on a body_expr. Built from a float by the bodies' splat (the
// default, 0, only for graph::visit_op's result).
class body_value {
 public:
  body_value(float c = 0.0f) : e_(node(body_expr::kind::constant, opcode::add, double(c))) {}
  static body_value x() { return body_value(node(body_expr::kind::x, opcode::add)); }
  static body_value unary(opcode op, const body_value& a) {
    return body_value(node(body_expr::kind::unary, op, 0, {}, a.e_));
  }
  static body_value binary(opcode op, const body_value& a, const body_value& b) {
    return body_value(node(body_expr::kind::binary, op, 0, {}, a.e_, b.e_));
  }
  static body_value compare(comparison_direction d, const body_value& a, const body_value& b) {
    return body_value(node(body_expr::kind::compare, opcode::compare, 0, d, a.e_, b.e_));
  }
  static body_value select(const body_value& p, const body_value& a, const body_value& b) {
    return body_value(node(body_expr::kind::select, opcode::select, 0, {}, p.e_, a.e_, b.e_));
  }
  const body_expr& expr() const { return *e_; }

  friend body_value operator+(const body_value& a, const body_value& b) {
    return binary(opcode::add, a, b);
  }
  friend body_value operator-(const body_value& a, const body_value& b) {
    return binary(opcode::subtract, a, b);
  }
  friend body_value operator*(const body_value& a, const body_value& b) {
    return binary(opcode::multiply, a, b);
  }
  friend body_value operator/(const body_value& a, const body_value& b) {
    return binary(opcode::divide, a, b);
  }

 private:
  explicit body_value(body_ref e) : e_(std::move(e)) {}
  static body_ref node(body_expr::kind k, opcode op, double value = 0,
                       comparison_direction d = comparison_direction::eq, body_ref a = {},
                       body_ref b = {}, body_ref c = {}) {
    auto e = std::make_shared<body_expr>();
    e->k = k;
    e->op = op;
    e->dir = d;
    e->value = value;
    e->a = std::move(a);
    e->b = std::move(b);
    e->c = std::move(c);
    return e;
  }
  body_ref e_;
};

// The primitives the bodies use, one HLO instruction each (erfc, which HLO lacks, as 1 - erf).
// max and min are HLO's maximum and minimum, NaN-propagating as the table requires.
struct hlo_math {
  using V = body_value;
  static V neg(const V& x) { return V::unary(opcode::negate, x); }
  static V abs(const V& x) { return V::unary(opcode::abs, x); }
  static V exp(const V& x) { return V::unary(opcode::exponential, x); }
  static V log(const V& x) { return V::unary(opcode::log, x); }
  static V sqrt(const V& x) { return V::unary(opcode::sqrt, x); }
  static V tanh(const V& x) { return V::unary(opcode::tanh, x); }
  static V erf(const V& x) { return V::unary(opcode::erf, x); }
  static V erfc(const V& x) { return V(1.0f) - erf(x); }
  static V sin(const V& x) { return V::unary(opcode::sine, x); }
  static V cos(const V& x) { return V::unary(opcode::cosine, x); }
  static V floor(const V& x) { return V::unary(opcode::floor, x); }
  static V ceil(const V& x) { return V::unary(opcode::ceil, x); }
  static V round_even(const V& x) { return V::unary(opcode::round_nearest_even, x); }
  // HLO has no truncation: ceil below zero, floor elsewhere (NaN takes floor's, -0.5 ceil's -0).
  static V trunc(const V& x) { return V::select(lt(x, V(0.0f)), ceil(x), floor(x)); }
  static V max(const V& x, const V& y) { return V::binary(opcode::maximum, x, y); }
  static V min(const V& x, const V& y) { return V::binary(opcode::minimum, x, y); }
  static V pow(const V& x, const V& y) { return V::binary(opcode::power, x, y); }
  static V eq(const V& x, const V& y) { return V::compare(comparison_direction::eq, x, y); }
  static V ne(const V& x, const V& y) { return V::compare(comparison_direction::ne, x, y); }
  static V lt(const V& x, const V& y) { return V::compare(comparison_direction::lt, x, y); }
  static V le(const V& x, const V& y) { return V::compare(comparison_direction::le, x, y); }
  static V gt(const V& x, const V& y) { return V::compare(comparison_direction::gt, x, y); }
  static V ge(const V& x, const V& y) { return V::compare(comparison_direction::ge, x, y); }
  static V select(const V& p, const V& a, const V& b) { return V::select(p, a, b); }
  // A whole-op form (as a policy may give one): relu as XLA writes it, maximum(x, 0), the same
  // values as the body's select(x < 0, 0, x) with NaN-propagating maximum, in two instructions.
  static V relu(const V& x) { return max(x, V(0.0f)); }
};

// Unary op k's table body over x, as an expression: a table of the composite rows' bodies, the only
// ones instantiated (the other unary rows are one opcode each).
template <graph::op_kind K>
body_value composite_body() {
  return graph::op_traits<K>::template apply<hlo_math>(body_value::x());
}
using composite_body_fn = body_value (*)();
template <graph::op_kind K>
constexpr composite_body_fn composite_body_entry() {
  if constexpr (graph::is_unary(K) && graph::info_of(K).hlo == "composite")
    return &composite_body<K>;
  else
    return nullptr;
}
template <std::size_t... I>
constexpr std::array<composite_body_fn, sizeof...(I)> composite_bodies(std::index_sequence<I...>) {
  return {composite_body_entry<graph::op_kind(I)>()...};
}
inline body_value unary_body(graph::op_kind k) {
  static constexpr std::array<composite_body_fn, graph::op_count> bodies =
      composite_bodies(std::make_index_sequence<graph::op_count>{});
  const composite_body_fn f = std::size_t(k) < bodies.size() ? bodies[std::size_t(k)] : nullptr;
  if (f == nullptr)
    throw graph::graph_error("hlo::export: not a composite unary op: " +
                             std::string(graph::name_of(k)));
  return f();
}

// Emits a body's expression with x = `x` (of type t and dims `dims`); `full(v)` makes a constant
// of x's type and dims. Each node once, each constant value once.
template <class Full>
instruction_id emit_body(computation_builder& b, const body_expr& root, instruction_id x,
                         Full&& full) {
  std::map<const body_expr*, instruction_id> done;
  std::map<double, instruction_id> constants;
  auto emit = [&](auto& self, const body_expr& e) -> instruction_id {
    if (const auto it = done.find(&e); it != done.end()) return it->second;
    instruction_id r = x;
    switch (e.k) {
      case body_expr::kind::x:
        break;
      case body_expr::kind::constant: {
        const auto it = constants.find(e.value);
        r = it != constants.end() ? it->second
                                  : constants.emplace(e.value, full(e.value)).first->second;
        break;
      }
      case body_expr::kind::unary:
        r = b.add_unary(e.op, self(self, *e.a));
        break;
      case body_expr::kind::binary: {
        const instruction_id a = self(self, *e.a);
        r = b.add_binary(e.op, a, self(self, *e.b));
        break;
      }
      case body_expr::kind::compare: {
        const instruction_id a = self(self, *e.a);
        r = b.add_compare(a, self(self, *e.b), e.dir);
        break;
      }
      case body_expr::kind::select: {
        const instruction_id p = self(self, *e.a);
        const instruction_id a = self(self, *e.b);
        r = b.add_select(p, a, self(self, *e.c));
        break;
      }
    }
    done.emplace(&e, r);
    return r;
  };
  return emit(emit, root);
}

}  // namespace fusedsl::hlo::detail
