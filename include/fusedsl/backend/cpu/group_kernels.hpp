#pragma once
// Each fusion group's generated kernel, by its descriptor D (D::value: the plan::kernel_desc,
// D::nodes: the graph's nodes, D::index: the group), on target Arch:
//   loop, reduce  the group's ops unrolled over xsimd batches, no intermediate in memory;
//   row           the row kernels with a generated prologue and epilogue;
//   gemm          the packed GEMM with the group's epilogue applied to the tile in registers,
//                 operands read through their layout ops as strided views, a part with a pair
//                 run as one GEMM over both weights;
//   attention     flash attention with the group's score ops generated into it;
//   update        dynamic_update_slice.
#include <utility>

#include "fusedsl/backend/cpu/executor_base.hpp"
#include "fusedsl/backend/cpu/group_attention.hpp"
#include "fusedsl/backend/cpu/group_gemm.hpp"
#include "fusedsl/backend/cpu/kernels/codegen.hpp"

namespace fusedsl::cpu {

// Group D's kernel at layer `it`.
template <class D, class Arch>
void run_group_kernel(executor_base& ex, int it) {
  constexpr const plan::kernel_desc& d = D::value;
  constexpr double elements = [] {
    double e = 1;
    for (int t = 0; t < D::value.rank; ++t) e *= double(D::value.extent[std::size_t(t)]);
    return e;
  }();
  if constexpr (d.kind == plan::kernel_kind::loop || d.kind == plan::kernel_kind::reduce) {
    constexpr double work = elements * double(d.c.n_ins > 0 ? d.c.n_ins : 1);
    if constexpr (d.kind == plan::kernel_kind::loop)
      kernels::gen::run_loop<D, Arch>(ex.values(), ex.pool_for(work));
    else
      kernels::gen::run_reduce<D, Arch>(ex.values(), ex.pool_for(work));
  } else if constexpr (d.kind == plan::kernel_kind::row) {
    kernels::gen::run_row<D, Arch>(ex.values(), ex.scratch(), ex.pool_for(elements * 8.0));
  } else if constexpr (d.kind == plan::kernel_kind::gemm) {
    // (clang-format 14 would put the call's argument list on a line of its own)
    // clang-format off
    [&]<int... P>(std::integer_sequence<int, P...>) {
      (detail::run_gemm<D, P, Arch>(ex, it), ...);
    }(std::make_integer_sequence<int, D::value.n_gemm>{});
    // clang-format on
  } else if constexpr (d.kind == plan::kernel_kind::attention) {
    detail::run_attention<D, Arch>(ex);
  } else if constexpr (d.kind == plan::kernel_kind::update) {
    kernels::gen::run_update<D>(ex.values());
  }
}

}  // namespace fusedsl::cpu
