#pragma once
// Values of any dtype as f32 and back, element by element, for the paths that compute in f32
// whatever the dtype (the interpreter; GEMM and attention operands of another dtype, widened
// into the workspace): bf16 and f16 round to nearest even, i32 truncates toward zero and
// saturates (NaN to 0), bool is 0 or 1, as the generated kernels convert (kernels/codegen.hpp).
#include <cstdint>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/core/dtype.hpp"
#include "fusedsl/plan/lower.hpp"

namespace fusedsl::cpu {

// n elements of dtype t at src as f32 at dst, and back.
FUSEDSL_DECL void load_to_f32(dtype t, const void* src, float* dst, std::int64_t n);
FUSEDSL_DECL void store_from_f32(dtype t, const float* src, void* dst, std::int64_t n);
// The elements of strided view v of a value of dtype t at `base`, in row-major order over v's
// shape, as contiguous f32 at dst; and back.
FUSEDSL_DECL void view_to_f32(dtype t, const void* base, const plan::strided_view& v, float* dst);
FUSEDSL_DECL void f32_to_view(dtype t, const float* src, void* base, const plan::strided_view& v);

}  // namespace fusedsl::cpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/backend/cpu/impl/values.ipp"
#endif
