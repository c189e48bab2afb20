#pragma once
// Deprecated path, kept for one release: the exporter from fusedsl's graph lives in
// fusedsl/export/ (hlo/ holds the HLO IR alone). Include "fusedsl/export/xla_cpu_fusion.hpp".
#pragma message("fusedsl/hlo/xla_cpu_fusion.hpp is deprecated: " \
                "include fusedsl/export/xla_cpu_fusion.hpp")
#include "fusedsl/export/xla_cpu_fusion.hpp"
