#pragma once
// A flat view of an HLO module's entry computation for scheduling: `call`s inlined, the bodies
// of `fusion`s inlined with the fusion they came from recorded (its boundary is kept as one
// kernel), tuple/get-tuple-element pairs resolved (a get-tuple-element of a variadic reduce
// stays a node). Nodes point into the module's own IR.
#include <cstdint>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
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

FUSEDSL_DECL flat_graph flatten(const hlo::module& m);

}  // namespace fusedsl::tpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/tpu/impl/graph.ipp"
#endif
