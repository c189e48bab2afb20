#pragma once
// StableHLO (MLIR text) printer for the runtime IR. Every op is written in MLIR's generic form
//   %dot = "stablehlo.dot_general"(%x, %w) {dot_dimension_numbers = #stablehlo.dot<...>}
//          : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// which is unambiguous and accepted by XLA's StableHLO parser (jaxlib 0.10.2). The entry becomes
// `func.func @main`; fusion and call targets become private functions called with func.call;
// reduce bodies are inlined as regions; a tuple root of the entry becomes several results;
// shardings become `mhlo.sharding` string attributes (as jax writes them); input_output_alias
// entries become `tf.aliasing_output` argument attributes (jax's donation). A variadic reduce
// has several results (%r:2, read as %r#0, %r#1; a stablehlo.tuple of them where a tuple value
// is needed). Layouts are not
// represented in StableHLO and are dropped; `copy` is an alias of its operand, or, when it carries
// a sharding, a custom_call @Sharding (jax's sharding constraint). erf is written as
// chlo.erf (StableHLO has no erf op; XLA accepts CHLO).

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/hlo/ir.hpp"
#include "fusedsl/hlo/printer.hpp"

namespace fusedsl::hlo {

namespace detail {
// One element of a dense<> attribute. MLIR float literals need a '.', so "1" -> "1.0" and
// "1e-07" -> "1.0e-07"; non-finite values are written as hex bit patterns.
FUSEDSL_DECL std::string mlir_value(element_type t, double v, bool hex);
}  // namespace detail

// The module as StableHLO MLIR text (see the comment at the top of this file).
FUSEDSL_DECL std::string to_stablehlo(const module& m);

}  // namespace fusedsl::hlo

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/hlo/impl/stablehlo.ipp"
#endif
