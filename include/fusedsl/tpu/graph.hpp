#pragma once
// A flat view of an HLO module's entry computation for scheduling: `call`s inlined, the bodies
// of `fusion`s inlined with the fusion they came from recorded (its boundary is kept as one
// kernel), tuple/get-tuple-element pairs resolved (a get-tuple-element of a variadic reduce
// stays a node). Nodes point into the module's own IR.
#include <cstdint>
#include <string>
#include <vector>

#include "fusedsl/hlo/ir.hpp"
#include "fusedsl/tpu/error.hpp"

namespace fusedsl::tpu {

struct flat_node {
  std::string name;                      // unique; inlined names are prefixed "<call>/"
  const hlo::instruction* inst = nullptr;
  std::vector<std::size_t> operands;     // flat node ids
  int hlo_fusion = -1;                   // index into flat_graph::fusions, or -1
  std::int64_t input_number = -1;        // entry parameters: their parameter number
};

struct hlo_fusion_info {
  std::string name;       // the fusion instruction's name
  std::size_t root = 0;   // flat id of the fused computation's root
};

struct flat_graph {
  std::vector<flat_node> nodes;
  std::vector<hlo_fusion_info> fusions;
  std::vector<std::size_t> inputs;  // by parameter number
  std::size_t root = 0;
  const hlo::module* module = nullptr;

  const hlo::shape& shape(std::size_t id) const { return nodes.at(id).inst->shape; }
  hlo::opcode op(std::size_t id) const { return nodes.at(id).inst->opcode; }
};

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

inline flat_graph flatten(const hlo::module& m) {
  flat_graph g;
  g.module = &m;
  g.root = detail::flatten_into(g, m, m.entry_computation(), {}, -1, "", 0);
  for (std::size_t n = 0; n < g.inputs.size(); ++n)
    if (g.inputs[n] == SIZE_MAX)
      throw tpu_error("entry parameter " + std::to_string(n) + " is missing");
  return g;
}

}  // namespace fusedsl::tpu
