#pragma once
// The flat graph the scheduler walks.
// The bodies of fusedsl/tpu/graph.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/tpu/graph.hpp"

namespace fusedsl::tpu {

namespace detail {

inline std::size_t flatten_into(flat_graph& g, const hlo::module& m, const hlo::computation& c,
                                const std::vector<std::size_t>& args, int fusion,
                                const std::string& prefix, int depth) {
  if (depth > 64) throw tpu_error("flatten: calls nested more than 64 deep at " + c.name);
  std::vector<std::size_t> id(c.instructions.size(), SIZE_MAX);
  for (std::size_t i = 0; i < c.instructions.size(); ++i) {
    const hlo::instruction& in = c.instructions[i];
    std::vector<std::size_t> ops;
    for (auto o : in.operands) ops.push_back(id.at(o));
    switch (in.opcode) {
      case hlo::opcode::parameter: {
        if (depth > 0) {
          auto n = std::size_t(in.parameter_number);
          if (n >= args.size())
            throw tpu_error(c.name + "/" + in.name + ": parameter " + std::to_string(n) +
                            " but the caller passes " + std::to_string(args.size()) + " operands");
          id[i] = args[n];
          continue;
        }
        flat_node fn{prefix + in.name, &in, {}, -1, in.parameter_number};
        g.nodes.push_back(fn);
        id[i] = g.nodes.size() - 1;
        auto n = std::size_t(in.parameter_number);
        if (g.inputs.size() <= n) g.inputs.resize(n + 1, SIZE_MAX);
        g.inputs[n] = id[i];
        continue;
      }
      case hlo::opcode::call:
        id[i] = flatten_into(g, m, m.get(in.called_computation), ops, fusion,
                             prefix + in.name + "/", depth + 1);
        continue;
      case hlo::opcode::fusion: {
        if (fusion >= 0)
          throw tpu_error(in.name + ": a fusion nested inside fusion " +
                          g.fusions[std::size_t(fusion)].name + " is not supported");
        g.fusions.push_back({prefix + in.name, 0});
        const int f = int(g.fusions.size() - 1);
        id[i] = flatten_into(g, m, m.get(in.called_computation), ops, f, prefix + in.name + "/",
                             depth + 1);
        g.fusions[std::size_t(f)].root = id[i];
        continue;
      }
      case hlo::opcode::get_tuple_element: {
        const flat_node& t = g.nodes.at(ops.at(0));
        // A result of a variadic reduce stays a node (it picks one of the reduce's buffers).
        if (t.inst->opcode == hlo::opcode::reduce) break;
        if (t.inst->opcode != hlo::opcode::tuple)
          throw tpu_error(prefix + in.name + ": get-tuple-element of " + t.name +
                          ", which is not a tuple instruction or a reduce, is not supported");
        id[i] = t.operands.at(std::size_t(in.tuple_index));
        continue;
      }
      default: break;
    }
    g.nodes.push_back({prefix + in.name, &in, std::move(ops), fusion, -1});
    id[i] = g.nodes.size() - 1;
  }
  return id.at(c.root);
}

}  // namespace detail

FUSEDSL_DECL flat_graph flatten(const hlo::module& m) {
  flat_graph g;
  g.module = &m;
  g.root = detail::flatten_into(g, m, m.entry_computation(), {}, -1, "", 0);
  for (std::size_t n = 0; n < g.inputs.size(); ++n)
    if (g.inputs[n] == SIZE_MAX)
      throw tpu_error("entry parameter " + std::to_string(n) + " is missing");
  return g;
}

}  // namespace fusedsl::tpu
