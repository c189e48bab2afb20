#pragma once
// StableHLO writer.
// The bodies of fusedsl/hlo/stablehlo.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/hlo/stablehlo.hpp"

namespace fusedsl::hlo {

namespace detail {

inline std::string mlir_element_type(element_type t) {
  switch (t) {
    case element_type::pred:
      return "i1";
    case element_type::s32:
      return "i32";
    case element_type::s64:
      return "i64";
    case element_type::f16:
      return "f16";
    case element_type::bf16:
      return "bf16";
    case element_type::f32:
      return "f32";
    case element_type::f64:
      return "f64";
    case element_type::s8:
      return "i8";
    case element_type::u8:
      return "ui8";
  }
  return "?";
}

inline std::string mlir_type(const shape& s) {
  if (s.is_tuple()) {
    std::string out = "tuple<";
    for (std::size_t i = 0; i < s.elements.size(); ++i)
      out += (i ? ", " : "") + mlir_type(s.elements[i]);
    return out + ">";
  }
  std::string out = "tensor<";
  for (std::int64_t d : s.dims) out += std::to_string(d) + "x";
  return out + mlir_element_type(s.type) + ">";
}

inline std::string i64_array(const std::vector<std::int64_t>& v) {
  std::string out = "array<i64";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : ": ") + std::to_string(v[i]);
  return out + ">";
}
inline std::string i64_list(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

FUSEDSL_DECL std::string mlir_value(element_type t, double v, bool hex) {
  if (t == element_type::pred) return v != 0 ? "true" : "false";
  char buf[32];
  if (hex) {
    switch (t) {
      case element_type::f64:
        std::snprintf(buf, sizeof buf, "0x%016llX",
                      static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(v)));
        break;
      case element_type::f32:
        std::snprintf(buf, sizeof buf, "0x%08X",
                      std::bit_cast<std::uint32_t>(static_cast<float>(v)));
        break;
      case element_type::bf16:
        std::snprintf(buf, sizeof buf, "0x%04X",
                      std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16);
        break;
      default: {  // f16: the value is exactly representable; build the bits from it.
        std::uint16_t bits = 0;
        double a = std::fabs(v);
        if (std::isnan(v))
          bits = 0x7E00;
        else if (std::isinf(v))
          bits = 0x7C00;
        else if (a >= std::ldexp(1.0, -14)) {
          int e = 0;
          double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
          bits = static_cast<std::uint16_t>(((e + 14) << 10) |
                                            (static_cast<int>(std::ldexp(m, 11)) & 0x3ff));
        } else {
          bits = static_cast<std::uint16_t>(std::ldexp(a, 24));
        }
        if (std::signbit(v)) bits |= 0x8000;
        std::snprintf(buf, sizeof buf, "0x%04X", bits);
      }
    }
    return buf;
  }
  std::string s = literal_value_text(t, v);
  if (is_floating(t) && s.find('.') == std::string::npos) {
    auto e = s.find('e');
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

inline std::string dense(const literal& l) {
  const auto& dims = l.shape.dims;
  bool hex = false;
  for (double v : l.values) hex |= !std::isfinite(v);
  auto value = [&](std::size_t i) {
    return is_integral(l.shape.type) ? std::to_string(l.ints.at(i))
                                     : mlir_value(l.shape.type, l.values.at(i), hex);
  };
  std::string out = "dense<";
  if (dims.empty()) return out + value(0) + ">";
  if (l.shape.element_count() == 0) return out + ">";  // MLIR's empty elements literal
  std::size_t next = 0;
  auto rec = [&](auto& self, std::size_t d) -> void {
    out += '[';
    for (std::int64_t i = 0; i < dims[d]; ++i) {
      if (i) out += ", ";
      if (d + 1 == dims.size())
        out += value(next++);
      else
        self(self, d + 1);
    }
    out += ']';
  };
  rec(rec, 0);
  return out + ">";
}

inline std::string stablehlo_name(opcode op) {
  switch (op) {
    case opcode::exponential_minus_one:
      return "stablehlo.exponential_minus_one";
    case opcode::log_plus_one:
      return "stablehlo.log_plus_one";
    case opcode::cosine:
      return "stablehlo.cosine";
    case opcode::sine:
      return "stablehlo.sine";
    case opcode::round_nearest_even:
      return "stablehlo.round_nearest_even";
    case opcode::not_:
      return "stablehlo.not";
    case opcode::and_:
      return "stablehlo.and";
    case opcode::or_:
      return "stablehlo.or";
    case opcode::xor_:
      return "stablehlo.xor";
    case opcode::erf:
      return "chlo.erf";
    case opcode::dot:
      return "stablehlo.dot_general";
    case opcode::broadcast:
      return "stablehlo.broadcast_in_dim";
    case opcode::get_tuple_element:
      return "stablehlo.get_tuple_element";
    case opcode::dynamic_slice:
      return "stablehlo.dynamic_slice";
    case opcode::dynamic_update_slice:
      return "stablehlo.dynamic_update_slice";
    default:
      return "stablehlo." + std::string(to_string(op));
  }
}

class stablehlo_writer {
 public:
  explicit stablehlo_writer(const module& m) : m_(m) {}

  std::string run() {
    verify(m_);
    std::int64_t partitions = 1;
    for (const computation& c : m_.computations)
      for (const instruction& in : c.instructions)
        if (in.sharding) partitions = std::max(partitions, devices_of(*in.sharding));
    out_ = "module @" + m_.name;
    if (partitions > 1)
      out_ += " attributes {mhlo.num_partitions = " + std::to_string(partitions) +
              " : i32, mhlo.num_replicas = 1 : i32}";
    out_ += " {\n";
    // Functions for computations reached by fusion/call; reduce bodies are inlined instead.
    for (const computation& c : m_.computations)
      if (c.name != m_.entry && is_called_as_function(c.name)) write_function(c, false);
    write_function(m_.entry_computation(), true);
    out_ += "}\n";
    return out_;
  }

 private:
  static std::int64_t devices_of(const sharding& s) {
    if (s.k == sharding::kind::tiled) return s.device_count();
    if (s.k == sharding::kind::maximal) return s.device + 1;
    std::int64_t n = 1;
    for (const sharding& e : s.elements) n = std::max(n, devices_of(e));
    return n;
  }
  bool is_called_as_function(const std::string& name) const {
    for (const computation& c : m_.computations)
      for (const instruction& in : c.instructions)
        if ((in.opcode == opcode::fusion || in.opcode == opcode::call) &&
            in.called_computation == name)
          return true;
    return false;
  }
  static std::string sharding_attr(const instruction& in) {
    return in.sharding ? "mhlo.sharding = " + quote_string(to_text(*in.sharding)) : "";
  }

  void write_function(const computation& c, bool entry) {
    std::map<instruction_id, std::string> names;
    multi_.clear();
    const auto params = c.parameters();
    out_ += "  func.func " + std::string(entry ? "public @main" : "private @" + c.name) + "(";
    const instruction& root = c.root_instruction();
    // The entry returns a tuple root's elements (or a variadic reduce's results) as results.
    const bool spread = entry && (root.opcode == opcode::tuple || is_multi_result(root));
    for (std::size_t i = 0; i < params.size(); ++i) {
      const instruction& p = c.instructions[params[i]];
      names[params[i]] = "%" + p.name;
      out_ += (i ? ", " : "") + names[params[i]] + ": " + mlir_type(p.shape);
      std::vector<std::string> attrs;
      if (p.sharding) attrs.push_back(sharding_attr(p));
      if (entry)
        for (const io_alias& a : m_.input_output_alias)
          if (a.parameter_number == p.parameter_number && a.parameter_index.empty() &&
              a.output_index.size() == (spread ? 1u : 0u))
            attrs.push_back("tf.aliasing_output = " +
                            std::to_string(spread ? a.output_index[0] : 0) + " : i32");
      if (!attrs.empty()) {
        out_ += " {";
        for (std::size_t k = 0; k < attrs.size(); ++k) out_ += (k ? ", " : "") + attrs[k];
        out_ += "}";
      }
    }
    out_ += ") -> ";
    std::vector<shape> result_types;
    if (!spread)
      result_types.push_back(root.shape);
    else
      result_types = root.shape.elements;
    out_ += "(";
    for (std::size_t i = 0; i < result_types.size(); ++i) {
      out_ += (i ? ", " : "") + mlir_type(result_types[i]);
      const sharding* s = nullptr;
      if (spread && root.sharding && root.sharding->k == sharding::kind::tuple &&
          i < root.sharding->elements.size())
        s = &root.sharding->elements[i];
      else if (!spread && root.sharding)
        s = &*root.sharding;
      else if (spread && root.opcode == opcode::tuple && c.instructions[root.operands[i]].sharding)
        s = &*c.instructions[root.operands[i]].sharding;
      if (s) out_ += " {mhlo.sharding = " + quote_string(to_text(*s)) + "}";
    }
    out_ += ") {\n";
    const bool skip_root = spread && root.opcode == opcode::tuple;
    write_body(c, names, "    ", "%",
               skip_root ? std::optional<instruction_id>(c.root) : std::nullopt);
    std::vector<std::string> results;
    if (!spread)
      results.push_back(names.at(c.root));
    else
      for (std::size_t i = 0; i < result_types.size(); ++i)
        results.push_back(skip_root ? names.at(root.operands[i]) : element_name(c.root, i));
    out_ += "    \"func.return\"(";
    for (std::size_t i = 0; i < results.size(); ++i) out_ += (i ? ", " : "") + results[i];
    out_ += ") : (";
    for (std::size_t i = 0; i < result_types.size(); ++i)
      out_ += (i ? ", " : "") + mlir_type(result_types[i]);
    out_ += ") -> ()\n  }\n";
  }

  static bool is_multi_result(const instruction& in) {
    return in.opcode == opcode::reduce && in.shape.is_tuple();
  }
  // Result k of a multi-result op of the computation being written ("%r#k").
  std::string element_name(instruction_id i, std::size_t k) const {
    return multi_.at(i) + "#" + std::to_string(k);
  }

  // What `in` writes beside its operands: its attributes, its region (a reduce's to_apply), and
  // the op's name where it is not stablehlo_name's (a sharding constraint, a call).
  void op_attributes(const computation& c, const instruction& in, const std::string& indent,
                     std::string& op, std::vector<std::string>& attrs, std::string& region) {
    switch (in.opcode) {
      case opcode::constant:
        attrs.push_back("value = " + dense(*in.literal) + " : " + mlir_type(in.shape));
        break;
      case opcode::iota:
        attrs.push_back("iota_dimension = " + std::to_string(in.iota_dimension) + " : i64");
        break;
      case opcode::compare: {
        const element_type t = c.instructions[in.operands[0]].shape.type;
        attrs.push_back("comparison_direction = #stablehlo<comparison_direction " +
                        std::string(to_string(*in.direction)) + ">");
        attrs.push_back(std::string("compare_type = #stablehlo<comparison_type ") +
                        (is_floating(t)                                     ? "FLOAT"
                         : t == element_type::pred || t == element_type::u8 ? "UNSIGNED"
                                                                            : "SIGNED") +
                        ">");
        break;
      }
      case opcode::dot: {
        const auto& d = *in.dot;
        attrs.push_back("dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " +
                        i64_list(d.lhs_batch) +
                        ", rhs_batching_dimensions = " + i64_list(d.rhs_batch) +
                        ", lhs_contracting_dimensions = " + i64_list(d.lhs_contracting) +
                        ", rhs_contracting_dimensions = " + i64_list(d.rhs_contracting) + ">");
        break;
      }
      case opcode::broadcast:
        attrs.push_back("broadcast_dimensions = " + i64_array(in.dimensions));
        break;
      case opcode::transpose:
        attrs.push_back("permutation = " + i64_array(in.dimensions));
        break;
      case opcode::concatenate:
        attrs.push_back("dimension = " + std::to_string(in.dimensions[0]) + " : i64");
        break;
      case opcode::get_tuple_element:
        attrs.push_back("index = " + std::to_string(in.tuple_index) + " : i32");
        break;
      case opcode::slice: {
        std::vector<std::int64_t> st, li, sd;
        for (const slice_dim& r : in.slice)
          st.push_back(r.start), li.push_back(r.limit), sd.push_back(r.stride);
        attrs.push_back("start_indices = " + i64_array(st));
        attrs.push_back("limit_indices = " + i64_array(li));
        attrs.push_back("strides = " + i64_array(sd));
        break;
      }
      case opcode::reduce: {
        attrs.push_back("dimensions = " + i64_array(in.dimensions));
        region = reduce_region(m_.get(in.called_computation), indent);
        break;
      }
      case opcode::gather: {
        const gather_dimension_numbers& g = *in.gather;
        // The attribute's fields in StableHLO's order; empty lists are left out.
        std::string dn;
        auto field = [&](const char* key, const std::vector<std::int64_t>& v) {
          if (!v.empty()) dn += (dn.empty() ? "" : ", ") + std::string(key) + " = " + i64_list(v);
        };
        field("offset_dims", g.offset_dims);
        field("collapsed_slice_dims", g.collapsed_slice_dims);
        field("operand_batching_dims", g.operand_batching_dims);
        field("start_indices_batching_dims", g.start_indices_batching_dims);
        field("start_index_map", g.start_index_map);
        dn += (dn.empty() ? "" : ", ") + std::string("index_vector_dim = ") +
              std::to_string(g.index_vector_dim);
        attrs.push_back("dimension_numbers = #stablehlo.gather<" + dn + ">");
        attrs.push_back(std::string("indices_are_sorted = ") +
                        (in.indices_are_sorted ? "true" : "false"));
        attrs.push_back("slice_sizes = " + i64_array(in.slice_sizes));
        break;
      }
      case opcode::dynamic_slice:
        attrs.push_back("slice_sizes = " + i64_array(in.dynamic_slice_sizes));
        break;
      case opcode::copy:  // a copy with a sharding is a sharding constraint, written as jax does
        op = "stablehlo.custom_call";
        attrs.push_back("call_target_name = \"Sharding\"");
        break;
      case opcode::fusion:
      case opcode::call:
        op = "func.call";
        attrs.push_back("callee = @" + in.called_computation);
        break;
      default:
        break;
    }
  }

  // Writes every non-parameter instruction (except `skip`) of c; `names` maps ids to SSA values,
  // which are `prefix` + the instruction name.
  void write_body(const computation& c, std::map<instruction_id, std::string>& names,
                  const std::string& indent, const std::string& prefix,
                  std::optional<instruction_id> skip) {
    for (instruction_id i = 0; i < c.instructions.size(); ++i) {
      const instruction& in = c.instructions[i];
      if (in.opcode == opcode::parameter || (skip && *skip == i)) continue;
      if (in.opcode == opcode::copy && !in.sharding) {
        names[i] = names.at(in.operands[0]);
        continue;
      }
      if (in.opcode == opcode::get_tuple_element && multi_.count(in.operands[0])) {
        names[i] = element_name(in.operands[0], static_cast<std::size_t>(in.tuple_index));
        continue;
      }
      const std::string self = prefix + in.name;
      names[i] = self;
      std::string operands, types;
      for (std::size_t k = 0; k < in.operands.size(); ++k) {
        operands += (k ? ", " : "") + names.at(in.operands[k]);
        types += (k ? ", " : "") + mlir_type(c.instructions[in.operands[k]].shape);
      }
      std::vector<std::string> attrs;
      std::string region;
      std::string op = stablehlo_name(in.opcode);
      op_attributes(c, in, indent, op, attrs, region);
      if (in.sharding) attrs.push_back(sharding_attr(in));
      const bool multi = is_multi_result(in);
      out_ += indent + self + (multi ? ":" + std::to_string(in.shape.elements.size()) : "") +
              " = \"" + op + "\"(" + operands + ")";
      if (!region.empty()) out_ += " (" + region + ")";
      if (!attrs.empty()) {
        out_ += " {";
        for (std::size_t k = 0; k < attrs.size(); ++k) out_ += (k ? ", " : "") + attrs[k];
        out_ += "}";
      }
      std::string result = mlir_type(in.shape);
      if (multi) {
        result = "(";
        for (std::size_t k = 0; k < in.shape.elements.size(); ++k)
          result += (k ? ", " : "") + mlir_type(in.shape.elements[k]);
        result += ")";
      }
      out_ += " : (" + types + ") -> " + result + "\n";
      if (multi) {
        multi_[i] = self;
        // Read as a tuple value anywhere but by get-tuple-element: make one ('$$' cannot occur
        // in a name this writer makes from HLO names).
        bool as_tuple = i == c.root && !(skip && *skip == i);
        for (const instruction& u : c.instructions)
          for (instruction_id o : u.operands)
            as_tuple |= o == i && u.opcode != opcode::get_tuple_element;
        if (as_tuple) {
          std::string elements, element_types;
          for (std::size_t k = 0; k < in.shape.elements.size(); ++k) {
            elements += (k ? ", " : "") + element_name(i, k);
            element_types += (k ? ", " : "") + mlir_type(in.shape.elements[k]);
          }
          names[i] = self + "$$tuple";
          out_ += indent + names[i] + " = \"stablehlo.tuple\"(" + elements + ") : (" +
                  element_types + ") -> " + mlir_type(in.shape) + "\n";
        }
      }
    }
  }

  // The to_apply computation as a region: its parameters become block arguments.
  std::string reduce_region(const computation& f, const std::string& indent) {
    std::string saved;
    saved.swap(out_);
    std::map<instruction_id, std::string> saved_multi;
    saved_multi.swap(multi_);
    std::map<instruction_id, std::string> names;
    const auto ps = f.parameters();
    // Region values are named <computation>$<instruction>: '$' never occurs in HLO names, so they
    // can't clash with the enclosing function's values.
    const std::string prefix = "%" + f.name + "$";
    out_ += "{\n" + indent + "^bb0(";
    for (std::size_t i = 0; i < ps.size(); ++i) {
      names[ps[i]] = prefix + f.instructions[ps[i]].name;
      out_ += (i ? ", " : "") + names[ps[i]] + ": " + mlir_type(f.instructions[ps[i]].shape);
    }
    out_ += "):\n";
    // A variadic reduce's body returns its accumulators as values, not as a tuple.
    const instruction& root = f.root_instruction();
    const bool spread = root.opcode == opcode::tuple;
    write_body(f, names, indent + "  ", prefix,
               spread ? std::optional<instruction_id>(f.root) : std::nullopt);
    std::vector<instruction_id> results =
        spread ? root.operands : std::vector<instruction_id>{f.root};
    std::string values, types;
    for (std::size_t k = 0; k < results.size(); ++k) {
      values += (k ? ", " : "") + names.at(results[k]);
      types += (k ? ", " : "") + mlir_type(f.instructions[results[k]].shape);
    }
    out_ +=
        indent + "  \"stablehlo.return\"(" + values + ") : (" + types + ") -> ()\n" + indent + "}";
    std::string region;
    region.swap(out_);
    out_.swap(saved);
    multi_.swap(saved_multi);
    return region;
  }

  const module& m_;
  std::string out_;
  std::map<instruction_id, std::string> multi_;  // multi-result ops of the body being written
};

}  // namespace detail

FUSEDSL_DECL std::string to_stablehlo(const module& m) {
  return detail::stablehlo_writer(m).run();
}

}  // namespace fusedsl::hlo
