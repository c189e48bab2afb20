#pragma once
// The runtime HLO IR: a module of computations, each a list of instructions in definition order
// whose operands are indices into the same list. Plain values with operator==, so a parsed module
// can be compared with the one that was printed. The exporter builds it (see builder.hpp); the
// parser (parser.hpp) reads HLO text into it; printer.hpp and stablehlo.hpp write it out.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/hlo/escape.hpp"
#include "fusedsl/hlo/literal.hpp"
#include "fusedsl/hlo/opcode.hpp"
#include "fusedsl/hlo/shape.hpp"
#include "fusedsl/hlo/sharding.hpp"

namespace fusedsl::hlo {

// Index of an instruction within its computation.
using instruction_id = std::size_t;

struct dot_dimension_numbers {
  std::vector<std::int64_t> lhs_batch, lhs_contracting, rhs_batch, rhs_contracting;
  friend bool operator==(const dot_dimension_numbers&, const dot_dimension_numbers&) = default;
};

// One dimension of a slice: [start:limit:stride].
struct slice_dim {
  std::int64_t start = 0, limit = 0, stride = 1;
  friend bool operator==(const slice_dim&, const slice_dim&) = default;
};

// gather's dimension numbers (XLA's GatherDimensionNumbers; operation semantics, "Gather").
struct gather_dimension_numbers {
  std::vector<std::int64_t> offset_dims;            // result dims holding the slice's dims
  std::vector<std::int64_t> collapsed_slice_dims;   // operand dims of slice size 1 dropped
  std::vector<std::int64_t> start_index_map;        // index vector entry k -> operand dim
  std::vector<std::int64_t> operand_batching_dims;  // operand dims paired with index batch dims
  std::vector<std::int64_t> start_indices_batching_dims;
  std::int64_t index_vector_dim = 0;  // the indices dim holding index vectors (== rank: none)
  friend bool operator==(const gather_dimension_numbers&,
                         const gather_dimension_numbers&) = default;
};

// One instruction. Only the fields its opcode uses are set; the rest keep their defaults.
struct instruction {
  std::string name;
  hlo::opcode opcode = hlo::opcode::parameter;
  hlo::shape shape;
  std::vector<instruction_id> operands;

  std::int64_t parameter_number = -1;              // parameter
  std::optional<hlo::literal> literal;             // constant
  std::vector<std::int64_t> dimensions;            // broadcast, reduce, transpose, concatenate
  std::optional<dot_dimension_numbers> dot;        // dot
  std::optional<comparison_direction> direction;   // compare
  std::vector<slice_dim> slice;                    // slice
  std::optional<gather_dimension_numbers> gather;  // gather
  std::vector<std::int64_t> slice_sizes;           // gather: slice_sizes=
  bool indices_are_sorted = false;                 // gather
  std::vector<std::int64_t> dynamic_slice_sizes;   // dynamic-slice
  std::int64_t iota_dimension = -1;                // iota
  std::int64_t tuple_index = -1;                   // get-tuple-element
  std::string called_computation;                  // reduce/call: to_apply=, fusion: calls=
  std::optional<hlo::fusion_kind> fusion_kind;     // fusion
  std::optional<hlo::sharding> sharding;           // sharding={...}
  std::string op_name;                             // metadata={op_name="..."}

  friend bool operator==(const instruction&, const instruction&) = default;
};

struct computation {
  std::string name;
  std::vector<instruction> instructions;
  instruction_id root = 0;

  const instruction& root_instruction() const {
    if (root >= instructions.size()) throw ir_error("computation " + name + ": has no root");
    return instructions[root];
  }
  // Parameters ordered by parameter_number.
  std::vector<instruction_id> parameters() const {
    std::vector<instruction_id> ps;
    for (instruction_id i = 0; i < instructions.size(); ++i)
      if (instructions[i].opcode == opcode::parameter) ps.push_back(i);
    std::sort(ps.begin(), ps.end(), [&](instruction_id a, instruction_id b) {
      return instructions[a].parameter_number < instructions[b].parameter_number;
    });
    return ps;
  }
  std::optional<instruction_id> find(std::string_view instruction_name) const {
    for (instruction_id i = 0; i < instructions.size(); ++i)
      if (instructions[i].name == instruction_name) return i;
    return std::nullopt;
  }

  friend bool operator==(const computation&, const computation&) = default;
};

// One entry of a module's input_output_alias: output (tuple index path) `output_index` may take
// the buffer of entry parameter `parameter_number` (at `parameter_index`), as XLA's
// HloInputOutputAliasConfig (what jax writes for donate_argnums).
struct io_alias {
  std::vector<std::int64_t> output_index;
  std::int64_t parameter_number = 0;
  std::vector<std::int64_t> parameter_index;
  bool must_alias = false;  // "must-alias"; otherwise "may-alias"
  friend bool operator==(const io_alias&, const io_alias&) = default;
};

// Computations are kept callees-first (as XLA prints them); `entry` names the entry computation.
struct module {
  std::string name;
  std::vector<hlo::computation> computations;
  std::string entry;
  std::vector<io_alias> input_output_alias;  // sorted by output_index (XLA prints them so)

  const hlo::computation* find(std::string_view computation_name) const {
    for (const auto& c : computations)
      if (c.name == computation_name) return &c;
    return nullptr;
  }
  const hlo::computation& get(std::string_view computation_name) const {
    if (const auto* c = find(computation_name)) return *c;
    throw ir_error("module " + name + ": no computation named '" + std::string(computation_name) +
                   "'");
  }
  const hlo::computation& entry_computation() const { return get(entry); }

  // Appends a computation that later ones (and the entry) may call; returns its name (a copy:
  // references into `computations` do not survive the next append).
  std::string add_computation(hlo::computation c) {
    if (find(c.name)) throw ir_error("module " + name + ": duplicate computation " + c.name);
    computations.push_back(std::move(c));
    return computations.back().name;
  }
  // Appends the entry computation.
  void set_entry(hlo::computation c) {
    entry = c.name;
    add_computation(std::move(c));
  }

  friend bool operator==(const module&, const module&) = default;
};

// The shape at `index` inside s (a tuple index path), or nullptr.
inline const shape* subshape(const shape& s, const std::vector<std::int64_t>& index) {
  const shape* at = &s;
  for (std::int64_t k : index) {
    if (!at->is_tuple() || k < 0 || k >= static_cast<std::int64_t>(at->elements.size()))
      return nullptr;
    at = &at->elements[static_cast<std::size_t>(k)];
  }
  return at;
}

inline std::string index_text(const std::vector<std::int64_t>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "}";
}

// input_output_alias: each output index names an array of the entry's result, each parameter
// index one of an entry parameter of the same shape; no output and no parameter buffer is
// aliased twice (XLA's HloInputOutputAliasConfig checks the same).
FUSEDSL_DECL void verify_aliases(const module& m);

// Structural checks the printer and parser rely on: valid unique names, operands defined before
// use, a root, called computations present and defined earlier, parameter numbers 0..n-1.
// Throws ir_error naming the computation and instruction at fault.
FUSEDSL_DECL void verify(const module& m);

}  // namespace fusedsl::hlo

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/hlo/impl/ir.ipp"
#endif
