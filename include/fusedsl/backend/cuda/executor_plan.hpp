#pragma once
// The device executor's plan: which CUDA kernel launch each fusion group becomes, with every shape,
// stride and operand (a node's buffer plus an element offset). Plain constexpr C++ over the
// program's plan, no CUDA header, so it is compiled and tested by the host compiler too; the
// executor (executor.hpp) instantiates one kernel per launch from these values.
//
//   matmul     one GEMM per member matmul (horizontal Q/K/V groups give one launch each), its
//              epilogue act(scale * acc + bias) + residual fused; A and B must be row-major
//              contiguous [M, K] and [K, N] buffers (no transposed operands);
//   attention  flash attention over head views of Q, K, V and O ([L, H, dh] row layouts), bf16/f16;
//   row        the warp row kernel; an elementwise epilogue runs after it as a loop program;
//   loop       a general elementwise program evaluated per element (loads through strided,
//              broadcast views; constants; iota; every elementwise op);
//   reduce     not mapped: an error names the group (no reduce kernel yet).
// A group that does not fit its kernel is never approximated: the plan records the first such
// group and why, and the executor throws that at construction.
#include <array>
#include <cstdint>

#include "fusedsl/plan/view.hpp"
#include "fusedsl/plan/memory.hpp"

namespace fusedsl::cuda {

using graph::node;
using graph::op_kind;

enum class launch_kind : std::uint8_t { gemm, attention, row, loop };

constexpr std::string_view name_of(launch_kind k) {
  constexpr std::string_view names[] = {"gemm", "attention", "row", "loop"};
  return names[std::size_t(k)];
}

// A kernel operand: element `offset` of the buffer holding node `node`.
struct operand {
  int node = -1;
  std::int64_t offset = 0;
};

struct gemm_launch {
  int m = 0, n = 0, k = 0;
  operand a, b;
  int out = -1;  // the node written (the epilogue's last op)
  float scale = 1.0f;
  int bias = -1;  // node of the [N] bias, or -1
  bool has_act = false;
  op_kind act = op_kind::relu;
  int residual = -1;  // node of the [M, N] residual, or -1
};

// Row-layout attention views: head h of row s starts at offset + s * row_stride + h * head_dim.
struct attention_launch {
  int heads = 0, kv_heads = 0, seq_q = 0, seq_k = 0, head_dim = 0;
  bool causal = false;
  float scale = 1.0f;
  operand q, k, v, o;
  std::int64_t q_row_stride = 0, k_row_stride = 0, v_row_stride = 0, o_row_stride = 0;
};

struct row_launch {
  op_kind op = op_kind::softmax;
  int rows = 0, cols = 0;
  int in = -1, out = -1, gamma = -1, beta = -1;
  float eps = 0.0f;
};

inline constexpr int max_loop_instructions = 32;
inline constexpr int max_loop_loads = 8;

enum class loop_code : std::uint8_t { load, constant, iota, apply };

// One register-producing step of a loop program; register r is instruction r's result.
struct loop_instruction {
  loop_code code = loop_code::constant;
  op_kind op = op_kind::constant;  // apply: the elementwise op
  dtype type = dtype::f32;         // apply: the result is rounded to this dtype
  int a = -1, b = -1, c = -1;      // apply: operand registers
  int load = -1;                   // load: index into loads
  float value = 0.0f;              // constant
  int axis = 0;                    // iota: axis of the iteration space
};

// A strided view of a buffer over the loop's iteration space (stride 0 on broadcast axes).
struct loop_load {
  int node = -1;
  dtype type = dtype::f32;
  std::int64_t offset = 0;
  std::array<std::int64_t, max_rank> stride{};
};

struct loop_launch {
  dims shape{};  // the iteration space: every root has this shape
  int n_instructions = 0, n_loads = 0, n_outputs = 0;
  std::array<loop_instruction, max_loop_instructions> code{};
  std::array<loop_load, max_loop_loads> loads{};
  std::array<int, plan::max_roots> out_node{}, out_register{};
  std::array<dtype, plan::max_roots> out_type{};
};

struct launch {
  launch_kind kind = launch_kind::loop;
  int group = -1;
  gemm_launch gemm{};
  attention_launch attention{};
  row_launch row{};
  loop_launch loop{};
};

// Every group's launches, contiguous and in node order within a group; groups keep the fusion
// plan's numbering (the executor walks fusion.order and repeats bodies per layer).
template <std::size_t N>
struct launch_plan {
  std::array<launch, N> launches{};
  int n_launches = 0;
  std::array<int, N> first{}, count{};
  int failed_group = -1;        // the first group no kernel expresses, or -1
  const char* error = nullptr;  // why

  // How the executor realizes these launches on the device. A GEMM takes the GEMMs right after it
  // in its group that share its A operand, shapes and epilogue form (`siblings`: one launch for a
  // horizontal Q/K/V group), or finishes the layernorm launch that runs right after it in its
  // epilogue (`layernorm`: the row launch's index, when its rows fit one block: gemm_layernorm).
  // A launch folded into an earlier one is `absorbed` and launches nothing itself.
  std::array<int, N> siblings{};
  std::array<int, N> layernorm{};
  std::array<bool, N> absorbed{};

  constexpr bool ok() const { return error == nullptr; }
  constexpr int device_launches() const {
    int k = 0;
    for (int l = 0; l < n_launches; ++l) k += absorbed[std::size_t(l)] ? 0 : 1;
    return k;
  }
};

namespace detail {

using plan::strided_view;

constexpr bool is_half(dtype t) {
  return t == dtype::bf16 || t == dtype::f16;
}
constexpr bool is_storage(dtype t) {
  return t == dtype::f32 || is_half(t);
}
constexpr bool is_activation(op_kind k) {
  return k == op_kind::relu || k == op_kind::gelu_erf || k == op_kind::gelu_tanh ||
         k == op_kind::silu || k == op_kind::sigmoid || k == op_kind::tanh;
}

template <std::size_t N>
struct mapper {
  const graph::graph<N>& g;
  const plan::fusion_plan<N>& f;
  launch_plan<N> p{};

  constexpr bool member(int id, int gi) const { return f.group_of[std::size_t(id)] == gi; }
  constexpr bool has_buffer(int id) const {
    const op_kind k = g[id].op;
    return k != op_kind::constant && k != op_kind::iota;
  }
  constexpr bool is_root(int id, int gi) const {
    const plan::fusion_group& gr = f.groups[std::size_t(gi)];
    for (int r = 0; r < gr.n_roots; ++r)
      if (gr.roots[std::size_t(r)] == id) return true;
    return false;
  }
  constexpr bool is_scalar_constant(int id) const { return g[id].op == op_kind::constant; }

  // Records why group gi has no kernel; returns false so callers can `return fail(...)`.
  constexpr bool fail(int gi, const char* why) {
    if (p.error == nullptr) {
      p.error = why;
      p.failed_group = gi;
    }
    return false;
  }
  constexpr launch& add(launch_kind k, int gi) {
    if (p.n_launches >= int(N))
      throw "cuda::plan_launches: more launches than nodes (a fusedsl bug)";
    launch& l = p.launches[std::size_t(p.n_launches++)];
    l.kind = k;
    l.group = gi;
    p.count[std::size_t(gi)] += 1;
    return l;
  }

  // ---- matmul groups ----
  constexpr bool map_gemm(int gi, int mm) {
    const node& n = g[mm];
    if (n.trans_a || n.trans_b)
      return fail(gi,
                  "matmul reads an operand transposed (trans_a/trans_b); the CUDA GEMM takes "
                  "row-major A[M,K] and B[K,N] (a layout copy is needed)");
    const strided_view a = plan::read_view(g, f, gi, n.in[0]), b = plan::read_view(g, f, gi, n.in[1]);
    if (!a.ok || !b.ok)
      return fail(gi, "a matmul operand is computed inside its group, not read from a buffer");
    if (g[a.base].type != n.type || g[b.base].type != n.type)
      return fail(
          gi,
          "matmul operands are widened from another dtype; the CUDA GEMM reads one storage type");
    const int ra = a.shape.rank;
    if (b.shape.rank != 2)
      return fail(gi, "batched matmul (right operand of rank > 2) has no CUDA kernel");
    gemm_launch gl;
    gl.k = int(a.shape[ra - 1]);
    gl.n = int(b.shape[1]);
    // A: contiguous rows of K elements; leading axes fold into M when laid out back to back.
    if (a.stride[std::size_t(ra - 1)] != 1 ||
        (ra >= 2 && a.stride[std::size_t(ra - 2)] != gl.k && a.shape[ra - 2] != 1))
      return fail(gi, "matmul: A is not a contiguous row-major [M, K] buffer");
    std::int64_t m = ra >= 2 ? a.shape[ra - 2] : 1, expect = std::int64_t(gl.k) * m;
    for (int ax = ra - 3; ax >= 0; --ax) {
      if (a.stride[std::size_t(ax)] != expect && a.shape[ax] != 1)
        return fail(gi, "matmul: A's leading axes are not laid out as consecutive row blocks");
      m *= a.shape[ax];
      expect *= a.shape[ax];
    }
    gl.m = int(m);
    if (b.shape[0] != gl.k || b.stride[1] != 1 || b.stride[0] != gl.n)
      return fail(gi, "matmul: B is not a contiguous row-major [K, N] buffer");
    if (is_half(n.type) && (gl.m % 32 != 0 || gl.n % 32 != 0 || gl.k % 32 != 0))
      return fail(gi, "matmul: the 16-bit tensor-core GEMM needs M, N and K to be multiples of 32");
    if ((a.offset * size_of(n.type)) % 16 != 0 || (b.offset * size_of(n.type)) % 16 != 0)
      return fail(gi,
                  "matmul: an operand view does not start on a 16-byte boundary (the GEMM loads "
                  "16-byte vectors)");
    gl.a = operand{a.base, a.offset};
    gl.b = operand{b.base, b.offset};
    // Epilogue: act(scale * acc + bias) + residual, each step optional, in that order.
    int tail = mm, stage = 0;
    for (;;) {
      int next = -1;
      for (int i = tail + 1; i < int(N) && next < 0; ++i)
        if (member(i, gi))
          for (int k = 0; k < g[i].n_in; ++k)
            if (g[i].in[std::size_t(k)] == tail && g[i].op != op_kind::matmul) next = i;
      if (next < 0) break;
      const node& c = g[next];
      const int other = c.n_in == 2 ? (c.in[0] == tail ? c.in[1] : c.in[0]) : -1;
      const bool buffer_operand =
          other >= 0 && !member(other, gi) && has_buffer(other) && g[other].type == c.type;
      if (!(c.shape == n.shape) || c.type != n.type)
        return fail(
            gi,
            "matmul epilogue changes the shape or dtype (a cast); the CUDA epilogue keeps both");
      if (stage == 0 && (c.op == op_kind::mul || c.op == op_kind::div) && c.in[0] == tail &&
          is_scalar_constant(other)) {
        gl.scale = c.op == op_kind::mul ? float(g[other].value) : float(1.0 / g[other].value);
        stage = 1;
      } else if (stage <= 1 && c.op == op_kind::add && buffer_operand &&
                 (g[other].shape == make_dims(gl.n) || g[other].shape == make_dims(1, gl.n))) {
        gl.bias = other;
        stage = 2;
      } else if (stage <= 2 && is_activation(c.op)) {
        gl.has_act = true;
        gl.act = c.op;
        stage = 3;
      } else if (stage <= 3 && c.op == op_kind::add && buffer_operand &&
                 g[other].shape == n.shape) {
        gl.residual = other;
        stage = 4;
      } else {
        return fail(gi,
                    "matmul epilogue has a step the CUDA GEMM epilogue does not express (only "
                    "scale, bias, activation, residual, in that order)");
      }
      tail = next;
    }
    if (!is_root(tail, gi))
      return fail(gi, "matmul epilogue does not end at a value the group writes");
    gl.out = tail;
    add(launch_kind::gemm, gi).gemm = gl;
    return true;
  }

  constexpr bool map_matmul_group(int gi) {
    int n_mm = 0;
    for (int i = 0; i < int(N); ++i)
      if (member(i, gi) && g[i].op == op_kind::matmul) {
        if (!map_gemm(gi, i)) return false;
        ++n_mm;
      }
    if (n_mm != f.groups[std::size_t(gi)].n_roots)
      return fail(gi, "matmul group writes a value that no GEMM produces");
    return true;
  }

  // ---- attention groups ----
  // pred == (iota over rows >= iota over columns) of an [L, L] shape: the causal mask.
  constexpr bool is_causal(int pred) const {
    const node& q = g[pred];
    if (q.op != op_kind::ge || q.shape.rank != 2) return false;
    const node &a = g[q.in[0]], &b = g[q.in[1]];
    return a.op == op_kind::iota && b.op == op_kind::iota && a.axis == 0 && b.axis == 1;
  }

  constexpr bool map_attention(int gi) {
    const plan::fusion_group& gr = f.groups[std::size_t(gi)];
    const int pv = gr.anchor, sm = g[pv].in[0];
    const dtype t = g[pv].type;
    if (!is_half(t))
      return fail(gi,
                  "attention on f32 operands: the CUDA flash-attention kernel takes bf16/f16 "
                  "(compute the model in bf16, or use the CPU executor)");
    if (g[sm].op != op_kind::softmax || g[sm].axis != g[sm].shape.rank - 1)
      return fail(gi, "attention group without a last-axis softmax");
    attention_launch al;
    float scale = 1.0f;
    int cur = g[sm].in[0];
    while (g[cur].op != op_kind::matmul) {
      const node& c = g[cur];
      if (c.op == op_kind::mul && is_scalar_constant(c.in[1]))
        scale *= float(g[c.in[1]].value);
      else if (c.op == op_kind::div && is_scalar_constant(c.in[1]))
        scale /= float(g[c.in[1]].value);
      else if (c.op == op_kind::select && is_causal(c.in[0]) && is_scalar_constant(c.in[2]) &&
               g[c.in[2]].value < -1e30)
        al.causal = true;
      else if (c.op != op_kind::reshape)
        return fail(gi,
                    "attention with a mask other than causal (additive or general select masks) "
                    "has no CUDA kernel");
      cur = c.op == op_kind::select ? c.in[1] : c.in[0];
    }
    const int s = cur;
    if (g[s].trans_a || !g[s].trans_b) return fail(gi, "attention scores are not Q K^T");
    int qn = g[s].in[0];
    if (g[qn].op == op_kind::reshape && member(qn, gi) && g[g[qn].in[0]].shape.rank == 3)
      qn = g[qn].in[0];
    const strided_view q = plan::read_view(g, f, gi, qn), k = plan::read_view(g, f, gi, g[s].in[1]),
                       v = plan::read_view(g, f, gi, g[pv].in[1]);
    int on = pv;
    for (int i = pv + 1; i < int(N); ++i)
      if (member(i, gi) && g[i].op == op_kind::reshape && g[i].in[0] == on &&
          g[i].shape.rank == 3 && g[i].shape == g[qn].shape)
        on = i;
    if (gr.n_roots != 1) return fail(gi, "attention group writes more than one value");
    const strided_view o = plan::write_view(g, gr.roots[0], on);
    if (!q.ok || !k.ok || !v.ok || !o.ok || q.shape.rank != 3 || k.shape.rank != 3 ||
        v.shape.rank != 3 || o.shape.rank != 3)
      return fail(gi,
                  "attention operands are not [heads, seq, head_dim] views of buffers (batched "
                  "attention has no CUDA mapping yet)");
    al.heads = int(q.shape[0]);
    al.seq_q = int(q.shape[1]);
    al.head_dim = int(q.shape[2]);
    al.kv_heads = int(k.shape[0]);
    al.seq_k = int(k.shape[1]);
    const std::int64_t dh = al.head_dim;
    const strided_view* views[] = {&q, &k, &v, &o};
    for (const strided_view* w : views)
      if (w->stride[2] != 1 || w->stride[0] != dh || w->stride[1] % 8 != 0 || w->offset % 8 != 0 ||
          g[w->base].type != t)
        return fail(gi,
                    "attention: a head view is not the row layout [seq, heads * head_dim] (row "
                    "stride and start multiples of 8 elements) the kernel reads");
    if (v.shape[0] != al.kv_heads || v.shape[2] != dh || o.shape[0] != al.heads ||
        al.heads % al.kv_heads != 0)
      return fail(gi, "attention: head counts of Q, K, V and O do not match");
    if (dh % 16 != 0 || dh > 256)
      return fail(gi, "attention: head_dim must be a multiple of 16, at most 256");
    if (al.seq_q % (dh >= 128 ? 128 : 64) != 0 || al.seq_k % 64 != 0)
      return fail(gi,
                  "attention: seq_q must be a multiple of the kernel's query block (64, or 128 at "
                  "head_dim >= 128) and seq_k of 64");
    if (al.causal && al.seq_q != al.seq_k) return fail(gi, "attention: causal with seq_q != seq_k");
    if (!(scale > 0.0f)) return fail(gi, "attention: the score scale must be positive");
    al.scale = scale;
    al.q = operand{q.base, q.offset};
    al.k = operand{k.base, k.offset};
    al.v = operand{v.base, v.offset};
    al.o = operand{o.base, o.offset};
    al.q_row_stride = q.stride[1];
    al.k_row_stride = k.stride[1];
    al.v_row_stride = v.stride[1];
    al.o_row_stride = o.stride[1];
    add(launch_kind::attention, gi).attention = al;
    return true;
  }

  // ---- loop programs ----
  // Register of operand `id` of a member, adding a constant, iota or load instruction when needed.
  constexpr int operand_register(loop_launch& lp, std::array<int, N>& reg, int gi, int id) {
    if (reg[std::size_t(id)] >= 0) return reg[std::size_t(id)];
    if (lp.n_instructions >= max_loop_instructions) return -1;
    loop_instruction in;
    const node& n = g[id];
    if (n.op == op_kind::constant && !member(id, gi)) {
      in.code = loop_code::constant;
      in.value = float(n.value);
    } else if (n.op == op_kind::iota && !member(id, gi)) {
      const int lead = lp.shape.rank - n.shape.rank;
      if (lead < 0 || n.shape[n.axis] != lp.shape[n.axis + lead]) return -1;
      in.code = loop_code::iota;
      in.axis = n.axis + lead;
    } else {
      strided_view v = plan::read_view(g, f, gi, id);
      if (!v.ok || !is_storage(g[v.base].type) || lp.n_loads >= max_loop_loads) return -1;
      v = plan::broadcast_view(v, lp.shape);
      if (!v.ok) return -1;
      loop_load& ld = lp.loads[std::size_t(lp.n_loads)];
      ld.node = v.base;
      ld.type = g[v.base].type;
      ld.offset = v.offset;
      ld.stride = v.stride;
      in.code = loop_code::load;
      in.load = lp.n_loads++;
    }
    const int r = lp.n_instructions++;
    lp.code[std::size_t(r)] = in;
    if (n.op != op_kind::constant && n.op != op_kind::iota) reg[std::size_t(id)] = r;
    return r;
  }

  // Members of gi after `after` (all members when -1); `preloaded` (a member) is read back from
  // the buffer of root `from` (the row kernel's output).
  constexpr bool map_loop(int gi, int after = -1, int preloaded = -1, int from = -1) {
    const plan::fusion_group& gr = f.groups[std::size_t(gi)];
    loop_launch lp;
    lp.shape = g[gr.roots[0]].shape;
    std::array<int, N> reg{};
    for (std::size_t i = 0; i < N; ++i) reg[i] = -1;
    for (int r = 0; r < gr.n_roots; ++r)
      if (!(g[gr.roots[std::size_t(r)]].shape == lp.shape) ||
          !is_storage(g[gr.roots[std::size_t(r)]].type))
        return fail(gi, "loop group writes values of different shapes, or a non-float dtype");
    if (preloaded >= 0) {
      loop_load& ld = lp.loads[std::size_t(lp.n_loads)];
      const strided_view v = plan::contiguous_view(from, lp.shape);
      ld.node = from;
      ld.type = g[from].type;
      ld.stride = v.stride;
      loop_instruction in;
      in.code = loop_code::load;
      in.load = lp.n_loads++;
      reg[std::size_t(preloaded)] = lp.n_instructions;
      lp.code[std::size_t(lp.n_instructions++)] = in;
    }
    for (int i = after + 1; i < int(N); ++i) {
      if (!member(i, gi) || i == preloaded) continue;
      const node& n = g[i];
      if (graph::is_elementwise(n.op)) {
        if (!(n.shape == lp.shape))
          return fail(gi,
                      "loop group computes a value whose shape differs from the group's output "
                      "(broadcast inside the group)");
        loop_instruction in;
        in.code = loop_code::apply;
        in.op = n.op;
        in.type = n.type;
        int ops[3] = {-1, -1, -1};
        for (int k = 0; k < n.n_in && k < 3; ++k) {
          ops[k] = operand_register(lp, reg, gi, n.in[std::size_t(k)]);
          if (ops[k] < 0)
            return fail(gi,
                        "loop group reads an operand that is not a strided view of a float buffer, "
                        "or exceeds 32 steps / 8 loads");
        }
        in.a = ops[0], in.b = ops[1], in.c = ops[2];
        if (lp.n_instructions >= max_loop_instructions)
          return fail(gi, "loop group needs more than 32 steps");
        reg[std::size_t(i)] = lp.n_instructions;
        lp.code[std::size_t(lp.n_instructions++)] = in;
      } else if (plan::detail::is_view_op(n.op) || n.op == op_kind::slice) {
        // Read through by the consumer's view; a layout op that is itself written is one load.
        if (is_root(i, gi) && operand_register(lp, reg, gi, i) < 0)
          return fail(gi, "loop group writes a layout op of a value computed inside the group");
      } else {
        return fail(gi, "loop group holds an op the CUDA loop program does not run (concat)");
      }
    }
    for (int r = 0; r < gr.n_roots; ++r) {
      const int root = gr.roots[std::size_t(r)];
      if (reg[std::size_t(root)] < 0)
        return fail(gi, "loop group writes a value it does not compute");
      lp.out_node[std::size_t(r)] = root;
      lp.out_register[std::size_t(r)] = reg[std::size_t(root)];
      lp.out_type[std::size_t(r)] = g[root].type;
    }
    lp.n_outputs = gr.n_roots;
    add(launch_kind::loop, gi).loop = lp;
    return true;
  }

  // ---- row groups ----
  constexpr bool map_row(int gi) {
    const plan::fusion_group& gr = f.groups[std::size_t(gi)];
    const int an = gr.anchor;
    const node& n = g[an];
    if (n.axis != n.shape.rank - 1) return fail(gi, "row kernel over an axis other than the last");
    if (gr.n_roots != 1) return fail(gi, "row group writes more than one value");
    const int root = gr.roots[0];
    row_launch rl;
    rl.op = n.op;
    rl.cols = int(n.shape.back());
    rl.rows = int(n.shape.size() / n.shape.back());
    if (rl.cols > 4096)
      return fail(gi, "row kernel: rows longer than 4096 do not fit one warp's registers");
    if (member(n.in[0], gi) || !has_buffer(n.in[0]) || !is_storage(g[n.in[0]].type))
      return fail(gi, "row kernel input is not a float buffer");
    if (!(g[root].shape == n.shape) || g[root].type != n.type)
      return fail(gi, "row group's epilogue changes the shape or dtype");
    rl.in = n.in[0];
    rl.out = root;
    rl.eps = float(n.value);
    for (int k = 1; k < n.n_in; ++k) {
      const int p = n.in[std::size_t(k)];
      if (member(p, gi) || !has_buffer(p) || g[p].type != n.type ||
          !(g[p].shape == make_dims(rl.cols)))
        return fail(gi, "row kernel: gamma/beta are not [cols] buffers of the output dtype");
      (k == 1 ? rl.gamma : rl.beta) = p;
    }
    add(launch_kind::row, gi).row = rl;
    if (root != an)
      return map_loop(gi, -1, an, root);  // the epilogue, in place over the row output
    return true;
  }

  constexpr bool map_group(int gi) {
    switch (f.groups[std::size_t(gi)].kind) {
      case plan::group_kind::matmul:
        return map_matmul_group(gi);
      case plan::group_kind::attention:
        return map_attention(gi);
      case plan::group_kind::row:
        return map_row(gi);
      case plan::group_kind::loop:
        return map_loop(gi);
      case plan::group_kind::reduce:
        return fail(
            gi, "reduce groups have no CUDA kernel yet (use the CPU executor for this program)");
      case plan::group_kind::repeat:
        if (g[f.groups[std::size_t(gi)].anchor].region != 0)
          return fail(gi, "nested stacks (a repeat inside a repeated body)");
        return true;  // the executor runs the body's launches once per layer
    }
    return false;
  }

  constexpr launch_plan<N> run() {
    // Every buffer the kernels touch holds f32, bf16 or f16.
    for (int i = 0; i < int(N); ++i) {
      const bool buffer = g[i].op == op_kind::input || g[i].op == op_kind::param;
      if (buffer && !is_storage(g[i].type)) {
        fail(-1, "an input or param is not f32, bf16 or f16");
        return p;
      }
    }
    for (int gi = 0; gi < f.n_groups; ++gi) {
      p.first[std::size_t(gi)] = p.n_launches;
      if (!map_group(gi)) return p;
    }
    merge_launches();
    return p;
  }

  // ---- device launches: siblings and gemm + layernorm (see launch_plan) ----
  static constexpr int max_siblings = 4;

  constexpr bool same_form(const gemm_launch& x, const gemm_launch& y) const {
    return x.m == y.m && x.n == y.n && x.k == y.k && x.a.node == y.a.node &&
           x.a.offset == y.a.offset && x.scale == y.scale && x.has_act == y.has_act &&
           (!x.has_act || x.act == y.act) && (x.bias >= 0) == (y.bias >= 0) &&
           (x.residual >= 0) == (y.residual >= 0) && g[x.b.node].type == g[y.b.node].type &&
           g[x.out].type == g[y.out].type;
  }

  // The group that runs right after group gi (same region, next in execution order), or -1.
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

  // gemm_layernorm's limits: a block owns 16 whole rows of at most 256 16-bit columns.
  constexpr bool layernorm_fits(const gemm_launch& e, const row_launch& r) const {
    return r.op == op_kind::layernorm && r.in == e.out && r.rows == e.m && r.cols == e.n &&
           e.n % 64 == 0 && e.n <= 256 && e.m % 16 == 0 && e.k % 32 == 0 &&
           is_half(g[e.a.node].type) && g[r.out].type == g[e.out].type && r.gamma >= 0 &&
           r.beta >= 0 && f.n_users[std::size_t(e.out)] == 1;
  }

  constexpr void merge_launches() {
    for (int l = 0; l < p.n_launches; ++l) p.layernorm[std::size_t(l)] = -1;
    for (int l = 0; l < p.n_launches; ++l) {
      const launch& d = p.launches[std::size_t(l)];
      if (d.kind != launch_kind::gemm || p.absorbed[std::size_t(l)]) continue;
      const int gi = d.group, end = p.first[std::size_t(gi)] + p.count[std::size_t(gi)];
      int sib = 0;
      while (sib + 1 < max_siblings && l + sib + 1 < end &&
             p.launches[std::size_t(l + sib + 1)].kind == launch_kind::gemm &&
             same_form(d.gemm, p.launches[std::size_t(l + sib + 1)].gemm))
        ++sib;
      if (sib > 0) {
        p.siblings[std::size_t(l)] = sib;
        for (int j = 1; j <= sib; ++j) p.absorbed[std::size_t(l + j)] = true;
        continue;
      }
      // A lone GEMM, last of its group, followed by a group that is one layernorm launch.
      const int ng = next_group(gi);
      if (l + 1 != end || ng < 0 || p.count[std::size_t(ng)] != 1) continue;
      const int r = p.first[std::size_t(ng)];
      if (p.launches[std::size_t(r)].kind == launch_kind::row &&
          layernorm_fits(d.gemm, p.launches[std::size_t(r)].row)) {
        p.layernorm[std::size_t(l)] = r;
        p.absorbed[std::size_t(r)] = true;
      }
    }
  }
};

}  // namespace detail

template <std::size_t N>
constexpr launch_plan<N> plan_launches(const graph::graph<N>& g, const plan::fusion_plan<N>& f) {
  detail::mapper<N> m{g, f, {}};
  return m.run();
}

}  // namespace fusedsl::cuda
