#pragma once
// Deprecated path, kept for one release: the exporter from fusedsl's graph lives in
// fusedsl/export/ (hlo/ holds the HLO IR alone). Include "fusedsl/export/export.hpp".
#pragma message("fusedsl/hlo/export.hpp is deprecated: include fusedsl/export/export.hpp")
#include "fusedsl/export/export.hpp"
