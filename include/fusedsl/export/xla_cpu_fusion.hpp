#pragma once
// hlo::split_for_xla_cpu: one fusion group's computation as the kLoop fusions XLA's CPU backend
// compiles (jax/jaxlib 0.10.2; rules measured there and read in XLA's source, docs/hlo-export.md).
//
// XLA:CPU emits a `fusion` it is handed only when its kind is kLoop (kInput: "Unsupported fusion
// kind"; kOutput: a dot + `add` of parameters only, and larger GEMMs abort in dot_op_emitter),
// and its layout assignment clears the layouts of every instruction inside a fusion body but the
// parameters, constants and the root. So a part that XLA:CPU takes:
//   * has one output (a tuple root: the loop emitter reads the first root's layout -> abort);
//   * holds a transpose only as its root, reading a parameter (cost analysis asks whether the
//     transpose is a bitcast, which needs both layouts -> abort); the same for a reshape that the
//     loop emitter meets on its way up from the root through elementwise ops (its "hero" search);
//   * holds a concatenate on that path only as its root, reading parameters (the concatenate
//     emitter takes its own and its operands' layouts);
//   * holds no `logistic` (XLA expands it before fusion, never inside a body): 1 / (1 + exp(-x)).
// Dots, reduces, broadcasts, reshapes, slices, concatenates, converts and elementwise ops are
// emitted element by element inside a kLoop body, so the split also keeps each expensive value
// (a dot or reduce) computed once: it is a part's root unless its only use is one elementwise
// chain to that root. A dot's operands must be the part's parameters (the elemental dot emitter
// indexes them by layout -> abort otherwise). A transpose feeding a dot is folded into the dot's
// dimension numbers first (as XLA's transpose folding does) when the free dimensions keep their
// order, so the head split of attention needs no transpose.
// Two rules for the ops of run-time positions:
//   * a gather must be in the form XLA's GatherSimplifier gives (indices [N, k], index vector
//     along dim 1, start_index_map 0..k-1, nothing collapsed, offset dims 1..rank): its fusion
//     emitter CHECK-fails on any other form ("Non-simplified HLO Gather is not supported",
//     indexing_analysis.cc). So a gather is rewritten into that form between two reshapes, which
//     the reshape rule above then places: the indices' reshape and the row reshape are parts of
//     their own;
//   * a variadic reduce (argmax) is a part whose root is the reduce itself, its results read by
//     get-tuple-element in the entry: XLA takes a kLoop fusion with such a root, but a body
//     holding the reduce and one get-tuple-element of it fails XLA's verifier once jax's import
//     has given every result a get-tuple-element ("Non-root instruction ... must have users").
// dynamic-slice needs nothing; a dynamic-update-slice is the root of a part of its own reading
// its operand and its update as parameters: XLA:CPU emits it in place over the operand's buffer
// and asks for the update's layout (a computed update aborts in GetWorkDimensions: "Check
// failed: has_layout()").
//
//   hlo::fusion_split s = hlo::split_for_xla_cpu(group);  // parts in dependency order
//   // part k reads s.parts[k].operands: a group parameter, or an earlier part's result
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/hlo/builder.hpp"
#include "fusedsl/hlo/ir.hpp"

namespace fusedsl::hlo {

// A value a part reads or the group returns: the group's parameter `index`, or part `index`
// (element `tuple_index` of it when that part returns a variadic reduce's tuple).
struct part_value {
  bool from_part = false;
  std::size_t index = 0;
  std::int64_t tuple_index = -1;
  friend bool operator==(const part_value&, const part_value&) = default;
};

struct fusion_part {
  computation body;                  // single output, fused as kind=kLoop
  std::vector<part_value> operands;  // one per body parameter, in parameter order
  bool library_dot = false;          // a lone dot of two parameters, for a plain `dot` (options)
};

struct xla_cpu_options {
  // Every dot a part of its own, run as a plain `dot` outside the fusions: XLA:CPU then calls its
  // GEMM library instead of emitting the dot as a scalar loop nest in a kLoop body, at the price
  // of one fusion per matmul group (the product and its epilogue are apart).
  bool library_dots = false;
};

struct fusion_split {
  std::vector<fusion_part> parts;    // in dependency order
  std::vector<part_value> outputs;   // the group root's value, or each element of its tuple root
};

// The parts of `group` (a fusion computation: parameters, one root or a tuple root) that
// XLA:CPU compiles as kLoop fusions. One part keeps the group's name; several are
// "<name>.part<k>". Throws ir_error on a malformed computation.
FUSEDSL_DECL fusion_split split_for_xla_cpu(const computation& group,
                                            const xla_cpu_options& options = {});

}  // namespace fusedsl::hlo

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/export/impl/xla_cpu_fusion.ipp"
#endif
