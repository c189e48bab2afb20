#pragma once
// Human-readable summary and JSON report of a schedule's cost.
#include <cstdio>
#include <string>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/tpu/cost.hpp"
#include "fusedsl/tpu/json.hpp"
#include "fusedsl/tpu/schedule.hpp"

namespace fusedsl::tpu {

FUSEDSL_DECL std::string text_summary(const schedule& s, const cost_summary& c);

// JSON report: totals, chip, one entry per kernel and one per HLO op (with the kernel it ran in).
FUSEDSL_DECL std::string json_report(const schedule& s, const cost_summary& c);

}  // namespace fusedsl::tpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/tpu/impl/report.ipp"
#endif
