// fusedsl::compiled, the CPU executor's part that is the same for every program: binding by name
// (shared with the CUDA executor), values of any dtype as f32, the packed weights' storage, and
// executor_base (the arena, workspace and states, running the groups, the interpreter), compiled
// once (core/compiled_mode.hpp). Built with FUSEDSL_SEPARATE_COMPILATION, like every unit that
// links the library.
#if !defined(FUSEDSL_SEPARATE_COMPILATION)
#error "src/cpu.cpp is the compiled mode's library: build it with FUSEDSL_SEPARATE_COMPILATION"
#endif

#include "fusedsl/backend/cpu/impl/executor_base.ipp"
#include "fusedsl/backend/cpu/impl/values.ipp"
#include "fusedsl/backend/cpu/impl/weight_packs.ipp"
#include "fusedsl/backend/impl/bindings.ipp"
