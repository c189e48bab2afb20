#pragma once
// Computes a module's results by following its schedule: each matmul tile by tile in the
// schedule's block order (bf16 operands exactly as stored, f32 accumulation, as the MXU does;
// f32 operands multiplied and accumulated in f32), the fused epilogue applied to each finished
// output tile, vector and row-copy kernels chunk by chunk (gather, dynamic-slice and
// dynamic-update-slice by hlo/indexing.hpp's rules: starts clamped). Values are held as doubles
// rounded to their HLO element type after every op; a reduce whose to_apply is not one binary op
// (argmax's comparator) runs that computation on scalars for each element.
// GCC 12 reports false maybe-uninitialized warnings inside Eigen's AVX-512 GEMM kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/hlo/indexing.hpp"
#include "fusedsl/hlo/ir.hpp"
#include "fusedsl/hlo/literal.hpp"
#include "fusedsl/tpu/error.hpp"
#include "fusedsl/tpu/schedule.hpp"

namespace fusedsl::tpu {

// An array (shape + row-major data) or a tuple of values.
struct value {
  hlo::shape shape;
  std::vector<double> data;
  std::vector<value> elements;  // tuples only

  static value zeros(const hlo::shape& s) {
    value v;
    v.shape = s;
    if (!s.is_tuple()) v.data.assign(std::size_t(s.element_count()), 0.0);
    return v;
  }
};

// Runs `s` on `inputs` and returns the entry root's value.
FUSEDSL_DECL value execute(const schedule& s, const std::vector<value>& inputs);

}  // namespace fusedsl::tpu

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/tpu/impl/execute.ipp"
#endif
