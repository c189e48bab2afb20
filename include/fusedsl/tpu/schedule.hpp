#pragma once
// From an HLO module to a schedule on a chip model: ops grouped into kernels (a dot with its
// elementwise epilogue, chains of elementwise ops, single reductions/transposes/copies, row
// copies (gather, dynamic-slice, dynamic-update-slice), HLO fusions kept whole), each kernel
// planned in grid steps, and the whole run simulated.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/hlo/ir.hpp"
#include "fusedsl/tpu/chip.hpp"
#include "fusedsl/tpu/graph.hpp"
#include "fusedsl/tpu/pipeline.hpp"
#include "fusedsl/tpu/plan.hpp"
#include "fusedsl/tpu/tiling.hpp"

namespace fusedsl::tpu {

struct schedule_options {
  std::int64_t vmem_budget = 0;  // bytes for one kernel's buffers; 0: the chip's VMEM per core
  int f32_dot_passes = 6;              // bf16 MXU passes per f32 product (6: precision HIGHEST)
  std::optional<matmul_blocks> blocks; // force these blocks on every dot that accepts them
};

// Layout-only ops: no data moves (reshape is a bitcast in row-major, a get-tuple-element picks
// one of a variadic reduce's buffers) or the value is made inside its consumers (broadcast,
// iota, constant), as XLA does.
inline bool is_layout_op(hlo::opcode op) {
  using hlo::opcode;
  return op == opcode::parameter || op == opcode::constant || op == opcode::broadcast ||
         op == opcode::reshape || op == opcode::iota || op == opcode::tuple ||
         op == opcode::get_tuple_element;
}

// Ops that move rows at run-time positions: DMAs of the rows they read or write, no VPU work.
inline bool is_row_copy(hlo::opcode op) {
  using hlo::opcode;
  return op == opcode::gather || op == opcode::dynamic_slice || op == opcode::dynamic_update_slice;
}

// VPU cycles per vreg of results: 1 for ALU ops; transcendentals go through the EUP, which
// issues one every 2 cycles; erf and power are built from several of those (assumption).
inline double vpu_op_weight(hlo::opcode op) {
  using hlo::opcode;
  switch (op) {
    case opcode::exponential:
    case opcode::exponential_minus_one:
    case opcode::log:
    case opcode::log_plus_one:
    case opcode::sqrt:
    case opcode::rsqrt:
    case opcode::tanh:
    case opcode::logistic:
    case opcode::cosine:
    case opcode::sine: return 2;
    case opcode::divide: return 3;
    case opcode::erf:
    case opcode::power: return 8;
    default: return 1;
  }
}

// One kernel's members in the flat graph.
struct kernel_group {
  std::vector<std::size_t> nodes;     // in topological order
  std::optional<std::size_t> dot;     // matmul kernels
  std::vector<std::size_t> dots;      // every dot in the kernel (several in a fused kernel)
  std::size_t output = 0;             // the node whose value leaves the kernel
  std::vector<std::size_t> inputs;    // external nodes read (through layout ops)
  int hlo_fusion = -1;
};

struct schedule {
  chip_spec chip;
  schedule_options options;
  flat_graph graph;
  std::vector<kernel_group> groups;
  std::vector<kernel_plan> kernels;   // kernels[i] plans groups[i]
  timeline tl;
};

namespace detail {
// Bytes a kernel reads for node `id` of `g` (0 for a scalar constant or an iota, computed in
// place).
FUSEDSL_DECL std::int64_t source_bytes(const flat_graph& g, std::size_t id);
// VPU cycles per vreg of a reduce's inputs: the weights of the ops of its to_apply.
FUSEDSL_DECL double reducer_weight(const hlo::module& m, const hlo::instruction& r);
}  // namespace detail

// The schedule points into `m`, which must outlive it (hence no temporaries).
FUSEDSL_DECL schedule make_schedule(const hlo::module& m, const chip_spec& chip,
                                    schedule_options options = {});

schedule make_schedule(const hlo::module&&, const chip_spec&, schedule_options = {}) = delete;

}  // namespace fusedsl::tpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/tpu/impl/schedule.ipp"
#endif
