#pragma once
// Splitting a fusion group into the kLoop fusions XLA:CPU compiles.
// The bodies of fusedsl/export/xla_cpu_fusion.hpp's functions: included at the end of that header
// in header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/export/xla_cpu_fusion.hpp"

namespace fusedsl::hlo {

namespace detail {

struct xla_cpu_splitter {
  computation c;  // the group, transposes folded
  xla_cpu_options options;
  std::vector<std::vector<instruction_id>> users;  // one entry per operand slot
  std::vector<bool> live, materialize, output;

  xla_cpu_splitter(const computation& group, const xla_cpu_options& o) : c(group), options(o) {}

  const instruction& at(instruction_id i) const { return c.instructions[i]; }
  bool is_param(instruction_id i) const { return at(i).opcode == opcode::parameter; }
  // A variadic reduce: several results, always a part of its own.
  bool is_tuple_valued(instruction_id i) const {
    return at(i).shape.is_tuple() && at(i).opcode != opcode::tuple;
  }
  // A get-tuple-element of such a part: read from the entry, never inside a body.
  bool is_part_element(instruction_id i) const {
    return at(i).opcode == opcode::get_tuple_element && is_tuple_valued(at(i).operands[0]);
  }
  // What a body reads instead of computing: a parameter, another part, an element of a part.
  bool is_input(instruction_id i) const {
    return is_param(i) || materialize[i] || is_part_element(i);
  }

  static bool is_simplified_gather(const instruction& g, const hlo::shape& indices) {
    const gather_dimension_numbers& d = *g.gather;
    bool identity = true;
    for (std::size_t k = 0; k < d.start_index_map.size(); ++k)
      identity = identity && d.start_index_map[k] == std::int64_t(k);
    bool offsets = d.offset_dims.size() == g.slice_sizes.size();
    for (std::size_t k = 0; offsets && k < d.offset_dims.size(); ++k)
      offsets = d.offset_dims[k] == std::int64_t(k) + 1;
    return indices.rank() == 2 && d.index_vector_dim == 1 && identity &&
           d.collapsed_slice_dims.empty() && d.operand_batching_dims.empty() && offsets;
  }

  // Every gather in XLA's simplified form: indices reshaped to [N, k], the gather of whole
  // slices [N, slice_sizes...], reshaped to the original result. Takes gathers with trailing
  // offset dims, no batching dims, start_index_map 0..k-1 and the index vector last or implicit
  // (the form the exporter writes); throws ir_error on others.
  void simplify_gathers() {
    bool any = false;
    for (instruction_id i = 0; i < c.instructions.size(); ++i)
      any |= at(i).opcode == opcode::gather &&
             !is_simplified_gather(at(i), at(at(i).operands[1]).shape);
    if (!any) return;
    computation_builder b(c.name);
    std::vector<instruction_id> map(c.instructions.size(), 0);
    for (instruction_id i = 0; i < c.instructions.size(); ++i) {
      instruction in = at(i);
      for (instruction_id& o : in.operands) o = map[o];
      if (in.opcode != opcode::gather || is_simplified_gather(at(i), at(at(i).operands[1]).shape)) {
        map[i] = b.add(std::move(in));
        continue;
      }
      const gather_dimension_numbers& d = *in.gather;
      const hlo::shape& is = b.shape_of(in.operands[1]);
      const std::int64_t batch = is.rank() - (d.index_vector_dim == is.rank() ? 0 : 1);
      const std::int64_t k = std::int64_t(d.start_index_map.size());
      bool ok = d.operand_batching_dims.empty() && d.index_vector_dim >= is.rank() - 1;
      for (std::int64_t j = 0; ok && j < k; ++j) ok = d.start_index_map[std::size_t(j)] == j;
      for (std::size_t j = 0; ok && j < d.offset_dims.size(); ++j)
        ok = d.offset_dims[j] == batch + std::int64_t(j);
      if (!ok)
        throw ir_error("split_for_xla_cpu: gather " + in.name + " in " + c.name +
                       " is not in a form this rewrite takes (trailing offset_dims, no batching "
                       "dims, start_index_map 0..k-1, the index vector last)");
      const std::int64_t n = is.element_count() / std::max<std::int64_t>(k, 1);
      const instruction_id ids = b.add_reshape(in.operands[1], {n, k}, in.name + ".indices");
      gather_dimension_numbers simple;
      for (std::size_t j = 0; j < in.slice_sizes.size(); ++j)
        simple.offset_dims.push_back(std::int64_t(j) + 1);
      simple.start_index_map = d.start_index_map;
      simple.index_vector_dim = 1;
      const instruction_id g = b.add_gather(in.operands[0], ids, std::move(simple), in.slice_sizes,
                                            in.indices_are_sorted, in.name);
      map[i] = b.add_reshape(g, in.shape.dims, in.name + ".rows");
    }
    c = b.build(map[c.root]);
  }

  bool root_is_tuple() const { return c.root_instruction().opcode == opcode::tuple; }
  std::vector<instruction_id> outputs() const {
    const instruction& r = c.root_instruction();
    return r.opcode == opcode::tuple ? r.operands : std::vector<instruction_id>{c.root};
  }

  // dot(transpose(x), ...) -> dot(x, ...) with the dimensions mapped through the permutation,
  // when the transposed operand's free dimensions stay in order (the dot's shape is unchanged).
  static bool fold(instruction& dot, std::size_t side, const instruction& t) {
    dot_dimension_numbers d = *dot.dot;
    std::vector<std::int64_t>& batch = side == 0 ? d.lhs_batch : d.rhs_batch;
    std::vector<std::int64_t>& contracting = side == 0 ? d.lhs_contracting : d.rhs_contracting;
    const std::vector<std::int64_t>& perm = t.dimensions;  // result dim i = operand dim perm[i]
    std::vector<bool> bound(perm.size(), false);
    for (std::int64_t x : batch) bound[std::size_t(x)] = true;
    for (std::int64_t x : contracting) bound[std::size_t(x)] = true;
    std::int64_t last = -1;
    for (std::size_t i = 0; i < perm.size(); ++i) {
      if (bound[i]) continue;
      if (perm[i] < last) return false;
      last = perm[i];
    }
    for (std::int64_t& x : batch) x = perm[std::size_t(x)];
    for (std::int64_t& x : contracting) x = perm[std::size_t(x)];
    dot.dot = d;
    dot.operands[side] = t.operands[0];
    return true;
  }

  void fold_transposes() {
    for (instruction& in : c.instructions) {
      if (in.opcode != opcode::dot) continue;
      for (std::size_t side = 0; side < 2; ++side) {
        const instruction& t = c.instructions[in.operands[side]];
        if (t.opcode == opcode::transpose) {
          const instruction copy = t;
          fold(in, side, copy);
        }
      }
    }
  }

  void find_users() {
    const std::size_t n = c.instructions.size();
    live.assign(n, false);
    output.assign(n, false);
    users.assign(n, {});
    std::vector<instruction_id> stack;
    for (instruction_id o : outputs()) {
      output[o] = true;
      stack.push_back(o);
    }
    while (!stack.empty()) {
      const instruction_id i = stack.back();
      stack.pop_back();
      if (live[i]) continue;
      live[i] = true;
      for (instruction_id op : at(i).operands) stack.push_back(op);
    }
    for (instruction_id i = 0; i < n; ++i)
      if (live[i] && !(i == c.root && root_is_tuple()))
        for (instruction_id op : at(i).operands) users[op].push_back(i);
  }

  // Each element of i is read once on the way to the part that computes it (i's only use is an
  // elementwise op that is materialized or itself used once).
  bool used_once(instruction_id i, const std::vector<bool>& once) const {
    if (output[i] || users[i].size() != 1) return false;
    const instruction_id u = users[i][0];
    return is_elementwise(at(u).opcode) && (materialize[u] || once[u]);
  }

  void choose_parts() {
    const std::size_t n = c.instructions.size();
    materialize.assign(n, false);
    std::vector<bool> once(n, false);
    for (instruction_id i = n; i-- > 0;) {
      if (!live[i] || (i == c.root && root_is_tuple())) continue;
      const instruction& in = at(i);
      if (in.opcode == opcode::parameter || is_part_element(i)) continue;
      if (output[i] || is_tuple_valued(i)) materialize[i] = true;
      if (in.opcode == opcode::transpose) {
        materialize[i] = true;
        if (!is_input(in.operands[0])) materialize[in.operands[0]] = true;
      }
      if (in.opcode == opcode::dot)
        for (instruction_id op : in.operands)
          if (!is_input(op)) materialize[op] = true;
      // XLA:CPU emits a dynamic-update-slice root in place over its operand and reads the
      // update's layout (GetWorkDimensions): a part of its own, both read as parameters.
      if (in.opcode == opcode::dynamic_update_slice) {
        materialize[i] = true;
        for (std::size_t k = 0; k < 2; ++k)
          if (!is_input(in.operands[k])) materialize[in.operands[k]] = true;
      }
      once[i] = used_once(i, once);
      if ((in.opcode == opcode::dot || in.opcode == opcode::reduce) && !once[i])
        materialize[i] = true;
      if (in.opcode == opcode::dot && options.library_dots) materialize[i] = true;
    }
    // XLA:CPU's loop emitter looks for a "hero" from each root through elementwise ops and asks
    // of every reshape or transpose it meets whether it is a bitcast, which needs the layouts of
    // both sides: such a reshape must be a root reading a parameter; a concatenate it meets must
    // read parameters. Parts made here have roots of their own to check, hence the loop.
    for (bool changed = true; changed;) {
      changed = false;
      for (instruction_id m = n; m-- > 0;) {
        if (!materialize[m]) continue;
        std::vector<instruction_id> stack{m};
        std::vector<bool> seen(n, false);
        while (!stack.empty()) {
          const instruction_id i = stack.back();
          stack.pop_back();
          if (seen[i]) continue;
          seen[i] = true;
          const instruction& in = at(i);
          if (in.opcode == opcode::reshape || in.opcode == opcode::transpose) {
            // Below the root: a part of its own. As the root: it reads a parameter.
            const instruction_id split = i != m ? i : in.operands[0];
            if (!is_input(split)) materialize[split] = changed = true;
            continue;
          }
          if (in.opcode == opcode::concatenate) {
            // The hero of XLA:CPU's concatenate emitter, which reads its own and its operands'
            // layouts: below the root, a part of its own; as the root, it reads parameters.
            if (i != m) {
              if (!materialize[i]) materialize[i] = changed = true;
            } else {
              for (instruction_id op : in.operands)
                if (!is_input(op)) materialize[op] = changed = true;
            }
            continue;
          }
          if (!is_elementwise(in.opcode) || in.operands.size() > 3) continue;
          for (instruction_id op : in.operands)
            if (!is_input(op)) stack.push_back(op);
        }
      }
    }
  }

  // Copies instruction `in` (operands already mapped) into b; logistic is expanded.
  static instruction_id copy_into(computation_builder& b, instruction in) {
    if (in.opcode != opcode::logistic) return b.add(std::move(in));
    // XLA's logistic expander: 1 / (1 + exp(-x)).
    const instruction_id x = in.operands[0];
    const element_type t = in.shape.type;
    const instruction_id one =
        b.add_broadcast(b.add_constant(literal::scalar(t, 1.0)), in.shape.dims, {});
    const instruction_id e = b.add_unary(opcode::exponential, b.add_unary(opcode::negate, x));
    return b.add_binary(opcode::divide, one, b.add_binary(opcode::add, one, e));
  }

  // A pred parameter of a kLoop fusion, read as `convert(p) != 0` through s8. XLA 0.10.2's CPU
  // compiler aborts (shape.h "Check failed: has_layout()", in the verifier after a pass before
  // layout assignment) on a kLoop fusion whose select takes its predicate straight from a pred
  // parameter and its values from broadcasts: a mask made by one part and read by another, a
  // boolean input (tests/export/data/xla_cpu_limits/select_of_pred_parameter; the export case
  // pred_between_parts). The same value, one convert and one compare more.
  static instruction_id pred_read_as_s8(computation_builder& b, instruction_id p) {
    const std::vector<std::int64_t> dims = b.shape_of(p).dims;
    const instruction_id zero =
        b.add_broadcast(b.add_constant(literal::scalar(element_type::s8, 0.0)), dims, {});
    return b.add_compare(b.add_convert(p, element_type::s8), zero, comparison_direction::ne);
  }

  // What a body or the group reads at i: a group parameter, a part, or an element of a part.
  part_value value_at(instruction_id i, const std::vector<long>& part_of) const {
    if (is_param(i)) return {false, std::size_t(at(i).parameter_number), -1};
    if (is_part_element(i))
      return {true, std::size_t(part_of[at(i).operands[0]]), at(i).tuple_index};
    return {true, std::size_t(part_of[i]), -1};
  }

  fusion_split build() {
    simplify_gathers();
    fold_transposes();
    find_users();
    choose_parts();
    const std::size_t n = c.instructions.size();
    std::vector<long> part_of(n, -1);
    std::size_t count = 0;
    for (instruction_id i = 0; i < n; ++i) count += materialize[i];
    fusion_split s;
    for (instruction_id m = 0; m < n; ++m) {
      if (!materialize[m]) continue;
      // The body: m and what it reads, up to parameters and other parts.
      std::vector<bool> body(n, false), input(n, false);
      std::vector<instruction_id> stack{m};
      while (!stack.empty()) {
        const instruction_id i = stack.back();
        stack.pop_back();
        if (body[i] || input[i]) continue;
        if (i != m && is_input(i)) {
          input[i] = true;
          continue;
        }
        body[i] = true;
        for (instruction_id op : at(i).operands) stack.push_back(op);
      }
      const std::string name =
          count == 1 ? c.name : c.name + ".part" + std::to_string(s.parts.size());
      computation_builder b(name);
      fusion_part p;
      std::vector<instruction_id> map(n, 0);
      for (instruction_id i = 0; i < n; ++i) {
        if (!input[i]) continue;
        map[i] = b.add_parameter(hlo::shape::array(at(i).shape.type, at(i).shape.dims), at(i).name);
        if (at(i).shape.type == element_type::pred) map[i] = pred_read_as_s8(b, map[i]);
        p.operands.push_back(value_at(i, part_of));
      }
      for (instruction_id i = 0; i < n; ++i) {
        if (!body[i]) continue;
        instruction in = at(i);
        for (instruction_id& op : in.operands) op = map[op];
        map[i] = copy_into(b, std::move(in));
      }
      p.body = b.build(map[m]);
      p.library_dot = options.library_dots && at(m).opcode == opcode::dot;
      part_of[m] = long(s.parts.size());
      s.parts.push_back(std::move(p));
    }
    for (instruction_id o : outputs()) s.outputs.push_back(value_at(o, part_of));
    return s;
  }
};

}  // namespace detail

FUSEDSL_DECL fusion_split split_for_xla_cpu(const computation& group,
                                            const xla_cpu_options& options) {
  (void)group.root_instruction();
  return detail::xla_cpu_splitter(group, options).build();
}

}  // namespace fusedsl::hlo
