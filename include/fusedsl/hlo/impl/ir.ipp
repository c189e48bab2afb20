#pragma once
// HLO IR: the structural checks (verify).
// The bodies of fusedsl/hlo/ir.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/hlo/ir.hpp"

namespace fusedsl::hlo {

FUSEDSL_DECL void verify_aliases(const module& m) {
  if (m.input_output_alias.empty()) return;
  const computation& e = m.get(m.entry);
  const auto params = e.parameters();
  for (std::size_t i = 0; i < m.input_output_alias.size(); ++i) {
    const io_alias& a = m.input_output_alias[i];
    const std::string what =
        "module " + m.name + ": input_output_alias " + index_text(a.output_index) + ": ";
    const shape* out = subshape(e.root_instruction().shape, a.output_index);
    if (!out || out->is_tuple()) throw ir_error(what + "no array output at that index");
    if (a.parameter_number < 0 || a.parameter_number >= static_cast<std::int64_t>(params.size()))
      throw ir_error(what + "no entry parameter " + std::to_string(a.parameter_number));
    const shape* in =
        subshape(e.instructions[params[static_cast<std::size_t>(a.parameter_number)]].shape,
                 a.parameter_index);
    if (!in || !in->compatible(*out))
      throw ir_error(what + "parameter " + std::to_string(a.parameter_number) +
                     index_text(a.parameter_index) + " does not have the output's shape");
    for (std::size_t j = 0; j < i; ++j) {
      const io_alias& b = m.input_output_alias[j];
      if (b.output_index == a.output_index) throw ir_error(what + "the output is aliased twice");
      if (b.parameter_number == a.parameter_number && b.parameter_index == a.parameter_index)
        throw ir_error(what + "parameter " + std::to_string(a.parameter_number) +
                       index_text(a.parameter_index) + " is aliased to two outputs");
    }
  }
}

FUSEDSL_DECL void verify(const module& m) {
  if (!is_valid_identifier(m.name))
    throw ir_error("module name '" + m.name +
                   "' is not a valid HLO identifier (see escape_identifier)");
  if (!m.find(m.entry))
    throw ir_error("module " + m.name + ": entry computation '" + m.entry + "' is missing");
  for (std::size_t ci = 0; ci < m.computations.size(); ++ci) {
    const computation& c = m.computations[ci];
    auto where = [&](const instruction& in) {
      return "computation " + c.name + ", " + in.name + ": ";
    };
    if (!is_valid_identifier(c.name))
      throw ir_error("computation name '" + c.name + "' is not a valid HLO identifier");
    for (std::size_t cj = 0; cj < ci; ++cj)
      if (m.computations[cj].name == c.name) throw ir_error("duplicate computation " + c.name);
    if (c.instructions.empty()) throw ir_error("computation " + c.name + ": no instructions");
    if (c.root >= c.instructions.size())
      throw ir_error("computation " + c.name + ": root out of range");
    std::vector<bool> seen_param;
    std::set<std::string_view> names;
    for (instruction_id i = 0; i < c.instructions.size(); ++i) {
      const instruction& in = c.instructions[i];
      if (!is_valid_identifier(in.name))
        throw ir_error(where(in) + "name is not a valid HLO identifier");
      if (!names.insert(in.name).second) throw ir_error(where(in) + "duplicate name");
      for (instruction_id op : in.operands)
        if (op >= i)
          throw ir_error(where(in) + "operand " + std::to_string(op) +
                         " is not defined before use");
      if (in.opcode == opcode::parameter) {
        if (in.parameter_number < 0 ||
            in.parameter_number >= static_cast<std::int64_t>(c.instructions.size()))
          throw ir_error(where(in) + "parameter number " + std::to_string(in.parameter_number) +
                         " out of range");
        auto n = static_cast<std::size_t>(in.parameter_number);
        if (seen_param.size() <= n) seen_param.resize(n + 1, false);
        if (seen_param[n])
          throw ir_error(where(in) + "duplicate parameter number " + std::to_string(n));
        seen_param[n] = true;
      }
      if (!is_valid_utf8(in.op_name)) throw ir_error(where(in) + "op_name is not valid UTF-8");
      if (in.opcode == opcode::constant && !in.literal)
        throw ir_error(where(in) + "constant without a value");
      if (!in.called_computation.empty()) {
        bool earlier = false;
        for (std::size_t cj = 0; cj < ci; ++cj)
          earlier |= m.computations[cj].name == in.called_computation;
        if (!earlier)
          throw ir_error(where(in) + "calls '" + in.called_computation +
                         "', which is not defined before this computation");
      }
    }
    for (std::size_t n = 0; n < seen_param.size(); ++n)
      if (!seen_param[n])
        throw ir_error("computation " + c.name + ": parameter " + std::to_string(n) +
                       " is missing");
  }
  verify_aliases(m);
}

}  // namespace fusedsl::hlo
