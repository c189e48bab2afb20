#pragma once
// How an executor is set up for the target's kernels (templates on the target, not on the
// program): the per-thread workspace each kind of kernel needs, which products keep their B packed
// from a bound weight and in which panel layout (f32, bf16, AMX tiles, a GEMM pair's two weights
// side by side), and the packing of a weight when it is bound.
#include <algorithm>
#include <array>
#include <cstdint>

#include "fusedsl/backend/cpu/executor_base.hpp"
#include "fusedsl/backend/cpu/kernels/amx.hpp"
#include "fusedsl/backend/cpu/kernels/attention.hpp"
#include "fusedsl/backend/cpu/kernels/attention_amx.hpp"
#include "fusedsl/backend/cpu/kernels/gemm.hpp"

namespace fusedsl::cpu {

// A product whose B is a bf16 parameter: what the AMX tiles take.
constexpr bool uses_amx_tiles(const graph::node* nodes, const plan::gemm_part& p) {
  return p.b_param && p.b_slices == 1 && nodes[p.b.base].type == dtype::bf16;
}
// The f32 panels of one batch slice of a batched weight (plan::gemm_part::b_slices), padded to
// keep every slice's panels 64-byte aligned.
template <class Arch>
constexpr std::size_t packed_slice_floats(std::int64_t k, std::int64_t n) {
  return (kernels::packed_b_floats<Arch>(k, n) + 15) / 16 * 16;
}
// The element offset, along `stride` (A's or B's batch strides), of batch index `index` of part p
// (row-major over the output's batch axes).
constexpr std::int64_t batch_offset(const plan::gemm_part& p,
                                    const std::array<std::int64_t, max_rank>& stride,
                                    std::int64_t index) {
  std::int64_t off = 0;
  for (int c = p.batch_rank - 1; c >= 0; --c) {
    off += index % p.batch[c] * stride[std::size_t(c)];
    index /= p.batch[c];
  }
  return off;
}
// A part with a pair runs it as one GEMM unless pairs are off, its k is long enough to be cut
// into blocks (the pair's partial sums would need both products' columns), or its weights go
// to the AMX tiles.
constexpr bool can_pair(const plan::gemm_part& p) {
  return p.pair >= 0 && p.k <= kernels::detail::k_block_threshold;
}
// A bf16 weight of a product with at most one register tile of rows (a decode step) stays bf16
// in its panels (kernels::pack_b_bf16_panels): the product is as long as reading B takes, and
// widened f32 panels would read twice the bytes. Only where kernels::load_b widens bf16 in
// registers; elsewhere the panels are f32.
template <class Arch>
constexpr bool uses_bf16_panels(const graph::node* nodes, const plan::gemm_part& p) {
  return p.b_param && p.b_slices == 1 && nodes[p.b.base].type == dtype::bf16 &&
         p.m <= kernels::gemm_tile<Arch>::mr && kernels::widens_bf16_in_registers<Arch>;
}
// The same for an int8 weight (a quarter of f32's bytes): int8 panels widened in registers where
// a product has at most one register tile of rows; f32 panels, widened once at bind, elsewhere.
template <class Arch>
constexpr bool uses_s8_panels(const graph::node* nodes, const plan::gemm_part& p) {
  return p.b_param && p.b_slices == 1 && nodes[p.b.base].type == dtype::i8 &&
         p.m <= kernels::gemm_tile<Arch>::mr && kernels::widens_bf16_in_registers<Arch>;
}
// Elements of bf16 storage that hold n bytes (int8 panels live in the bf16 buffer).
constexpr std::size_t bf16_elements_for_bytes(std::size_t n) {
  return (n + 1) / 2;
}

namespace detail {

inline bool pair_active(const program_view& v, const executor_setup& s, const plan::gemm_part& p) {
  return can_pair(p) && s.pair_gemms && !s.interpreter_only &&
         !(s.amx && uses_amx_tiles(v.g.nodes, p));
}

// Whether group gu's product is computed by another group's part as its pair.
inline bool runs_as_pair_of(const program_view& v, const executor_setup& s, int gu) {
  const int gi = v.kernel(gu).paired_into;
  if (gi < 0) return false;
  const plan::kernel_desc& d = v.kernel(gi);
  const int u = v.kernel(gu).gemm[0].matmul;
  for (int q = 0; q < d.n_gemm; ++q)
    if (d.gemm[std::size_t(q)].pair == u) return pair_active(v, s, d.gemm[std::size_t(q)]);
  return false;
}

// A GEMM group's workspace, and a pack per part with a parameter B, per layer.
template <class Arch>
std::size_t plan_gemm(const program_view& v, executor_setup& s, int gi) {
  const plan::kernel_desc& d = v.kernel(gi);
  const int layers = backend::layers_of_region(v.g, v.group(gi).region);
  std::size_t need = 0;
  for (int q = 0; q < d.n_gemm; ++q) {
    const plan::gemm_part& p = d.gemm[std::size_t(q)];
    std::size_t w = kernels::gemm_workspace_floats<Arch>(p.k, s.threads) + 64;
    if (!p.b_param) w += kernels::packed_b_floats<Arch>(p.k, p.n) + 16;
    if (v.g[p.a.base].type != dtype::f32) w += std::size_t(p.a.shape.size()) + 16;  // A widened
    const bool amx = s.amx && uses_amx_tiles(v.g.nodes, p);
    if (amx) w = std::max(w, kernels::gemm_amx_workspace_elements(p.m, p.k) / 2 + 64);
    need = std::max(need, w);
    if (!p.b_param) continue;
    for (int it = 0; it < layers; ++it) {
      packed_weight r;
      r.group = gi;
      r.part = q;
      r.iter = it;
      r.pair = pair_active(v, s, p);
      r.amx = !r.pair && amx;
      r.s8_panels = uses_s8_panels<Arch>(v.g.nodes, p);
      r.bf16_storage = r.amx || r.s8_panels || uses_bf16_panels<Arch>(v.g.nodes, p);
      const std::int64_t n = r.pair ? 2 * p.n : p.n;
      r.slices = p.b_slices;
      r.size = r.amx            ? kernels::packed_b_bf16_elements(p.k, p.n) + 32
               : p.b_slices > 1 ? std::size_t(p.b_slices) * packed_slice_floats<Arch>(p.k, p.n) + 16
               : r.s8_panels ? bf16_elements_for_bytes(kernels::packed_b_floats<Arch>(p.k, n)) + 32
                             : kernels::packed_b_floats<Arch>(p.k, n) + (r.bf16_storage ? 32 : 16);
      s.packs.push_back(r);
    }
  }
  return need;
}

template <class Arch>
std::size_t plan_attention(const program_view& v, const executor_setup& s, int gi) {
  const plan::attention_part& a = v.kernel(gi).att;
  std::size_t w = kernels::attention_workspace_floats<Arch>(a.head_dim, s.threads) + 64;
  for (const plan::strided_view* x : {&a.q, &a.k, &a.v, &a.o})  // widened per call
    if (v.g[x->base].type != dtype::f32) w += std::size_t(x->shape.size()) + 16;
  if (s.amx_attention && a.score.empty())
    w = std::max(
        w, kernels::attention_amx_workspace_elements(a.head_dim, a.seq_kv, s.threads) / 2 + 64);
  return w;
}

}  // namespace detail

// The workspace: the most any one kernel needs (per-thread tiles, B packed when it is not a
// weight, operands of another dtype widened); packed-weight entries for every GEMM whose B is a
// parameter, per layer; the groups whose product a GEMM pair computes.
template <class Arch>
void plan_workspace(const program_view& v, executor_setup& s) {
  const std::size_t threads = std::size_t(s.threads);
  for (int gi = 0; gi < v.n_groups; ++gi)
    s.paired_away[std::size_t(gi)] = detail::runs_as_pair_of(v, s, gi);
  std::size_t need = 64;
  for (int gi = 0; gi < v.n_groups; ++gi) {
    const plan::kernel_desc& d = v.kernel(gi);
    if (d.kind == plan::kernel_kind::gemm) {
      if (s.paired_away[std::size_t(gi)]) continue;  // its weight is packed with its pair's
      need = std::max(need, detail::plan_gemm<Arch>(v, s, gi));
    } else if (d.kind == plan::kernel_kind::attention) {
      need = std::max(need, detail::plan_attention<Arch>(v, s, gi));
    } else if (d.kind == plan::kernel_kind::row) {
      const std::int64_t cols = d.extent[std::size_t(d.rank - 1)];
      const std::int64_t block = cols <= 256 ? 8 : cols <= 512 ? 4 : cols <= 4096 ? 2 : 1;
      need = std::max(need, threads * std::size_t(block * (cols + 16) + 2 * cols + 16) + 64);
    }
  }
  s.scratch_floats = need;
}

namespace detail {

// The cache's panels for this pack's weight as bound at `data` (layout 0: f32 panels, 1: bf16,
// 2: int8).
template <class Arch>
void* shared_panels(weight_packs& w, const plan::gemm_part& part, const packed_weight& p,
                    const void* data, dtype type, int layout) {
  const std::size_t elem = layout == 0 ? sizeof(float) : sizeof(kernels::bf16_bits);
  const std::size_t src_elem = size_of(type);
  packed_weight_cache::key k;
  k.data = reinterpret_cast<std::uintptr_t>(data) + std::uintptr_t(part.b.offset) * src_elem;
  k.k = part.k;
  k.n = part.n;
  k.ks = part.b_ks;
  k.ns = part.b_ns;
  k.type = type;
  k.layout = layout;
  k.panel_width = kernels::gemm_tile<Arch>::nr;
  return w.cached(k, p.size * elem);
}

[[noreturn]] inline void weight_dtype_error(const backend::binding_slot& s, dtype only) {
  throw binding_error("binding \"" + s.name + "\": " +
                      (only != dtype::f32
                           ? "this matmul weight must be " + std::string(name_of(only))
                           : std::string("a matmul weight must be f32, bf16 or i8")));
}

// One weight of a GEMM pair into its half of the pair's panels; the pair is ready with both.
template <class Arch>
void pack_pair_half(const program_view& v, const plan::gemm_part& part, packed_weight& p,
                    const backend::binding_slot& s, const void* data, const plan::strided_view& b,
                    std::int64_t ks, std::int64_t ns, int half) {
  const dtype t = v.g[s.node].type;
  if (uses_bf16_panels<Arch>(v.g.nodes, part)) {
    if (t != dtype::bf16) weight_dtype_error(s, dtype::bf16);
    kernels::pack_b_pair_half<Arch>(part.k, part.n,
                                    static_cast<const kernels::bf16_bits*>(data) + b.offset, ks, ns,
                                    half, static_cast<kernels::bf16_bits*>(p.panels));
  } else if (uses_s8_panels<Arch>(v.g.nodes, part)) {
    if (t != dtype::i8) weight_dtype_error(s, dtype::i8);
    kernels::pack_b_pair_half<Arch>(part.k, part.n,
                                    static_cast<const std::int8_t*>(data) + b.offset, ks, ns, half,
                                    static_cast<std::int8_t*>(p.panels));
  } else if (t == dtype::i8) {
    kernels::pack_b_pair_half<Arch>(part.k, part.n,
                                    static_cast<const std::int8_t*>(data) + b.offset, ks, ns, half,
                                    static_cast<float*>(p.panels));
  } else if (t == dtype::bf16) {
    kernels::pack_b_pair_half<Arch>(part.k, part.n,
                                    static_cast<const kernels::bf16_bits*>(data) + b.offset, ks, ns,
                                    half, static_cast<float*>(p.panels));
  } else if (t == dtype::f32) {
    kernels::pack_b_pair_half<Arch>(part.k, part.n, static_cast<const float*>(data) + b.offset, ks,
                                    ns, half, static_cast<float*>(p.panels));
  } else {
    weight_dtype_error(s, dtype::f32);
  }
  p.halves = std::uint8_t(p.halves | (1u << half));
  p.ready = p.halves == 3;
}

inline const kernels::bf16_bits* pack_amx(const plan::gemm_part& part, const void* data,
                                          kernels::bf16_bits* dst) {
  const bool unit_n = part.b_ns == 1;
  const std::int64_t ld = unit_n ? part.b_ks : part.b_ns;
  if (!unit_n && part.b_ks != 1)
    throw binding_error("amx_bf16: a bf16 weight read with no unit stride");
  return kernels::pack_b_bf16(part.k, part.n,
                              static_cast<const kernels::bf16_bits*>(data) + part.b.offset, ld,
                              !unit_n, dst)
      .data;
}

// One pack (not a pair) of the weight bound at `data`.
template <class Arch>
void pack_one(const program_view& v, weight_packs& w, const plan::gemm_part& part, packed_weight& p,
              const backend::binding_slot& s, const void* data) {
  const dtype t = v.g[s.node].type;
  if (p.amx) {
    p.amx_data = pack_amx(part, data, w.bf16_storage() + p.offset);
  } else if (uses_bf16_panels<Arch>(v.g.nodes, part)) {
    if (t != dtype::bf16) weight_dtype_error(s, dtype::bf16);
    if (p.shared) p.panels = shared_panels<Arch>(w, part, p, data, t, 1);
    kernels::pack_b_bf16_panels<Arch>(
        part.k, part.n, static_cast<const kernels::bf16_bits*>(data) + part.b.offset, part.b_ks,
        part.b_ns, static_cast<kernels::bf16_bits*>(p.panels));
  } else if (p.s8_panels) {
    if (t != dtype::i8) weight_dtype_error(s, dtype::i8);
    if (p.shared) p.panels = shared_panels<Arch>(w, part, p, data, t, 2);
    kernels::pack_b_s8_panels<Arch>(part.k, part.n,
                                    static_cast<const std::int8_t*>(data) + part.b.offset,
                                    part.b_ks, part.b_ns, static_cast<std::int8_t*>(p.panels));
  } else {
    if (t != dtype::bf16 && t != dtype::f32 && t != dtype::i8) weight_dtype_error(s, dtype::f32);
    if (p.shared) p.panels = shared_panels<Arch>(w, part, p, data, t, 0);
    // Slice by slice (one, unless B is batched), at each slice's offset as run_gemm reads it.
    for (std::int64_t slice = 0; slice < part.b_slices; ++slice) {
      const std::int64_t off =
          part.b.offset + (part.b_slices > 1 ? batch_offset(part, part.b_batch_stride, slice) : 0);
      float* dst = static_cast<float*>(p.panels) +
                   std::size_t(slice) * packed_slice_floats<Arch>(part.k, part.n);
      if (t == dtype::bf16)
        kernels::pack_b_strided<Arch>(part.k, part.n,
                                      static_cast<const kernels::bf16_bits*>(data) + off, part.b_ks,
                                      part.b_ns, dst);
      else if (t == dtype::i8)
        kernels::pack_b_strided<Arch>(part.k, part.n, static_cast<const std::int8_t*>(data) + off,
                                      part.b_ks, part.b_ns, dst);
      else
        kernels::pack_b_strided<Arch>(part.k, part.n, static_cast<const float*>(data) + off,
                                      part.b_ks, part.b_ns, dst);
    }
  }
  p.ready = true;
}

}  // namespace detail

// Packs every product's B that reads the weight bound to slot `s` at `data`.
template <class Arch>
void pack_weights_of(executor_base& ex, const backend::binding_slot& s, const void* data) {
  const program_view& v = ex.view();
  weight_packs& w = ex.packs();
  for (packed_weight& p : w.packs) {
    if (p.iter != s.iter) continue;
    const plan::gemm_part& part = v.kernel(p.group).gemm[std::size_t(p.part)];
    if (p.pair) {
      if (part.b.base == s.node)
        detail::pack_pair_half<Arch>(v, part, p, s, data, part.b, part.b_ks, part.b_ns, 0);
      if (part.pair_b.base == s.node)
        detail::pack_pair_half<Arch>(v, part, p, s, data, part.pair_b, part.pair_b_ks,
                                     part.pair_b_ns, 1);
      continue;
    }
    if (part.b.base == s.node) detail::pack_one<Arch>(v, w, part, p, s, data);
  }
}

}  // namespace fusedsl::cpu
