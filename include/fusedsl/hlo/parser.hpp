#pragma once
// HLO text parser into the runtime IR. Reads what printer.hpp writes and what XLA / jax print
// (jax.jit(f).lower(...).as_text(dialect="hlo")): names with or without '%', optional
// computation signatures, layouts (tiling and memory-space suffixes ignored), operand shapes
// (optional), and attributes it has no use for (frontend_attributes, backend_config,
// operand_precision, ...) which are skipped. Comments /*...*/ and //... are skipped.
// Errors are parse_error with the 1-based line and column and what was expected; an opcode
// the IR has no entry for is reported by name.

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/hlo/builder.hpp"
#include "fusedsl/hlo/ir.hpp"

namespace fusedsl::hlo {

class parse_error : public std::runtime_error {
 public:
  parse_error(std::size_t line, std::size_t column, const std::string& what)
      : std::runtime_error(std::to_string(line) + ":" + std::to_string(column) + ": " + what),
        line_(line),
        column_(column) {}
  std::size_t line() const { return line_; }
  std::size_t column() const { return column_; }

 private:
  std::size_t line_, column_;
};

// Parses a whole HloModule. Throws parse_error.
FUSEDSL_DECL module parse_module(std::string_view text);

// Parses one shape, e.g. "f32[2,3]{1,0}". Throws parse_error.
FUSEDSL_DECL shape parse_shape(std::string_view text);

}  // namespace fusedsl::hlo

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/hlo/impl/parser.ipp"
#endif
