#pragma once
// The device executor's plan: how each fusion group's kernel descriptor (plan/lower.hpp) runs on
// the GPU. The descriptors say what a group computes; this says which CUDA launch computes it,
// with the CUDA-specific choices made from the descriptors alone (never from the graph's ops):
//
//   loop       loop_group_kernel (plan_kernels.cuh): one element per thread, every segment;
//   reduce     reduce_group_kernel with 1, 32 or 256 threads per output (by the reduction's
//              length and whether its axes are the innermost);
//   row        row_group_kernel with a warp, 256 or 512 threads per row, the row in registers up
//              to 8192 columns, re-evaluating its prologue per pass beyond;
//   gemm       per matmul part: the tiled tensor-core GEMM of gemm.cuh (mma.sync; wgmma on
//              Hopper) when A and B are contiguous 16-bit [M, K] and [K, N] buffers whose sizes are
//              multiples of 32, else gemm_strided (predicated tails, strided views, a batch
//              axis; tensor cores for 16-bit operands, exact f32 otherwise). Parts that share A
//              and every shape run as one launch (`siblings`: a horizontal Q/K/V group), and a
//              lone tensor-core GEMM whose output only the layernorm group right after it reads
//              finishes that layernorm in its epilogue (`layernorm`: gemm_layernorm, N <= 256);
//   attention  flash_attention (attention.cuh: mma.sync, wgmma + TMA on Hopper) for 16-bit
//              operands in the [batch, seq, heads * head_dim] row layout with tile-multiple
//              lengths and no score program; attention_general (any dtype, lengths, strides,
//              score programs, causal with seq_q != seq_kv) otherwise;
//   update     update_slice_kernel (plan_kernels.cuh) for a dynamic update slice: the update
//              written at its clamped run-time start, one element per thread, in place when the
//              result has the operand's buffer (a state, a KV cache), else the whole result;
//   repeat     nothing of its own: the body's groups run once per layer.
// Gathers and dynamic slices (loads at a run-time row) are instructions of the generated code, in
// any kind of group; argmax reduces carry (best value, position) pairs.
// What no launch computes is refused, naming the group and why: the groups the lowering refuses
// (the CUDA backend has no interpreter), attention with head_dim above 256, and attention stopped
// at a run-time key length (the kernels' key count is a template argument). The executor turns a
// refusal into a compile error (executor.hpp).
//
// Plain constexpr C++, no CUDA header: tests/cuda_executor checks it with the host compiler.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "fusedsl/plan/lower.hpp"

namespace fusedsl::cuda {

using graph::node;
using graph::op_kind;

enum class launch_kind : std::uint8_t {
  none,  // a repeat group, or a row group that the GEMM before it finishes
  loop,
  reduce,
  row,
  gemm,
  attention,
  update,
  refused,
};

constexpr std::string_view name_of(launch_kind k) {
  constexpr std::string_view names[] = {"none", "loop",      "reduce", "row",
                                        "gemm", "attention", "update", "refused"};
  return names[std::size_t(k)];
}

// Why a group has no launch.
enum class refusal : std::uint8_t {
  none,
  lowering_refused,              // plan::lower gives no descriptor (kernel_desc::why says why)
  attention_head_dim_above_256,  // attention_general keeps a K/V tile of 32 rows in shared memory
  runtime_key_length,            // attention stopped at a run-time key length (a KV cache's fill)
};

enum class gemm_route : std::uint8_t {
  tensor_core,  // gemm.cuh's tiled kernels (also siblings and gemm_layernorm)
  strided,      // gemm_strided.cuh
};

enum class attention_route : std::uint8_t {
  flash,    // attention.cuh's flash_attention
  general,  // attention_general.cuh
};

// One matmul part of a gemm group.
struct gemm_launch {
  gemm_route route = gemm_route::strided;
  dtype a_type = dtype::f32, b_type = dtype::f32, out_type = dtype::f32;
  long m = 0, n = 0, k = 0;
  long batches = 1;       // launches of the product (1 when the batch folds into M)
  int siblings = 0;       // parts right after this one that its launch computes too
  bool absorbed = false;  // computed by the launch of an earlier part
  // siblings: every member's epilogue is this part's code on other buffers, so the launch runs
  // one epilogue (each member's buffers in this part's access slots) instead of one per member
  bool shared_epilogue = false;
};

struct attention_launch {
  attention_route route = attention_route::general;
  dtype q_type = dtype::f32, k_type = dtype::f32, v_type = dtype::f32, o_type = dtype::f32;
  long batches = 1;
  bool score = false;  // a score program runs between Q Kᵀ and the softmax
  // flash: element strides between rows and between batch indices of each view
  long q_row = 0, k_row = 0, v_row = 0, o_row = 0;
  long q_batch = 0, k_batch = 0, v_batch = 0, o_batch = 0;
};

// A dynamic update slice: x viewed as [outer, extent, inner] around the axis, the update as
// [outer, len, inner], elements of `bytes` bytes (codegen.cuh's update_slice).
struct update_launch {
  int bytes = 4;
  long outer = 1, extent = 1, len = 1, inner = 1;
  bool start_is_constant = false;
  long start_constant = 0;
};

struct group_launch {
  launch_kind kind = launch_kind::none;
  refusal why = refusal::none;
  const char* reason = nullptr;  // refused: the reason in words
  dims shape{};                  // the anchor's shape (named in refusals)
  // reduce
  int reduce_lanes = 0;  // threads per output
  // row
  int row_threads = 0;  // threads per row
  bool row_cached = false;
  int finished_by = -1;  // a row group run by this gemm group's launch
  // gemm
  int n_gemm = 0;
  std::array<gemm_launch, plan::max_roots> gemm{};
  int layernorm = -1;  // the row group this gemm group's launch finishes
  // attention
  attention_launch att{};
  // update
  update_launch upd{};

  constexpr bool refused() const { return why != refusal::none; }
  // Kernel launches of one call of the group (a layer's, for a body group).
  constexpr int device_launches() const {
    if (kind == launch_kind::gemm) {
      int k = 0;
      for (int q = 0; q < n_gemm; ++q) k += gemm[std::size_t(q)].absorbed ? 0 : 1;
      return k;
    }
    return kind == launch_kind::none || kind == launch_kind::refused ? 0 : 1;
  }
};

template <int G>
struct launch_plan {
  std::array<group_launch, std::size_t(G > 0 ? G : 1)> group{};
  int failed_group = -1;  // the first refused group, or -1

  constexpr bool ok() const { return failed_group < 0; }
  constexpr const group_launch& operator[](int gi) const { return group[std::size_t(gi)]; }
  constexpr const char* error() const {
    return ok() ? nullptr : group[std::size_t(failed_group)].reason;
  }
};

// Whether parts p and q of d compute the same epilogue on buffers of the same dtypes and layouts:
// instruction for instruction the same kinds, ops, dtypes, operands, constants and affine offsets.
constexpr bool same_epilogue(const plan::kernel_desc& d, int p, int q) {
  const plan::gemm_part &x = d.gemm[std::size_t(p)], &y = d.gemm[std::size_t(q)];
  const plan::program_range a = x.epilogue, b = y.epilogue;
  if (a.end - a.begin != b.end - b.begin || a.result - a.begin != b.result - b.begin) return false;
  if (x.folded != y.folded || x.rows_per_batch != y.rows_per_batch || !(x.batch == y.batch))
    return false;
  for (int i = 0; i < a.end - a.begin; ++i) {
    const plan::ins &u = d.c.instr[std::size_t(a.begin + i)],
                    &v = d.c.instr[std::size_t(b.begin + i)];
    if (u.kind != v.kind || u.op != v.op || u.type != v.type) return false;
    for (int k = 0; k < 3; ++k) {
      const int ua = u.arg[std::size_t(k)], va = v.arg[std::size_t(k)];
      if ((ua < 0) != (va < 0) || (ua >= 0 && ua - a.begin != va - b.begin)) return false;
    }
    if (u.kind == plan::ins_kind::input && u.ref != v.ref) return false;
    if (u.kind == plan::ins_kind::constant &&
        !(d.c.constant[std::size_t(u.ref)] == d.c.constant[std::size_t(v.ref)]))
      return false;
    if (u.kind == plan::ins_kind::load || u.kind == plan::ins_kind::iota) {
      const plan::access &ua = d.c.acc[std::size_t(u.ref)], &va = d.c.acc[std::size_t(v.ref)];
      if (ua.type != va.type || !(ua.at == va.at)) return false;
    }
  }
  return true;
}

// For parts p and q with the same epilogue: the node whose buffer each access of p's epilogue
// loads reads for q (-1 where p's accesses stay as they are).
constexpr std::array<int, plan::max_accesses> sibling_load_nodes(const plan::kernel_desc& d, int p,
                                                                 int q) {
  std::array<int, plan::max_accesses> nodes{};
  for (int& n : nodes) n = -1;
  const plan::program_range a = d.gemm[std::size_t(p)].epilogue,
                            b = d.gemm[std::size_t(q)].epilogue;
  for (int i = 0; i < a.end - a.begin; ++i) {
    const plan::ins &u = d.c.instr[std::size_t(a.begin + i)],
                    &v = d.c.instr[std::size_t(b.begin + i)];
    if (u.kind == plan::ins_kind::load)
      nodes[std::size_t(u.ref)] = d.c.acc[std::size_t(v.ref)].node;
  }
  return nodes;
}

// The part whose launch computes part q (q itself unless a sibling launch absorbs it).
constexpr int launching_part(const group_launch& l, int q) {
  for (int p = q; p >= 0; --p)
    if (!l.gemm[std::size_t(p)].absorbed) return p + l.gemm[std::size_t(p)].siblings >= q ? p : q;
  return q;
}

namespace detail {

constexpr bool is_half(dtype t) {
  return t == dtype::bf16 || t == dtype::f16;
}

// Whether `a` is the row-major offset of an element of a buffer of shape `s` iterated in order.
constexpr bool is_contiguous(const plan::affine_row& a, const dims& s) {
  if (a.base != 0) return false;
  for (int t = 0; t < plan::max_iter_rank; ++t)
    if (a.coef[std::size_t(t)] != (t < s.rank ? s.stride(t) : 0)) return false;
  return true;
}
// The shape of a descriptor's iteration space.
constexpr dims space_of(const plan::kernel_desc& d) {
  dims s;
  s.rank = d.rank;
  for (int t = 0; t < d.rank; ++t) s[t] = d.extent[std::size_t(t)];
  return s;
}

// Row strides of view v's batch axes [0, rank) collapse into one (the batch is one run of
// equal-spaced blocks): returns that stride, 0 without a batch, -1 if they do not.
constexpr long collapsed_batch_stride(const plan::strided_view& v, const dims& batch) {
  long stride = 0, expect = -1;
  for (int c = batch.rank - 1; c >= 0; --c) {
    if (batch[c] == 1) continue;
    const long s = long(v.stride[std::size_t(c)]);
    if (expect < 0)
      stride = s;
    else if (s != expect)
      return -1;
    expect = s * long(batch[c]);
  }
  return stride;
}

template <std::size_t N, int G>
struct realiser {
  const graph::graph<N>& g;
  const plan::fusion_plan<N>& f;
  const plan::lowered_plan<N, G>& low;
  launch_plan<G> p{};

  constexpr group_launch& at(int gi) { return p.group[std::size_t(gi)]; }

  constexpr void refuse(int gi, refusal why, const char* reason) {
    group_launch& l = at(gi);
    l.kind = launch_kind::refused;
    l.why = why;
    l.reason = reason;
    if (p.failed_group < 0) p.failed_group = gi;
  }

  // ---- gemm ----
  constexpr bool tensor_core_fits(const plan::gemm_part& q, const gemm_launch& e) const {
    return is_half(e.a_type) && e.b_type == e.a_type && !q.trans_a && q.lda == q.k &&
           q.a.offset % 8 == 0 && q.b_ns == 1 && q.b_ks == q.n && q.b.offset % 8 == 0 &&
           e.batches == 1 && q.m % 32 == 0 && q.n % 32 == 0 && q.k % 32 == 0 &&
           q.m <= (1L << 30) / q.n;
  }
  constexpr bool same_a(const plan::gemm_part& x, const plan::gemm_part& y) const {
    return x.a.base == y.a.base && x.a.offset == y.a.offset && x.lda == y.lda && x.m == y.m &&
           x.n == y.n && x.k == y.k;
  }

  constexpr void gemm(int gi, const plan::kernel_desc& d) {
    group_launch& l = at(gi);
    l.kind = launch_kind::gemm;
    l.n_gemm = d.n_gemm;
    for (int q = 0; q < d.n_gemm; ++q) {
      const plan::gemm_part& pt = d.gemm[std::size_t(q)];
      gemm_launch& e = l.gemm[std::size_t(q)];
      e.a_type = g[pt.a.base].type;
      e.b_type = g[pt.b.base].type;
      e.out_type = d.c.acc[std::size_t(pt.store)].type;
      e.m = long(pt.m);
      e.n = long(pt.n);
      e.k = long(pt.k);
      if (!pt.folded) e.batches = long(pt.batch.size());
      e.route = tensor_core_fits(pt, e) ? gemm_route::tensor_core : gemm_route::strided;
      if (!is_contiguous(d.c.acc[std::size_t(pt.store)].at, g[pt.out].shape))
        return refuse(gi, refusal::lowering_refused,
                      "a matmul output that is not written contiguously");
    }
    // Siblings: tensor-core parts that read the same A with the same shapes and dtypes.
    for (int q = 0; q < d.n_gemm; ++q) {
      gemm_launch& e = l.gemm[std::size_t(q)];
      if (e.route != gemm_route::tensor_core || e.absorbed) continue;
      for (int r = q + 1; r < d.n_gemm; ++r) {
        gemm_launch& o = l.gemm[std::size_t(r)];
        if (o.route != gemm_route::tensor_core || o.absorbed || r != q + e.siblings + 1) break;
        if (!same_a(d.gemm[std::size_t(q)], d.gemm[std::size_t(r)]) || o.a_type != e.a_type ||
            o.b_type != e.b_type || o.out_type != e.out_type)
          break;
        o.absorbed = true;
        ++e.siblings;
      }
      if (e.siblings > 0) {
        e.shared_epilogue = true;
        for (int r = q + 1; r <= q + e.siblings; ++r)
          e.shared_epilogue = e.shared_epilogue && cuda::same_epilogue(d, q, r);
      }
    }
  }

  // The group that runs right after gi (same region, next in execution order), or -1.
  constexpr int next_group(int gi) const {
    const int r = f.groups[std::size_t(gi)].region;
    bool seen = false;
    for (int k = 0; k < f.n_groups; ++k) {
      const int o = f.order[std::size_t(k)];
      if (f.groups[std::size_t(o)].region != r) continue;
      if (seen) return o;
      seen = o == gi;
    }
    return -1;
  }

  // gemm_layernorm: a lone tensor-core GEMM whose output only the next group reads, a layernorm
  // of its rows without prologue or epilogue (rows of at most 256 columns, one block each).
  constexpr void fold_layernorm(int gi) {
    const plan::kernel_desc& d = low[gi];
    group_launch& l = at(gi);
    if (l.kind != launch_kind::gemm || d.n_gemm != 1) return;
    const plan::gemm_part& pt = d.gemm[0];
    const gemm_launch& e = l.gemm[0];
    const int ng = next_group(gi);
    if (e.route != gemm_route::tensor_core || ng < 0 || at(ng).kind != launch_kind::row) return;
    const plan::kernel_desc& r = low[ng];
    if (r.row_op != op_kind::layernorm || f.n_users[std::size_t(pt.out)] != 1) return;
    if (!(e.n % 64 == 0 && e.n <= 256 && e.m % 16 == 0 && e.k % 32 == 0)) return;
    const dims rs = space_of(r);
    if (rs.rank < 1 || rs.back() != e.n || rs.size() != e.m * e.n) return;
    // The prologue: one load of the GEMM's output, element for element.
    if (r.seg[0].end - r.seg[0].begin != 1) return;
    const plan::ins& x = r.c.instr[std::size_t(r.seg[0].begin)];
    if (x.kind != plan::ins_kind::load) return;
    const plan::access& in = r.c.acc[std::size_t(x.ref)];
    if (in.node != pt.out || !is_contiguous(in.at, rs)) return;
    // gamma and beta: [N] of the output's dtype; the result written contiguously in that dtype.
    const int params[2] = {r.gamma, r.beta};
    for (const int ref : params) {
      if (ref < 0) return;
      const plan::access& a = r.c.acc[std::size_t(ref)];
      if (a.type != e.out_type || a.at.coef[std::size_t(rs.rank - 1)] != 1) return;
      for (int t = 0; t < plan::max_iter_rank; ++t)
        if (t != rs.rank - 1 && a.at.coef[std::size_t(t)] != 0) return;
    }
    const plan::access& st = r.c.acc[std::size_t(r.store)];
    if (!r.epilogue.empty() || st.type != e.out_type || !is_contiguous(st.at, rs)) return;
    l.layernorm = ng;
    at(ng).kind = launch_kind::none;
    at(ng).finished_by = gi;
  }

  // ---- attention ----
  constexpr void attention(int gi, const plan::kernel_desc& d) {
    group_launch& l = at(gi);
    const plan::attention_part& a = d.att;
    attention_launch& e = l.att;
    l.kind = launch_kind::attention;
    e.q_type = g[a.q.base].type;
    e.k_type = g[a.k.base].type;
    e.v_type = g[a.v.base].type;
    e.o_type = g[a.o.base].type;
    e.batches = long(a.batch.size());
    e.score = !a.score.empty();
    if (a.kv_len >= 0)
      return refuse(gi, refusal::runtime_key_length,
                    "attention stopped at a run-time key length (a KV cache's fill) has no CUDA "
                    "kernel (the kernels take the key count as a template argument); the CPU "
                    "executor runs it");
    if (a.head_dim > 256)
      return refuse(gi, refusal::attention_head_dim_above_256,
                    "attention with head_dim above 256 (the CUDA kernels keep K/V tiles of up to "
                    "256 columns in shared memory)");
    const int r = a.q.shape.rank;
    const plan::strided_view* views[] = {&a.q, &a.k, &a.v, &a.o};
    long batch_stride[4]{}, row_stride[4]{};
    bool flash = e.q_type == e.k_type && e.q_type == e.v_type && e.q_type == e.o_type &&
                 is_half(e.q_type) && !e.score && a.head_dim % 16 == 0 && a.head_dim >= 16 &&
                 a.seq_q % (a.head_dim >= 128 ? 128 : 64) == 0 && a.seq_kv % 64 == 0 &&
                 (!a.causal || a.seq_kv >= a.seq_q) && a.scale > 0.0f && e.batches <= 65535;
    for (int v = 0; v < 4 && flash; ++v) {
      const plan::strided_view& w = *views[v];
      batch_stride[v] = collapsed_batch_stride(w, a.batch);
      row_stride[v] = long(w.stride[std::size_t(r - 2)]);
      const long width = long(v == 1 || v == 2 ? a.kv_heads : a.heads) * long(a.head_dim);
      flash = batch_stride[v] >= 0 && w.stride[std::size_t(r - 3)] == a.head_dim &&
              row_stride[v] >= width && row_stride[v] % 8 == 0 && w.offset % 8 == 0 &&
              batch_stride[v] % 8 == 0;
    }
    e.route = flash ? attention_route::flash : attention_route::general;
    if (flash) {
      e.q_row = row_stride[0], e.k_row = row_stride[1], e.v_row = row_stride[2],
      e.o_row = row_stride[3];
      e.q_batch = batch_stride[0], e.k_batch = batch_stride[1];
      e.v_batch = batch_stride[2], e.o_batch = batch_stride[3];
    }
  }

  // ---- update ----
  constexpr void update(int gi, const plan::kernel_desc& d) {
    group_launch& l = at(gi);
    const node &x = g[d.update_x], &u = g[d.update_value];
    const int axis = d.update_axis;
    update_launch& e = l.upd;
    l.kind = launch_kind::update;
    e.bytes = size_of(x.type);
    for (int c = 0; c < axis; ++c) e.outer *= long(x.shape[c]);
    e.extent = long(x.shape[axis]);
    e.len = long(u.shape[axis]);
    e.inner = long(x.shape.stride(axis));
    e.start_is_constant = d.start_is_constant;
    e.start_constant = long(d.start_constant);
  }

  // ---- row, reduce ----
  constexpr void row(int gi, const plan::kernel_desc& d) {
    group_launch& l = at(gi);
    l.kind = launch_kind::row;
    const long cols = long(d.extent[std::size_t(d.rank - 1)]);
    l.row_threads = cols <= 1024 ? 32 : cols <= 8192 ? 256 : 512;
    l.row_cached = cols <= 8192;
  }
  constexpr void reduce(int gi, const plan::kernel_desc& d) {
    group_launch& l = at(gi);
    l.kind = launch_kind::reduce;
    long outputs = 1;
    for (int t = 0; t < d.rank; ++t)
      if (t < d.reduce_first || t >= d.reduce_first + d.reduce_count)
        outputs *= long(d.extent[std::size_t(t)]);
    long length = 1;
    for (int t = d.reduce_first; t < d.reduce_first + d.reduce_count; ++t)
      length *= long(d.extent[std::size_t(t)]);
    // Threads of an output read consecutive elements when the reduced axes are the innermost;
    // otherwise consecutive outputs are, and a thread per output coalesces, unless they are few.
    const bool inner = d.reduce_first + d.reduce_count == d.rank;
    const bool across = inner || outputs < 2048;
    l.reduce_lanes = across && length >= 4096 ? 256 : across && length >= 64 ? 32 : 1;
  }

  constexpr launch_plan<G> run() {
    for (int gi = 0; gi < G; ++gi) {
      const plan::kernel_desc& d = low[gi];
      at(gi).shape = g[f.groups[std::size_t(gi)].anchor].shape;
      switch (d.kind) {
        case plan::kernel_kind::loop:
          at(gi).kind = launch_kind::loop;
          break;
        case plan::kernel_kind::reduce:
          reduce(gi, d);
          break;
        case plan::kernel_kind::row:
          row(gi, d);
          break;
        case plan::kernel_kind::gemm:
          gemm(gi, d);
          break;
        case plan::kernel_kind::attention:
          attention(gi, d);
          break;
        case plan::kernel_kind::update:
          update(gi, d);
          break;
        case plan::kernel_kind::repeat:
          at(gi).kind = launch_kind::none;
          break;
        case plan::kernel_kind::refused:
          refuse(gi, refusal::lowering_refused, d.why);
          break;
      }
    }
    for (int gi = 0; gi < G; ++gi) fold_layernorm(gi);
    return p;
  }
};

}  // namespace detail

// How every group of a program runs on the device, from its descriptors.
template <std::size_t N, int G>
constexpr launch_plan<G> plan_launches(const graph::graph<N>& g, const plan::fusion_plan<N>& f,
                                       const plan::lowered_plan<N, G>& lowered) {
  detail::realiser<N, G> r{g, f, lowered, {}};
  return r.run();
}

// Kernel launches of one call of region r (a layer's, for a block body).
template <std::size_t N, int G>
constexpr int device_launches(const launch_plan<G>& p, const plan::fusion_plan<N>& f, int r) {
  int k = 0;
  for (int gi = 0; gi < G; ++gi)
    if (f.groups[std::size_t(gi)].region == r) k += p[gi].device_launches();
  return k;
}

// A program's descriptors and their launches, as the executor and the host emulation of its
// schedule use them: desc<GI> names group GI's descriptor (`get()`, codegen.cuh's form).
template <class Program>
struct device_program {
  static constexpr auto& graph = Program::graph;
  static constexpr std::size_t node_count = Program::node_count;
  static constexpr int groups = Program::fusion.n_groups;
  struct lowered {
    static constexpr plan::lowered_plan<node_count, groups> value =
        plan::lower<groups>(graph, Program::fusion);
  };
  template <int GI>
  struct desc {
    static constexpr const plan::kernel_desc& get() { return lowered::value.desc[std::size_t(GI)]; }
  };
  static constexpr launch_plan<groups> launches =
      plan_launches(graph, Program::fusion, lowered::value);
};

// Why a program does not run on the device, naming the first refused group, or "".
template <std::size_t N, int G>
std::string refusal_message(const graph::graph<N>& g, const plan::fusion_plan<N>& f,
                            const launch_plan<G>& p) {
  if (p.ok()) return {};
  const plan::fusion_group& gr = f.groups[std::size_t(p.failed_group)];
  return "cuda::executor: group " + std::to_string(p.failed_group) + " (" +
         std::string(plan::name_of(gr.kind)) + ", anchor %" + std::to_string(gr.anchor) + " " +
         std::string(graph::name_of(g[gr.anchor].op)) + to_string(g[gr.anchor].shape) +
         "): " + p.error();
}

}  // namespace fusedsl::cuda
