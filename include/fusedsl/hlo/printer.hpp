#pragma once
// HLO text printer: the format XLA's HLO parser reads (and XLA itself prints), e.g.
//   HloModule m
//
//   %add {
//     %lhs = f32[] parameter(0)
//     ...
//   }
//
//   ENTRY %main {
//     %x = f32[2,3]{1,0} parameter(0)
//     ROOT %r = f32[2]{0} reduce(f32[2,3]{1,0} %x, f32[] %zero), dimensions={1}, to_apply=%add
//   }
// Output is deterministic: the same module always prints to the same bytes. Names are printed
// with a '%' prefix (so no name can be mistaken for a keyword or a type) and escaped with
// escape_identifier if they are not valid identifiers.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/hlo/ir.hpp"

namespace fusedsl::hlo {

// "f32[2,3]{1,0}", "f32[]", "(f32[2]{0}, s32[])".
FUSEDSL_DECL std::string to_text(const shape& s);

// One value of a floating, pred or integer type, in the spelling XLA's parser reads
// (shortest text that round-trips; inf, -inf, nan).
FUSEDSL_DECL std::string literal_value_text(element_type t, double v);

// "1", "{1, 2}", "{ {1, 2}, {3, 4} }".
FUSEDSL_DECL std::string to_text(const literal& l);

FUSEDSL_DECL std::string to_text(const sharding& s);

// One instruction line, without indentation or "ROOT".
FUSEDSL_DECL std::string to_text(const computation& c, const instruction& in);

FUSEDSL_DECL std::string to_text(const computation& c, bool entry = false);

// The whole module; computations in their stored order (callees first), entry marked ENTRY.
FUSEDSL_DECL std::string to_text(const module& m);

}  // namespace fusedsl::hlo

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/hlo/impl/printer.ipp"
#endif
