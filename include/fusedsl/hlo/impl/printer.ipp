#pragma once
// HLO text printer.
// The bodies of fusedsl/hlo/printer.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/hlo/printer.hpp"

namespace fusedsl::hlo {

namespace detail {

inline void append_ints(std::string& out, const std::vector<std::int64_t>& v, char sep = ',') {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += std::to_string(v[i]);
  }
}
inline std::string braced(const std::vector<std::int64_t>& v) {
  std::string s = "{";
  append_ints(s, v);
  return s + "}";
}

// Built by appending: GCC 12 warns falsely (-Wrestrict) on `"%" + std::string&&` at -O2.
inline std::string name_ref(const std::string& name) {
  std::string out(1, '%');
  out += escape_identifier(name);
  return out;
}

}  // namespace detail

FUSEDSL_DECL std::string to_text(const shape& s) {
  std::string out;
  if (s.is_tuple()) {
    out += '(';
    for (std::size_t i = 0; i < s.elements.size(); ++i) {
      if (i) out += ", ";
      out += to_text(s.elements[i]);
    }
    return out + ')';
  }
  out += to_string(s.type);
  out += '[';
  detail::append_ints(out, s.dims);
  out += ']';
  if (s.rank() > 0) out += detail::braced(s.layout());
  return out;
}

FUSEDSL_DECL std::string literal_value_text(element_type t, double v) {
  if (t == element_type::pred) return v != 0.0 ? "true" : "false";
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  std::to_chars_result r;
  if (t == element_type::f64)
    r = std::to_chars(buf, buf + sizeof buf, v);
  else
    r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::string(buf, r.ptr);
}

FUSEDSL_DECL std::string to_text(const literal& l) {
  const auto& dims = l.shape.dims;
  auto value = [&](std::size_t i) {
    return is_integral(l.shape.type) ? std::to_string(l.ints.at(i))
                                     : literal_value_text(l.shape.type, l.values.at(i));
  };
  if (dims.empty()) return value(0);
  std::string out;
  std::size_t next = 0;
  auto rec = [&](auto& self, std::size_t d) -> void {
    out += '{';
    bool inner = d + 1 == dims.size();
    if (!inner) out += ' ';
    for (std::int64_t i = 0; i < dims[d]; ++i) {
      if (i) out += ", ";
      if (inner)
        out += value(next++);
      else
        self(self, d + 1);
    }
    if (!inner) out += ' ';
    out += '}';
  };
  rec(rec, 0);
  return out;
}

FUSEDSL_DECL std::string to_text(const sharding& s) {
  switch (s.k) {
    case sharding::kind::replicated:
      return "{replicated}";
    case sharding::kind::manual:
      return "{manual}";
    case sharding::kind::maximal:
      return "{maximal device=" + std::to_string(s.device) + "}";
    case sharding::kind::tiled: {
      std::string out = "{devices=[";
      detail::append_ints(out, s.tile_dims);
      out += ']';
      if (s.devices.empty()) {
        out += "<=[";
        detail::append_ints(out, s.iota_dims);
        out += ']';
        if (!s.iota_perm.empty()) {
          out += "T(";
          detail::append_ints(out, s.iota_perm);
          out += ')';
        }
      } else {
        detail::append_ints(out, s.devices);
      }
      if (s.last_tile_dim_replicate) out += " last_tile_dim_replicate";
      return out + '}';
    }
    case sharding::kind::tuple: {
      std::string out = "{";
      for (std::size_t i = 0; i < s.elements.size(); ++i) {
        if (i) out += ", ";
        out += to_text(s.elements[i]);
      }
      return out + '}';
    }
  }
  return "{replicated}";
}

FUSEDSL_DECL std::string to_text(const computation& c, const instruction& in) {
  std::string out = detail::name_ref(in.name) + " = " + to_text(in.shape) + " ";
  out += to_string(in.opcode);
  out += '(';
  if (in.opcode == opcode::parameter) {
    out += std::to_string(in.parameter_number);
  } else if (in.opcode == opcode::constant) {
    if (!in.literal) throw ir_error("print: constant " + in.name + " has no value");
    out += to_text(*in.literal);
  } else {
    for (std::size_t i = 0; i < in.operands.size(); ++i) {
      if (i) out += ", ";
      if (in.operands[i] >= c.instructions.size())
        throw ir_error("print: " + in.name + " has a dangling operand");
      const instruction& op = c.instructions[in.operands[i]];
      out += to_text(op.shape) + " " + detail::name_ref(op.name);
    }
  }
  out += ')';

  switch (in.opcode) {
    case opcode::iota:
      out += ", iota_dimension=" + std::to_string(in.iota_dimension);
      break;
    case opcode::get_tuple_element:
      out += ", index=" + std::to_string(in.tuple_index);
      break;
    case opcode::compare:
      if (in.direction) out += ", direction=" + std::string(to_string(*in.direction));
      break;
    case opcode::slice: {
      out += ", slice={";
      for (std::size_t i = 0; i < in.slice.size(); ++i) {
        const slice_dim& r = in.slice[i];
        if (i) out += ", ";
        out += "[" + std::to_string(r.start) + ":" + std::to_string(r.limit);
        if (r.stride != 1) out += ":" + std::to_string(r.stride);
        out += "]";
      }
      out += '}';
      break;
    }
    case opcode::dot:
      if (in.dot) {
        const auto& d = *in.dot;
        if (!d.lhs_batch.empty()) out += ", lhs_batch_dims=" + detail::braced(d.lhs_batch);
        if (!d.lhs_contracting.empty())
          out += ", lhs_contracting_dims=" + detail::braced(d.lhs_contracting);
        if (!d.rhs_batch.empty()) out += ", rhs_batch_dims=" + detail::braced(d.rhs_batch);
        if (!d.rhs_contracting.empty())
          out += ", rhs_contracting_dims=" + detail::braced(d.rhs_contracting);
      }
      break;
    case opcode::broadcast:
    case opcode::reduce:
    case opcode::transpose:
    case opcode::concatenate:
      out += ", dimensions=" + detail::braced(in.dimensions);
      break;
    case opcode::gather:
      // XLA's order; the batching lists only when present, indices_are_sorted only when true.
      if (in.gather) {
        const auto& g = *in.gather;
        out += ", offset_dims=" + detail::braced(g.offset_dims);
        out += ", collapsed_slice_dims=" + detail::braced(g.collapsed_slice_dims);
        out += ", start_index_map=" + detail::braced(g.start_index_map);
        if (!g.operand_batching_dims.empty())
          out += ", operand_batching_dims=" + detail::braced(g.operand_batching_dims);
        if (!g.start_indices_batching_dims.empty())
          out += ", start_indices_batching_dims=" + detail::braced(g.start_indices_batching_dims);
        out += ", index_vector_dim=" + std::to_string(g.index_vector_dim);
      }
      out += ", slice_sizes=" + detail::braced(in.slice_sizes);
      if (in.indices_are_sorted) out += ", indices_are_sorted=true";
      break;
    case opcode::dynamic_slice:
      out += ", dynamic_slice_sizes=" + detail::braced(in.dynamic_slice_sizes);
      break;
    case opcode::fusion:
      if (in.fusion_kind) out += ", kind=" + std::string(to_string(*in.fusion_kind));
      break;
    default:
      break;
  }
  if (!in.called_computation.empty())
    out += (in.opcode == opcode::fusion ? ", calls=" : ", to_apply=") +
           detail::name_ref(in.called_computation);
  if (in.sharding) out += ", sharding=" + to_text(*in.sharding);
  if (!in.op_name.empty()) out += ", metadata={op_name=" + quote_string(in.op_name) + "}";
  return out;
}

FUSEDSL_DECL std::string to_text(const computation& c, bool entry) {
  std::string out = entry ? "ENTRY " : "";
  out += detail::name_ref(c.name) + " {\n";
  for (instruction_id i = 0; i < c.instructions.size(); ++i) {
    out += i == c.root ? "  ROOT " : "  ";
    out += to_text(c, c.instructions[i]);
    out += '\n';
  }
  return out + "}\n";
}

FUSEDSL_DECL std::string to_text(const module& m) {
  verify(m);
  std::string out = "HloModule " + m.name;
  if (!m.input_output_alias.empty()) {
    // XLA's spelling: input_output_alias={ {0}: (1, {}, may-alias), {1}: (2, {}, must-alias) }
    out += ", input_output_alias={ ";
    for (std::size_t i = 0; i < m.input_output_alias.size(); ++i) {
      const io_alias& a = m.input_output_alias[i];
      out += (i ? ", " : "") + index_text(a.output_index) + ": (" +
             std::to_string(a.parameter_number) + ", " + index_text(a.parameter_index) + ", " +
             (a.must_alias ? "must-alias" : "may-alias") + ")";
    }
    out += " }";
  }
  out += "\n";
  for (const computation& c : m.computations) {
    out += '\n';
    out += to_text(c, c.name == m.entry);
  }
  return out;
}

}  // namespace fusedsl::hlo
