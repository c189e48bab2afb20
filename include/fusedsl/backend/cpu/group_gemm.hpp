#pragma once
// A GEMM group's kernel (descriptor D, target Arch): per part, the packed GEMM with the group's
// epilogue applied to the tile in registers, operands read through their layout ops as strided
// views (A of another dtype widened into the workspace), B from the weight's panels packed at
// bind (f32, or bf16 or int8 widened as loaded) or packed from its value at each call; a part
// with a pair (plan::gemm_part::pair, SwiGLU's gate and up) runs both products in one pass over
// the two weights packed side by side.
#include <cstdint>
#include <type_traits>

#include "fusedsl/backend/cpu/executor_base.hpp"
#include "fusedsl/backend/cpu/kernels/codegen.hpp"
#include "fusedsl/backend/cpu/values.hpp"
#include "fusedsl/backend/cpu/weight_packing.hpp"

namespace fusedsl::cpu::detail {

template <class D>
constexpr const graph::node& node_of(int i) {
  return D::nodes[std::size_t(i)];
}

// The part with A as a contiguous row-major copy of its logical shape (what view_to_f32 writes).
template <class D>
constexpr plan::gemm_part widened_a_part(plan::gemm_part p) {
  const dims& s = p.a.shape;
  const int ra = s.rank, ro = p.batch_rank + 2;
  p.trans_a = node_of<D>(p.matmul).trans_a;
  p.lda = s[ra - 1];
  for (int c = 0; c < p.batch_rank; ++c) {
    const int ca = c - (ro - ra);
    p.a_batch_stride[std::size_t(c)] = ca >= 0 && s[ca] != 1 ? s.stride(ca) : 0;
  }
  return p;
}

// One batch of part P as a GEMM pair: both products in one pass over their weights' panels.
template <class D, int P, class Arch, class OutT>
void run_gemm_pair(executor_base& ex, const plan::gemm_part& q, const packed_weight& pre,
                   const float* a, OutT* c, float* ws, kernels::thread_pool* pool) {
  static constexpr plan::gemm_part p = D::value.gemm[std::size_t(P)];
  static_assert(p.folded || p.batch.size() == 1, "a GEMM pair has no batch loop");
  const kernels::gen::gemm_pair_epilogue<D, P> ep2{ex.values()};
  if constexpr (uses_bf16_panels<Arch>(D::nodes.data(), p)) {
    const kernels::packed_b<Arch, kernels::bf16_bits> bp{
        static_cast<const kernels::bf16_bits*>(pre.panels), p.k, 2 * p.n};
    kernels::gemm_pair_with<Arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep2, ws, pool);
  } else if constexpr (uses_s8_panels<Arch>(D::nodes.data(), p)) {
    const kernels::packed_b<Arch, std::int8_t> bp{static_cast<const std::int8_t*>(pre.panels), p.k,
                                                  2 * p.n};
    kernels::gemm_pair_with<Arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep2, ws, pool);
  } else {
    const kernels::packed_b<Arch> bp{static_cast<const float*>(pre.panels), p.k, 2 * p.n};
    kernels::gemm_pair_with<Arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep2, ws, pool);
  }
  ex.pair_ran();
}

// One batch of part P with B from a bound weight (pre) or packed from its value now.
template <class D, int P, class Arch, class OutT>
void run_gemm_batch(executor_base& ex, const plan::gemm_part& q, const packed_weight* pre,
                    std::int64_t b, std::int64_t b_off, const float* a, OutT* c, float* ws,
                    kernels::thread_pool* pool) {
  static constexpr plan::gemm_part p = D::value.gemm[std::size_t(P)];
  constexpr dtype b_type = node_of<D>(p.b.base).type;
  const kernels::gen::gemm_epilogue<D, P> ep{ex.values(), b};
  // Only a build with the AMX tiles instantiates their driver: elsewhere amx_ is false, so no
  // weight is packed for them.
#if FUSEDSL_CPU_AMX
  if (pre && pre->amx) {
    kernels::gemm_amx_with(p.m, p.n, p.k, a, q.lda, q.trans_a,
                           kernels::packed_b_bf16{pre->amx_data, p.k, p.n}, c, p.n, ep,
                           reinterpret_cast<kernels::bf16_bits*>(ws), pool);
    return;
  }
#endif
  // A compile-time choice: the bf16- and int8-panel micro-kernels are instantiated only for the
  // products that take them (a weight's B, so `pre` is set).
  if constexpr (uses_bf16_panels<Arch>(D::nodes.data(), p)) {
    const kernels::packed_b<Arch, kernels::bf16_bits> bp{
        static_cast<const kernels::bf16_bits*>(pre->panels), p.k, p.n};
    kernels::gemm_with<Arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep, ws, pool);
    return;
  } else if constexpr (uses_s8_panels<Arch>(D::nodes.data(), p)) {
    const kernels::packed_b<Arch, std::int8_t> bp{static_cast<const std::int8_t*>(pre->panels), p.k,
                                                  p.n};
    kernels::gemm_with<Arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep, ws, pool);
    return;
  }
  kernels::packed_b<Arch> bp;
  float* work = ws;
  if constexpr (p.b_param) {                                        // `pre` is set
    const std::size_t slice = p.b_slices > 1 ? std::size_t(b) : 0;  // a batched weight's slice b
    bp = kernels::packed_b<Arch>{
        static_cast<const float*>(pre->panels) + slice * packed_slice_floats<Arch>(p.k, p.n), p.k,
        p.n};
  } else {
    static_assert(b_type == dtype::f32 || b_type == dtype::bf16,
                  "cpu::executor: a matmul's B must be f32 or bf16 (cast it), or an int8 "
                  "parameter");
    using BT = std::conditional_t<b_type == dtype::bf16, kernels::bf16_bits, float>;
    bp = kernels::pack_b_strided<Arch>(
        p.k, p.n, static_cast<const BT*>(ex.values()[std::size_t(p.b.base)]) + b_off, p.b_ks,
        p.b_ns, ws);
    work = ws + kernels::packed_b_floats<Arch>(p.k, p.n) + 16;
  }
  kernels::gemm_with<Arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep, work, pool);
}

// Part P of a GEMM group at layer `it`: per batch, A and C offset, B from its pack or packed now.
template <class D, int P, class Arch>
void run_gemm(executor_base& ex, int it) {
  static constexpr plan::gemm_part p = D::value.gemm[std::size_t(P)];
  constexpr dtype out_type = node_of<D>(p.out).type;
  static_assert(out_type == dtype::f32 || out_type == dtype::bf16,
                "cpu::executor: a matmul group writes f32 or bf16");
  using OutT = std::conditional_t<out_type == dtype::bf16, kernels::bf16_bits, float>;
  const packed_weight* pre = nullptr;
  if constexpr (p.b_param) pre = &ex.packs().ready(D::index, P, it);
  float* ws = ex.scratch();
  const std::int64_t batches = p.folded ? 1 : p.batch.size();
  kernels::thread_pool* pool = ex.pool_for(double(p.m) * double(p.n) * double(p.k) *
                                           double(batches) * (pre && pre->pair ? 2.0 : 1.0));
  // A of another dtype: widened into the workspace, in its logical row-major order.
  constexpr bool widen_a = node_of<D>(p.a.base).type != dtype::f32;
  static constexpr plan::gemm_part q = widen_a ? widened_a_part<D>(p) : p;
  const float* a_base = static_cast<const float*>(ex.values()[std::size_t(p.a.base)]);
  if constexpr (widen_a) {
    view_to_f32(node_of<D>(p.a.base).type, ex.values()[std::size_t(p.a.base)], p.a, ws);
    a_base = ws;
    ws += p.a.shape.size() + 16;
  }
  for (std::int64_t b = 0; b < batches; ++b) {
    const bool batched = !p.folded && p.batch_rank > 0;
    const std::int64_t a_off =
        (widen_a ? 0 : p.a.offset) + (batched ? batch_offset(p, q.a_batch_stride, b) : 0);
    const std::int64_t b_off = p.b.offset + (batched ? batch_offset(p, p.b_batch_stride, b) : 0);
    const float* a = a_base + a_off;
    OutT* c = static_cast<OutT*>(ex.values()[std::size_t(p.out)]) + (p.folded ? 0 : b * p.m * p.n);
    if constexpr (can_pair(p))
      if (pre->pair) {
        run_gemm_pair<D, P, Arch>(ex, q, *pre, a, c, ws, pool);
        continue;
      }
    run_gemm_batch<D, P, Arch>(ex, q, pre, b, b_off, a, c, ws, pool);
  }
}

}  // namespace fusedsl::cpu::detail
