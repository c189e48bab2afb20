#pragma once
// Deprecated path, kept for one release: the exporter from fusedsl's graph lives in
// fusedsl/export/ (hlo/ holds the HLO IR alone). Include "fusedsl/export/sharding.hpp".
#pragma message("fusedsl/hlo/export_sharding.hpp is deprecated: " \
                "include fusedsl/export/sharding.hpp")
#include "fusedsl/export/sharding.hpp"
