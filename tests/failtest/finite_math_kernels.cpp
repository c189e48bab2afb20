// failtest: the CPU kernels alone (without the DSL's headers) refuse -ffinite-math-only too
// (core/config.hpp, included by kernels/simd.hpp); the ok build opts out and must compile.
#ifndef FUSEDSL_FAILTEST
#define FUSEDSL_ALLOW_FINITE_MATH
#endif
#include "fusedsl/backend/cpu/kernels/attention.hpp"

float masked_value(float m) {
  return fusedsl::cpu::kernels::detail::mask_in_base2(m);
}
