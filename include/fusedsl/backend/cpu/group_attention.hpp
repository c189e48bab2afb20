#pragma once
// An attention group's kernel (descriptor D, target Arch): flash attention (online softmax,
// causal blocks skipped, grouped heads, batch) with the group's score ops (masks of any kind)
// generated into it, no [L, L] buffer; on the AMX tiles when the executor opted in and the group
// has no score ops.
#include <cstdint>

#include "fusedsl/backend/cpu/executor_base.hpp"
#include "fusedsl/backend/cpu/kernels/attention.hpp"
#include "fusedsl/backend/cpu/kernels/attention_amx.hpp"
#include "fusedsl/backend/cpu/kernels/codegen.hpp"
#include "fusedsl/backend/cpu/values.hpp"

namespace fusedsl::cpu::detail {

// Q, K, V or O of another dtype go through contiguous f32 copies in the workspace (`ws`,
// advanced past them), except bf16 K and V of a few queries (a decode step over a bf16 KV cache,
// `kv_bf16`): the decode path reads them in place, only the keys it attends over.
struct attention_operands {
  void** val;
  const graph::node* nodes;
  float* ws;
  bool kv_bf16;

  float* operand(const plan::strided_view& v, bool in, bool kv, plan::strided_view& used) {
    used = v;
    const dtype t = nodes[v.base].type;
    if (t == dtype::f32) return static_cast<float*>(val[std::size_t(v.base)]);
    if (kv_bf16 && kv) return nullptr;
    used = plan::contiguous_view(v.base, v.shape);
    float* copy = ws;
    ws += v.shape.size() + 16;
    if (in) view_to_f32(t, val[std::size_t(v.base)], v, copy);
    return copy;
  }
};

// The kernel's arguments for batch b: each operand's pointer and head and row strides.
template <class D, bool KvBf16>
kernels::attention_args attention_batch_args(void** val, std::int64_t b, const float* qp,
                                             const float* kp, const float* vp, float* op,
                                             const plan::strided_view& qv,
                                             const plan::strided_view& kv,
                                             const plan::strided_view& vv,
                                             const plan::strided_view& ov) {
  static constexpr plan::attention_part a = D::value.att;
  constexpr int r = a.q.shape.rank;
  std::int64_t qo = qv.offset, ko = kv.offset, vo = vv.offset, oo = ov.offset, rest = b;
  for (int c = a.batch_rank - 1; c >= 0; --c) {
    const std::int64_t ix = rest % a.batch[c];
    rest /= a.batch[c];
    qo += ix * qv.stride[std::size_t(c)];
    ko += ix * kv.stride[std::size_t(c)];
    vo += ix * vv.stride[std::size_t(c)];
    oo += ix * ov.stride[std::size_t(c)];
  }
  kernels::attention_args args;
  args.q = qp + qo;
  args.q_head_stride = qv.stride[std::size_t(r - 3)];
  args.q_row_stride = qv.stride[std::size_t(r - 2)];
  if constexpr (KvBf16) {
    args.k_bf16 = static_cast<const kernels::bf16_bits*>(val[std::size_t(a.k.base)]) + ko;
    args.v_bf16 = static_cast<const kernels::bf16_bits*>(val[std::size_t(a.v.base)]) + vo;
  } else {
    args.k = kp + ko;
    args.v = vp + vo;
  }
  args.k_head_stride = kv.stride[std::size_t(r - 3)];
  args.k_row_stride = kv.stride[std::size_t(r - 2)];
  args.v_head_stride = vv.stride[std::size_t(r - 3)];
  args.v_row_stride = vv.stride[std::size_t(r - 2)];
  args.o = op + oo;
  args.o_head_stride = ov.stride[std::size_t(r - 3)];
  args.o_row_stride = ov.stride[std::size_t(r - 2)];
  args.scale = a.scale;
  args.causal = a.causal;
  return args;
}

template <class D, class Arch>
void run_attention(executor_base& ex) {
  static constexpr plan::attention_part a = D::value.att;
  const graph::node* nodes = D::nodes.data();
  kernels::attention_shape sh;
  sh.num_heads = a.heads;
  sh.seq_q = a.seq_q;
  sh.head_dim = a.head_dim;
  sh.num_kv_heads = a.kv_heads;
  sh.seq_kv = a.seq_kv;
  kernels::thread_pool* pool = ex.pool_for(double(a.heads) * double(a.seq_q) * double(a.seq_kv) *
                                           double(a.head_dim) * 2 * double(a.batch.size()));
  static constexpr bool kv_bf16 = D::nodes[std::size_t(a.k.base)].type == dtype::bf16 &&
                                  D::nodes[std::size_t(a.v.base)].type == dtype::bf16 &&
                                  a.seq_q <= kernels::decode_max_queries;
  void** val = ex.values();
  attention_operands ops{val, nodes, ex.scratch(), kv_bf16};
  plan::strided_view qv, kv, vv, ov;
  const float* qp = ops.operand(a.q, true, false, qv);
  const float* kp = ops.operand(a.k, true, true, kv);
  const float* vp = ops.operand(a.v, true, true, vv);
  float* op = ops.operand(a.o, false, false, ov);
  float* ws = ops.ws;
  for (std::int64_t b = 0; b < a.batch.size(); ++b) {
    if constexpr (a.kv_len >= 0) {  // keys past a run-time length are never read
      const std::int32_t* len = static_cast<const std::int32_t*>(val[std::size_t(a.kv_len)]);
      const std::int64_t l = std::int64_t(len[a.kv_len_per_batch ? b : 0]) + a.kv_len_offset;
      sh.seq_kv = l < 0 ? 0 : l > a.seq_kv ? a.seq_kv : l;
    }
    const kernels::attention_args args =
        attention_batch_args<D, kv_bf16>(val, b, qp, kp, vp, op, qv, kv, vv, ov);
    // Only the paths this group's shapes can take are compiled (seq_q is fixed, seq_kv at most
    // a.seq_kv).
    constexpr kernels::attention_paths paths = kernels::attention_paths_for(a.seq_q, a.seq_kv);
    constexpr auto automatic = kernels::attention_path::automatic;
    using mod_t = kernels::gen::score_mod<D, Arch>;
    if constexpr (mod_t::active) {
      kernels::flash_attention<Arch, mod_t, paths>(sh, args, ws, pool, automatic, mod_t{val, b});
    } else {
#if FUSEDSL_CPU_AMX
      if (ex.amx_attention() && sh.seq_q > kernels::decode_max_queries) {  // decode: f32 products
        kernels::flash_attention_amx<Arch>(sh, args, reinterpret_cast<kernels::bf16_bits*>(ws),
                                           pool);
        continue;
      }
#endif
      kernels::flash_attention<Arch, kernels::no_score_mod, paths>(sh, args, ws, pool);
    }
  }
  if (nodes[a.o.base].type != dtype::f32)
    f32_to_view(nodes[a.o.base].type, op, val[std::size_t(a.o.base)], a.o);
}

}  // namespace fusedsl::cpu::detail
