// fusedsl::compiled, the HLO part: the IR's verifier, the printer, the parser, the StableHLO
// writer and the exporter's core (over a graph_view), compiled once (core/compiled_mode.hpp).
// Built with FUSEDSL_SEPARATE_COMPILATION, like every unit that links the library.
#if !defined(FUSEDSL_SEPARATE_COMPILATION)
#error "src/hlo.cpp is the compiled mode's library: build it with FUSEDSL_SEPARATE_COMPILATION"
#endif

#include "fusedsl/export/impl/export.ipp"
#include "fusedsl/export/impl/sharding.ipp"
#include "fusedsl/export/impl/xla_cpu_fusion.ipp"
#include "fusedsl/hlo/impl/ir.ipp"
#include "fusedsl/hlo/impl/parser.ipp"
#include "fusedsl/hlo/impl/printer.ipp"
#include "fusedsl/hlo/impl/stablehlo.ipp"
