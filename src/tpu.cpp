// fusedsl::compiled, the TPU-style backend: the flat graph, the scheduler, the pipeline simulation,
// the cost summary and report, the executor and its inputs, compiled once
// (core/compiled_mode.hpp). Built with FUSEDSL_SEPARATE_COMPILATION, like every unit that links
// the library.
#if !defined(FUSEDSL_SEPARATE_COMPILATION)
#error "src/tpu.cpp is the compiled mode's library: build it with FUSEDSL_SEPARATE_COMPILATION"
#endif

#include "fusedsl/tpu/impl/cost.ipp"
#include "fusedsl/tpu/impl/execute.ipp"
#include "fusedsl/tpu/impl/graph.ipp"
#include "fusedsl/tpu/impl/inputs.ipp"
#include "fusedsl/tpu/impl/pipeline.ipp"
#include "fusedsl/tpu/impl/report.ipp"
#include "fusedsl/tpu/impl/schedule.ipp"
