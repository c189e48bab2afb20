#pragma once
// Building IR: computation_builder appends instructions, infers their result shapes as XLA's
// shape inference would, and throws ir_error naming the op and the shapes when they don't fit.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusedsl/hlo/ir.hpp"

namespace fusedsl::hlo {

class computation_builder {
 public:
  // `name` is escaped into a valid identifier (escape.hpp).
  explicit computation_builder(std::string_view name) { c_.name = escape_identifier(name); }

  const std::string& name() const { return c_.name; }
  const instruction& get(instruction_id id) const { return c_.instructions.at(check(id, "get")); }
  const hlo::shape& shape_of(instruction_id id) const { return get(id).shape; }
  std::size_t size() const { return c_.instructions.size(); }

  // Parameters are numbered in the order they are added; `name` is escaped and kept verbatim in
  // metadata op_name when escaping changed it.
  instruction_id add_parameter(hlo::shape s, std::string_view name) {
    instruction in = make(opcode::parameter, std::move(s), {});
    in.parameter_number = parameter_count_++;
    return push(std::move(in), name, true);
  }

  instruction_id add_constant(hlo::literal value, std::string_view name = "constant") {
    instruction in = make(opcode::constant, value.shape, {});
    in.literal = std::move(value);
    return push(std::move(in), name);
  }

  instruction_id add_iota(hlo::shape s, std::int64_t iota_dimension,
                          std::string_view name = "iota") {
    if (s.is_tuple() || iota_dimension < 0 || iota_dimension >= s.rank())
      fail("iota", "dimension " + std::to_string(iota_dimension) + " out of range for " +
                       to_short_string(s));
    instruction in = make(opcode::iota, std::move(s), {});
    in.iota_dimension = iota_dimension;
    return push(std::move(in), name);
  }

  // Elementwise unary op (abs, negate, exponential, ..., copy). Use add_convert for convert.
  instruction_id add_unary(opcode op, instruction_id x, std::string_view name = {}) {
    const std::string what(to_string(op));
    if (!is_elementwise_unary(op) || op == opcode::convert)
      fail(what, "is not an elementwise unary op");
    const hlo::shape& s = array_operand(what, x);
    check_type(op, s.type);
    return push(make(op, plain(s), {x}), name.empty() ? to_string(op) : name);
  }

  // Elementwise binary op (add, ..., power, and/or/xor). Use add_compare for compare.
  instruction_id add_binary(opcode op, instruction_id a, instruction_id b,
                            std::string_view name = {}) {
    const std::string what(to_string(op));
    if (!is_elementwise_binary(op) || op == opcode::compare)
      fail(what, "is not an elementwise binary op");
    const hlo::shape& sa = array_operand(what, a);
    const hlo::shape& sb = array_operand(what, b);
    if (!sa.compatible(sb))
      fail(what,
           "operand shapes differ (" + to_short_string(sa) + " vs " + to_short_string(sb) + ")");
    check_type(op, sa.type);
    return push(make(op, plain(sa), {a, b}), name.empty() ? to_string(op) : name);
  }

  instruction_id add_compare(instruction_id a, instruction_id b, comparison_direction d,
                             std::string_view name = "compare") {
    const hlo::shape& sa = array_operand("compare", a);
    const hlo::shape& sb = array_operand("compare", b);
    if (!sa.compatible(sb))
      fail("compare",
           "operand shapes differ (" + to_short_string(sa) + " vs " + to_short_string(sb) + ")");
    instruction in = make(opcode::compare, hlo::shape::array(element_type::pred, sa.dims), {a, b});
    in.direction = d;
    return push(std::move(in), name);
  }

  // select(pred, on_true, on_false); pred has on_true's dims (or is a scalar).
  instruction_id add_select(instruction_id pred, instruction_id on_true, instruction_id on_false,
                            std::string_view name = "select") {
    const hlo::shape& sp = array_operand("select", pred);
    const hlo::shape& st = array_operand("select", on_true);
    const hlo::shape& sf = array_operand("select", on_false);
    if (sp.type != element_type::pred)
      fail("select", "predicate is " + to_short_string(sp) + ", not pred");
    if (!st.compatible(sf))
      fail("select",
           "branch shapes differ (" + to_short_string(st) + " vs " + to_short_string(sf) + ")");
    if (sp.rank() != 0 && sp.dims != st.dims)
      fail("select", "predicate " + to_short_string(sp) + " does not match " + to_short_string(st));
    return push(make(opcode::select, plain(st), {pred, on_true, on_false}), name);
  }

  // clamp(min, x, max); min and max have x's shape or are scalars.
  instruction_id add_clamp(instruction_id lo, instruction_id x, instruction_id hi,
                           std::string_view name = "clamp") {
    const hlo::shape& sx = array_operand("clamp", x);
    for (instruction_id b : {lo, hi}) {
      const hlo::shape& sb = array_operand("clamp", b);
      if (sb.type != sx.type || (sb.rank() != 0 && sb.dims != sx.dims))
        fail("clamp", "bound " + to_short_string(sb) + " does not match " + to_short_string(sx));
    }
    return push(make(opcode::clamp, plain(sx), {lo, x, hi}), name);
  }

  instruction_id add_convert(instruction_id x, element_type to, std::string_view name = "convert") {
    const hlo::shape& s = array_operand("convert", x);
    return push(make(opcode::convert, hlo::shape::array(to, s.dims), {x}), name);
  }

  // Result dims: batch dims, then lhs free dims, then rhs free dims (XLA's order).
  instruction_id add_dot(instruction_id lhs, instruction_id rhs, dot_dimension_numbers dn,
                         std::optional<element_type> result_type = std::nullopt,
                         std::string_view name = "dot") {
    const hlo::shape& a = array_operand("dot", lhs);
    const hlo::shape& b = array_operand("dot", rhs);
    auto shapes = " (lhs " + to_short_string(a) + ", rhs " + to_short_string(b) + ")";
    if (a.type != b.type) fail("dot", "operand element types differ" + shapes);
    if (dn.lhs_batch.size() != dn.rhs_batch.size())
      fail("dot", "lhs and rhs have different numbers of batch dimensions" + shapes);
    if (dn.lhs_contracting.size() != dn.rhs_contracting.size())
      fail("dot", "lhs and rhs have different numbers of contracting dimensions" + shapes);
    auto used_a = mark_dims("dot", a, {&dn.lhs_batch, &dn.lhs_contracting}, "lhs");
    auto used_b = mark_dims("dot", b, {&dn.rhs_batch, &dn.rhs_contracting}, "rhs");
    for (std::size_t i = 0; i < dn.lhs_batch.size(); ++i)
      if (a.dims[idx(dn.lhs_batch[i])] != b.dims[idx(dn.rhs_batch[i])])
        fail("dot", "batch dimensions differ" + shapes);
    for (std::size_t i = 0; i < dn.lhs_contracting.size(); ++i)
      if (a.dims[idx(dn.lhs_contracting[i])] != b.dims[idx(dn.rhs_contracting[i])])
        fail("dot", "contracting dimensions differ" + shapes);
    std::vector<std::int64_t> dims;
    for (std::int64_t d : dn.lhs_batch) dims.push_back(a.dims[idx(d)]);
    for (std::size_t d = 0; d < a.dims.size(); ++d)
      if (!used_a[d]) dims.push_back(a.dims[d]);
    for (std::size_t d = 0; d < b.dims.size(); ++d)
      if (!used_b[d]) dims.push_back(b.dims[d]);
    instruction in =
        make(opcode::dot, hlo::shape::array(result_type.value_or(a.type), dims), {lhs, rhs});
    in.dot = std::move(dn);
    return push(std::move(in), name);
  }

  // Operand dim i becomes result dim dimensions[i] (strictly increasing, as XLA requires).
  instruction_id add_broadcast(instruction_id x, std::vector<std::int64_t> result_dims,
                               std::vector<std::int64_t> dimensions,
                               std::string_view name = "broadcast") {
    const hlo::shape& s = array_operand("broadcast", x);
    if (dimensions.size() != s.dims.size())
      fail("broadcast", "operand " + to_short_string(s) + " needs " +
                            std::to_string(s.dims.size()) + " dimensions, got " +
                            std::to_string(dimensions.size()));
    for (std::size_t i = 0; i < dimensions.size(); ++i) {
      std::int64_t d = dimensions[i];
      if (d < 0 || d >= static_cast<std::int64_t>(result_dims.size()) ||
          (i > 0 && d <= dimensions[i - 1]))
        fail("broadcast", "dimensions must be increasing and within the result rank");
      if (result_dims[idx(d)] != s.dims[i])
        fail("broadcast", "operand " + to_short_string(s) + " dim " + std::to_string(i) +
                              " does not match result dim " + std::to_string(d));
    }
    instruction in =
        make(opcode::broadcast, hlo::shape::array(s.type, std::move(result_dims)), {x});
    in.dimensions = std::move(dimensions);
    return push(std::move(in), name);
  }

  // Reduces `dimensions` of x with the scalar computation `to_apply` ((T, T) -> T), from init.
  instruction_id add_reduce(instruction_id x, instruction_id init,
                            std::vector<std::int64_t> dimensions, const computation& to_apply,
                            std::string_view name = "reduce") {
    return add_reduce(std::vector<instruction_id>{x}, std::vector<instruction_id>{init},
                      std::move(dimensions), to_apply, name);
  }

  // The variadic reduce: inputs x_0..x_{n-1} of equal dims reduced together from scalar inits;
  // to_apply takes (acc_0..acc_{n-1}, x_0..x_{n-1}) and returns the n new accumulators (a tuple
  // for n > 1). The result is a tuple of n arrays for n > 1 (jax's argmax: value and index).
  instruction_id add_reduce(std::vector<instruction_id> xs, std::vector<instruction_id> inits,
                            std::vector<std::int64_t> dimensions, const computation& to_apply,
                            std::string_view name = "reduce") {
    if (xs.empty() || xs.size() != inits.size())
      fail("reduce", "needs as many init values as inputs (got " + std::to_string(xs.size()) +
                         " inputs, " + std::to_string(inits.size()) + " inits)");
    const hlo::shape s0 = array_operand("reduce", xs[0]);
    std::vector<element_type> types;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      const hlo::shape& s = array_operand("reduce", xs[k]);
      const hlo::shape& si = array_operand("reduce", inits[k]);
      if (s.dims != s0.dims)
        fail("reduce",
             "inputs differ in dims (" + to_short_string(s0) + " vs " + to_short_string(s) + ")");
      if (si.rank() != 0 || si.type != s.type)
        fail("reduce", "init value " + to_short_string(si) + " must be a " +
                           std::string(to_string(s.type)) + " scalar");
      types.push_back(s.type);
    }
    check_reducer(to_apply, types);
    std::vector<bool> reduced(s0.dims.size(), false);
    for (std::int64_t d : dimensions) {
      if (d < 0 || d >= s0.rank() || reduced[idx(d)])
        fail("reduce", "bad dimension " + std::to_string(d) + " for " + to_short_string(s0));
      reduced[idx(d)] = true;
    }
    std::vector<std::int64_t> dims;
    for (std::size_t d = 0; d < s0.dims.size(); ++d)
      if (!reduced[d]) dims.push_back(s0.dims[d]);
    std::vector<hlo::shape> results;
    for (element_type t : types) results.push_back(hlo::shape::array(t, dims));
    hlo::shape r = results.size() == 1 ? results[0] : hlo::shape::make_tuple(std::move(results));
    std::vector<instruction_id> operands = std::move(xs);
    operands.insert(operands.end(), inits.begin(), inits.end());
    instruction in = make(opcode::reduce, std::move(r), std::move(operands));
    in.dimensions = std::move(dimensions);
    in.called_computation = to_apply.name;
    return push(std::move(in), name);
  }

  // Result dim i is operand dim permutation[i].
  instruction_id add_transpose(instruction_id x, std::vector<std::int64_t> permutation,
                               std::string_view name = "transpose") {
    const hlo::shape& s = array_operand("transpose", x);
    if (permutation.size() != s.dims.size())
      fail("transpose", "permutation rank differs from " + to_short_string(s));
    std::vector<bool> seen(s.dims.size(), false);
    std::vector<std::int64_t> dims;
    for (std::int64_t p : permutation) {
      if (p < 0 || p >= s.rank() || seen[idx(p)])
        fail("transpose", "not a permutation of " + to_short_string(s));
      seen[idx(p)] = true;
      dims.push_back(s.dims[idx(p)]);
    }
    instruction in = make(opcode::transpose, hlo::shape::array(s.type, dims), {x});
    in.dimensions = std::move(permutation);
    return push(std::move(in), name);
  }

  instruction_id add_reshape(instruction_id x, std::vector<std::int64_t> dims,
                             std::string_view name = "reshape") {
    const hlo::shape& s = array_operand("reshape", x);
    hlo::shape r = hlo::shape::array(s.type, std::move(dims));
    if (r.element_count() != s.element_count())
      fail("reshape",
           "element counts differ (" + to_short_string(s) + " to " + to_short_string(r) + ")");
    return push(make(opcode::reshape, std::move(r), {x}), name);
  }

  instruction_id add_slice(instruction_id x, std::vector<slice_dim> ranges,
                           std::string_view name = "slice") {
    const hlo::shape& s = array_operand("slice", x);
    if (ranges.size() != s.dims.size())
      fail("slice", "needs one range per dimension of " + to_short_string(s));
    std::vector<std::int64_t> dims;
    for (std::size_t d = 0; d < ranges.size(); ++d) {
      const slice_dim& r = ranges[d];
      if (r.stride <= 0 || r.start < 0 || r.start > r.limit || r.limit > s.dims[d])
        fail("slice", "range [" + std::to_string(r.start) + ":" + std::to_string(r.limit) + ":" +
                          std::to_string(r.stride) + "] invalid for dim " + std::to_string(d) +
                          " of " + to_short_string(s));
      dims.push_back(r.limit == r.start ? 0 : (r.limit - r.start - 1) / r.stride + 1);
    }
    instruction in = make(opcode::slice, hlo::shape::array(s.type, dims), {x});
    in.slice = std::move(ranges);
    return push(std::move(in), name);
  }

  instruction_id add_concatenate(std::vector<instruction_id> xs, std::int64_t dimension,
                                 std::string_view name = "concatenate") {
    if (xs.empty()) fail("concatenate", "needs at least one operand");
    hlo::shape r = plain(array_operand("concatenate", xs[0]));
    if (dimension < 0 || dimension >= r.rank())
      fail("concatenate", "dimension out of range for " + to_short_string(r));
    for (std::size_t i = 1; i < xs.size(); ++i) {
      const hlo::shape& s = array_operand("concatenate", xs[i]);
      bool ok = s.type == r.type && s.rank() == r.rank();
      for (std::size_t d = 0; ok && d < s.dims.size(); ++d)
        ok = static_cast<std::int64_t>(d) == dimension || s.dims[d] == r.dims[d];
      if (!ok)
        fail("concatenate", "operand " + to_short_string(s) + " does not fit " +
                                to_short_string(array_operand("concatenate", xs[0])));
      r.dims[idx(dimension)] += s.dims[idx(dimension)];
    }
    instruction in = make(opcode::concatenate, std::move(r), std::move(xs));
    in.dimensions = {dimension};
    return push(std::move(in), name);
  }

  // XLA's gather (operation semantics, "Gather"): for each index vector of `indices` (along
  // index_vector_dim; == rank means each element is a one-entry vector), a slice of slice_sizes
  // starting there (start_index_map says which operand dims the entries index, starts clamped
  // so the slice fits). Result dims: offset_dims hold the slice dims that are not collapsed or
  // batching, in order; the others are the indices' batch dims, in order.
  instruction_id add_gather(instruction_id operand, instruction_id indices,
                            gather_dimension_numbers dn, std::vector<std::int64_t> slice_sizes,
                            bool indices_are_sorted = false, std::string_view name = "gather") {
    const hlo::shape& s = array_operand("gather", operand);
    const hlo::shape& si = array_operand("gather", indices);
    hlo::shape r = gather_shape(s, si, dn, slice_sizes);
    instruction in = make(opcode::gather, std::move(r), {operand, indices});
    in.gather = std::move(dn);
    in.slice_sizes = std::move(slice_sizes);
    in.indices_are_sorted = indices_are_sorted;
    return push(std::move(in), name);
  }

  // x[starts[d] : starts[d] + sizes[d]] in every dim d; starts are integer scalars, clamped so
  // the slice fits (XLA's dynamic-slice).
  instruction_id add_dynamic_slice(instruction_id x, std::vector<instruction_id> starts,
                                   std::vector<std::int64_t> sizes,
                                   std::string_view name = "dynamic-slice") {
    const hlo::shape& s = array_operand("dynamic-slice", x);
    check_start_indices("dynamic-slice", s, starts);
    if (sizes.size() != s.dims.size())
      fail("dynamic-slice", "needs one size per dimension of " + to_short_string(s) + ", got " +
                                std::to_string(sizes.size()));
    for (std::size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] < 0 || sizes[d] > s.dims[d])
        fail("dynamic-slice", "size " + std::to_string(sizes[d]) + " out of range for dim " +
                                  std::to_string(d) + " of " + to_short_string(s));
    std::vector<instruction_id> ops{x};
    ops.insert(ops.end(), starts.begin(), starts.end());
    instruction in = make(opcode::dynamic_slice, hlo::shape::array(s.type, sizes), std::move(ops));
    in.dynamic_slice_sizes = std::move(sizes);
    return push(std::move(in), name);
  }

  // x with `update` written at starts (clamped so it fits), as XLA's dynamic-update-slice.
  instruction_id add_dynamic_update_slice(instruction_id x, instruction_id update,
                                          std::vector<instruction_id> starts,
                                          std::string_view name = "dynamic-update-slice") {
    const hlo::shape& s = array_operand("dynamic-update-slice", x);
    const hlo::shape& su = array_operand("dynamic-update-slice", update);
    bool fits = su.type == s.type && su.rank() == s.rank();
    for (std::size_t d = 0; fits && d < s.dims.size(); ++d) fits = su.dims[d] <= s.dims[d];
    if (!fits)
      fail("dynamic-update-slice",
           "update " + to_short_string(su) + " does not fit " + to_short_string(s));
    check_start_indices("dynamic-update-slice", s, starts);
    std::vector<instruction_id> ops{x, update};
    ops.insert(ops.end(), starts.begin(), starts.end());
    return push(make(opcode::dynamic_update_slice, plain(s), std::move(ops)), name);
  }

  instruction_id add_tuple(std::vector<instruction_id> xs, std::string_view name = "tuple") {
    std::vector<hlo::shape> es;
    for (instruction_id x : xs) es.push_back(get(x).shape);
    return push(make(opcode::tuple, hlo::shape::make_tuple(std::move(es)), std::move(xs)), name);
  }

  instruction_id add_get_tuple_element(instruction_id x, std::int64_t index,
                                       std::string_view name = "get-tuple-element") {
    const hlo::shape& s = get(x).shape;
    if (!s.is_tuple() || index < 0 || index >= static_cast<std::int64_t>(s.elements.size()))
      fail("get-tuple-element",
           "index " + std::to_string(index) + " out of range for " + to_short_string(s));
    instruction in = make(opcode::get_tuple_element, s.elements[idx(index)], {x});
    in.tuple_index = index;
    return push(std::move(in), name);
  }

  // fusion/call: operand shapes must match the callee's parameters; the result is its root's shape.
  instruction_id add_fusion(std::vector<instruction_id> xs, const computation& callee,
                            fusion_kind kind, std::string_view name = "fusion") {
    instruction in = make_call(opcode::fusion, std::move(xs), callee);
    in.fusion_kind = kind;
    return push(std::move(in), name);
  }
  instruction_id add_call(std::vector<instruction_id> xs, const computation& callee,
                          std::string_view name = "call") {
    return push(make_call(opcode::call, std::move(xs), callee), name);
  }

  // Appends an instruction as given (no shape inference); operands are checked and the name
  // is escaped and made unique. For ops the builder has no function for.
  instruction_id add(instruction in) {
    for (instruction_id op : in.operands) check(op, std::string(to_string(in.opcode)));
    std::string name = in.name.empty() ? std::string(to_string(in.opcode)) : in.name;
    return push(std::move(in), name);
  }

  // Appends an instruction read from text (parser.hpp): its result shape is re-inferred from its
  // operands and attributes (called computations are looked up in `m`) and must agree with the
  // stated one; the instruction is then stored exactly as given (name, layout, attributes).
  instruction_id append_checked(instruction in, const module& m) {
    const std::string what(to_string(in.opcode));
    auto need = [&](std::size_t n) {
      if (in.operands.size() != n)
        fail(what, "takes " + std::to_string(n) + " operand" + (n == 1 ? "" : "s") + ", got " +
                       std::to_string(in.operands.size()));
    };
    auto callee = [&]() -> const computation& {
      if (in.called_computation.empty()) fail(what, "needs a called computation");
      return m.get(in.called_computation);
    };
    const auto& ops = in.operands;
    const hlo::shape& s = in.shape;
    std::size_t before = c_.instructions.size();
    std::int64_t params_before = parameter_count_;
    switch (in.opcode) {
      case opcode::parameter:
        need(0);
        if (in.parameter_number < 0) fail(what, "needs a parameter number");
        break;
      case opcode::constant:
        need(0);
        if (!in.literal) fail(what, "needs a value");
        if (!in.literal->shape.compatible(s)) fail(what, "value does not match the shape");
        break;
      case opcode::iota:
        need(0);
        add_iota(s, in.iota_dimension);
        break;
      case opcode::convert:
        need(1);
        add_convert(ops[0], s.is_tuple() ? element_type::f32 : s.type);
        break;
      case opcode::compare:
        need(2);
        if (!in.direction) fail(what, "needs direction=");
        add_compare(ops[0], ops[1], *in.direction);
        break;
      case opcode::select:
        need(3);
        add_select(ops[0], ops[1], ops[2]);
        break;
      case opcode::clamp:
        need(3);
        add_clamp(ops[0], ops[1], ops[2]);
        break;
      case opcode::dot:
        need(2);
        add_dot(ops[0], ops[1], in.dot.value_or(dot_dimension_numbers{}),
                s.is_tuple() ? std::nullopt : std::optional<element_type>(s.type));
        break;
      case opcode::broadcast:
        need(1);
        add_broadcast(ops[0], s.dims, in.dimensions);
        break;
      case opcode::reduce: {
        if (ops.size() < 2 || ops.size() % 2 != 0)
          fail(what, "takes inputs and as many init values, got " + std::to_string(ops.size()) +
                         " operands");
        const auto half = static_cast<std::ptrdiff_t>(ops.size() / 2);
        add_reduce(std::vector<instruction_id>(ops.begin(), ops.begin() + half),
                   std::vector<instruction_id>(ops.begin() + half, ops.end()), in.dimensions,
                   callee());
        break;
      }
      case opcode::gather:
        need(2);
        if (!in.gather)
          fail(what,
               "needs offset_dims=, collapsed_slice_dims=, start_index_map=, "
               "index_vector_dim= and slice_sizes=");
        add_gather(ops[0], ops[1], *in.gather, in.slice_sizes, in.indices_are_sorted);
        break;
      case opcode::dynamic_slice:
        if (ops.empty()) fail(what, "needs an operand");
        add_dynamic_slice(ops[0], std::vector<instruction_id>(ops.begin() + 1, ops.end()),
                          in.dynamic_slice_sizes);
        break;
      case opcode::dynamic_update_slice:
        if (ops.size() < 2) fail(what, "needs an operand and an update");
        add_dynamic_update_slice(ops[0], ops[1],
                                 std::vector<instruction_id>(ops.begin() + 2, ops.end()));
        break;
      case opcode::transpose:
        need(1);
        add_transpose(ops[0], in.dimensions);
        break;
      case opcode::reshape:
        need(1);
        add_reshape(ops[0], s.dims);
        break;
      case opcode::slice:
        need(1);
        add_slice(ops[0], in.slice);
        break;
      case opcode::concatenate:
        if (in.dimensions.size() != 1) fail(what, "needs dimensions={d}");
        add_concatenate(ops, in.dimensions[0]);
        break;
      case opcode::tuple:
        add_tuple(ops);
        break;
      case opcode::get_tuple_element:
        need(1);
        add_get_tuple_element(ops[0], in.tuple_index);
        break;
      case opcode::fusion:
        if (!in.fusion_kind) fail(what, "needs kind=");
        add_fusion(ops, callee(), *in.fusion_kind);
        break;
      case opcode::call:
        add_call(ops, callee());
        break;
      default:
        if (is_elementwise_unary(in.opcode)) {
          need(1);
          add_unary(in.opcode, ops[0]);
        } else if (is_elementwise_binary(in.opcode)) {
          need(2);
          add_binary(in.opcode, ops[0], ops[1]);
        } else {
          fail(what, "has no shape rule");
        }
    }
    if (c_.instructions.size() > before) {
      const hlo::shape inferred = c_.instructions.back().shape;
      names_.erase(c_.instructions.back().name);
      c_.instructions.pop_back();
      if (!inferred.compatible(s))
        fail(what,
             "result shape " + to_short_string(s) + " should be " + to_short_string(inferred));
    }
    parameter_count_ = std::max(params_before, in.parameter_number + 1);
    if (!is_identifier_token(in.name)) fail(what, "name '" + in.name + "' is not an identifier");
    if (names_.count(in.name)) fail(what, "duplicate name " + in.name);
    names_.insert(in.name);
    c_.instructions.push_back(std::move(in));
    return c_.instructions.size() - 1;
  }

  void set_sharding(instruction_id id, hlo::sharding s) {
    c_.instructions.at(check(id, "set_sharding")).sharding = std::move(s);
  }
  void set_op_name(instruction_id id, std::string op_name) {
    c_.instructions.at(check(id, "set_op_name")).op_name = to_valid_utf8(op_name);
  }

  // Finishes the computation; the root defaults to the last instruction.
  computation build(std::optional<instruction_id> root = std::nullopt) const {
    if (c_.instructions.empty()) throw ir_error("computation " + c_.name + ": no instructions");
    computation c = c_;
    c.root = root ? check(*root, "build") : c.instructions.size() - 1;
    return c;
  }

 private:
  static std::size_t idx(std::int64_t d) { return static_cast<std::size_t>(d); }

  [[noreturn]] void fail(const std::string& op, const std::string& what) const {
    throw ir_error(op + " in computation " + c_.name + ": " + what);
  }
  instruction_id check(instruction_id id, const std::string& op) const {
    if (id >= c_.instructions.size())
      fail(op, "operand " + std::to_string(id) + " does not exist (" +
                   std::to_string(c_.instructions.size()) + " instructions so far)");
    return id;
  }
  const hlo::shape& array_operand(const std::string& op, instruction_id id) const {
    const hlo::shape& s = c_.instructions.at(check(id, op)).shape;
    if (s.is_tuple()) fail(op, "operand " + c_.instructions[id].name + " is a tuple");
    return s;
  }
  // The shape without its layout: results get XLA's default layout.
  static hlo::shape plain(const hlo::shape& s) { return hlo::shape::array(s.type, s.dims); }

  void check_type(opcode op, element_type t) const {
    if (is_floating_only(op) && !is_floating(t))
      fail(std::string(to_string(op)),
           "needs a floating-point operand, got " + std::string(to_string(t)));
    if (is_logical(op) && is_floating(t))
      fail(std::string(to_string(op)),
           "needs a pred or integer operand, got " + std::string(to_string(t)));
  }

  std::vector<bool> mark_dims(const std::string& op, const hlo::shape& s,
                              std::initializer_list<const std::vector<std::int64_t>*> lists,
                              const char* side) const {
    std::vector<bool> used(s.dims.size(), false);
    for (const auto* l : lists)
      for (std::int64_t d : *l) {
        if (d < 0 || d >= s.rank() || used[idx(d)])
          fail(op, std::string(side) + " dimension " + std::to_string(d) +
                       " invalid or repeated for " + to_short_string(s));
        used[idx(d)] = true;
      }
    return used;
  }

  // to_apply of a reduce over inputs of `types`: (T_0..T_{n-1}, T_0..T_{n-1}) -> T_0 for n == 1,
  // -> (T_0, ..., T_{n-1}) otherwise, all scalars.
  void check_reducer(const computation& f, const std::vector<element_type>& types) const {
    auto ps = f.parameters();
    const std::size_t n = types.size();
    std::string want = "(";
    for (std::size_t k = 0; k < 2 * n; ++k)
      want += (k ? ", " : "") + std::string(to_string(types[k % n])) + "[]";
    want += ") -> ";
    std::vector<hlo::shape> out;
    for (element_type t : types) out.push_back(hlo::shape::scalar(t));
    const hlo::shape result = n == 1 ? out[0] : hlo::shape::make_tuple(out);
    want += to_short_string(result);
    bool ok = ps.size() == 2 * n && f.root_instruction().shape.compatible(result);
    for (std::size_t k = 0; ok && k < 2 * n; ++k)
      ok = f.instructions[ps[k]].shape.compatible(hlo::shape::scalar(types[k % n]));
    if (!ok) fail("reduce", "to_apply " + f.name + " must be " + want);
  }

  // Start indices of dynamic-slice / dynamic-update-slice: one integer scalar per dim of s,
  // all of one type.
  void check_start_indices(const std::string& op, const hlo::shape& s,
                           const std::vector<instruction_id>& starts) const {
    if (starts.size() != s.dims.size())
      fail(op, "needs one start index per dimension of " + to_short_string(s) + ", got " +
                   std::to_string(starts.size()));
    for (instruction_id i : starts) {
      const hlo::shape& st = array_operand(op, i);
      if (st.rank() != 0 || !is_integral(st.type) || st.type != array_operand(op, starts[0]).type)
        fail(op, "start index " + c_.instructions[i].name + " is " + to_short_string(st) +
                     ", not an integer scalar of the first start's type");
    }
  }

  // Result shape of a gather; every inconsistency in the dimension numbers is an error.
  hlo::shape gather_shape(const hlo::shape& s, const hlo::shape& si,
                          const gather_dimension_numbers& dn,
                          const std::vector<std::int64_t>& slice_sizes) const {
    const std::string shapes =
        " (operand " + to_short_string(s) + ", indices " + to_short_string(si) + ")";
    auto bad = [&](const std::string& why) { fail("gather", why + shapes); };
    if (!is_integral(si.type)) bad("indices must be integers");
    if (dn.index_vector_dim < 0 || dn.index_vector_dim > si.rank())
      bad("index_vector_dim " + std::to_string(dn.index_vector_dim) + " out of range");
    const std::int64_t vec =
        dn.index_vector_dim == si.rank() ? 1 : si.dims[idx(dn.index_vector_dim)];
    if (static_cast<std::int64_t>(dn.start_index_map.size()) != vec)
      bad("start_index_map has " + std::to_string(dn.start_index_map.size()) +
          " entries, the index vectors " + std::to_string(vec));
    if (static_cast<std::int64_t>(slice_sizes.size()) != s.rank())
      bad("slice_sizes needs one size per operand dimension");
    for (std::size_t d = 0; d < slice_sizes.size(); ++d)
      if (slice_sizes[d] < 0 || slice_sizes[d] > s.dims[d])
        bad("slice size " + std::to_string(slice_sizes[d]) + " out of range for dim " +
            std::to_string(d));
    auto check_dims = [&](const std::vector<std::int64_t>& v, std::int64_t rank, const char* what,
                          bool sorted) {
      std::vector<bool> seen(idx(rank), false);
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] < 0 || v[i] >= rank || seen[idx(v[i])])
          bad(std::string(what) + " has an invalid or repeated dimension");
        if (sorted && i > 0 && v[i] < v[i - 1]) bad(std::string(what) + " must be sorted");
        seen[idx(v[i])] = true;
      }
      return seen;
    };
    check_dims(dn.start_index_map, s.rank(), "start_index_map", false);
    const auto collapsed =
        check_dims(dn.collapsed_slice_dims, s.rank(), "collapsed_slice_dims", true);
    const auto batching =
        check_dims(dn.operand_batching_dims, s.rank(), "operand_batching_dims", true);
    for (std::size_t d = 0; d < collapsed.size(); ++d) {
      if (collapsed[d] && batching[d])
        bad("dimension " + std::to_string(d) + " is both collapsed and batching");
      // Size 1 exactly: a collapsed dim of size 0 would leave each output element an empty slice
      // to read from (its start clamped to the end of the dim).
      if ((collapsed[d] || batching[d]) && slice_sizes[d] != 1)
        bad("collapsed and batching dimensions need slice size 1 (dim " + std::to_string(d) +
            " has " + std::to_string(slice_sizes[d]) + ")");
    }
    for (std::int64_t d : dn.start_index_map)
      if (batching[idx(d)]) bad("start_index_map names a batching dimension");
    if (dn.start_indices_batching_dims.size() != dn.operand_batching_dims.size())
      bad("operand_batching_dims and start_indices_batching_dims differ in length");
    const auto index_batch =
        check_dims(dn.start_indices_batching_dims, si.rank(), "start_indices_batching_dims", false);
    if (dn.index_vector_dim < si.rank() && index_batch[idx(dn.index_vector_dim)])
      bad("start_indices_batching_dims names index_vector_dim");
    for (std::size_t k = 0; k < dn.operand_batching_dims.size(); ++k)
      if (s.dims[idx(dn.operand_batching_dims[k])] !=
          si.dims[idx(dn.start_indices_batching_dims[k])])
        bad("a batching dimension differs in size between operand and indices");
    std::vector<std::int64_t> offset_sizes, batch_sizes;
    for (std::size_t d = 0; d < slice_sizes.size(); ++d)
      if (!collapsed[d] && !batching[d]) offset_sizes.push_back(slice_sizes[d]);
    for (std::int64_t d = 0; d < si.rank(); ++d)
      if (d != dn.index_vector_dim) batch_sizes.push_back(si.dims[idx(d)]);
    if (dn.offset_dims.size() != offset_sizes.size())
      bad("offset_dims has " + std::to_string(dn.offset_dims.size()) + " dims, the slice " +
          std::to_string(offset_sizes.size()) + " that are not collapsed or batching");
    const std::int64_t rank = static_cast<std::int64_t>(offset_sizes.size() + batch_sizes.size());
    if (rank > max_rank) bad("the result has more than " + std::to_string(max_rank) + " dims");
    const auto offset = check_dims(dn.offset_dims, rank, "offset_dims", true);
    std::vector<std::int64_t> dims;
    std::size_t o = 0, b = 0;
    for (std::int64_t d = 0; d < rank; ++d)
      dims.push_back(offset[idx(d)] ? offset_sizes[o++] : batch_sizes[b++]);
    return hlo::shape::array(s.type, std::move(dims));
  }

  instruction make_call(opcode op, std::vector<instruction_id> xs,
                        const computation& callee) const {
    const std::string what(to_string(op));
    auto ps = callee.parameters();
    if (ps.size() != xs.size())
      fail(what, callee.name + " takes " + std::to_string(ps.size()) + " operands, got " +
                     std::to_string(xs.size()));
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const hlo::shape& s = get(xs[i]).shape;
      if (!s.compatible(callee.instructions[ps[i]].shape))
        fail(what, "operand " + std::to_string(i) + " " + to_short_string(s) + " does not match " +
                       callee.name + " parameter " +
                       to_short_string(callee.instructions[ps[i]].shape));
    }
    instruction in = make(op, callee.root_instruction().shape, std::move(xs));
    in.called_computation = callee.name;
    return in;
  }

  static instruction make(opcode op, hlo::shape s, std::vector<instruction_id> operands) {
    instruction in;
    in.opcode = op;
    in.shape = std::move(s);
    in.operands = std::move(operands);
    return in;
  }

  instruction_id push(instruction in, std::string_view name, bool keep_original = false) {
    std::string base = escape_identifier(name);
    std::string unique = base;
    if (names_.count(unique)) {
      int& n = next_suffix_[base];  // resume where the last search for this base stopped: O(1)
      do unique = base + "." + std::to_string(++n);
      while (names_.count(unique));
    }
    if (keep_original && unique != name && in.op_name.empty()) in.op_name = to_valid_utf8(name);
    names_.insert(unique);
    in.name = std::move(unique);
    c_.instructions.push_back(std::move(in));
    return c_.instructions.size() - 1;
  }

  computation c_;
  std::set<std::string> names_;
  std::map<std::string, int> next_suffix_;
  std::int64_t parameter_count_ = 0;
};

// A scalar computation (T a, T b) -> op(a, b), e.g. the to_apply of a sum or max reduction.
inline computation make_scalar_computation(std::string_view name, opcode op, element_type t) {
  computation_builder b(name);
  auto x = b.add_parameter(hlo::shape::scalar(t), "lhs");
  auto y = b.add_parameter(hlo::shape::scalar(t), "rhs");
  b.add_binary(op, x, y);
  return b.build();
}

}  // namespace fusedsl::hlo
