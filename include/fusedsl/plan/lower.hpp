#pragma once
// plan::lower: each fusion group as a kernel descriptor, or the reason it cannot be one.
//
// The one place that knows what a group's members mean as a kernel; the backends implement
// descriptors and recognise no patterns themselves:
//   loop       an iteration space (the root's shape, refined) cut into segments, each a straight-
//              line program (plan/code.hpp) computing the root's element from loads, constants
//              and iotas; the store of the root
//   reduce     a program computing the reduced operand at each point of its iteration space, the
//              reduced iteration axes and the op; an epilogue on the reduced value; the store
//   row        softmax / log_softmax / layernorm / rmsnorm over the last iteration axis: a
//              prologue program computing the row input, gamma and beta, an epilogue program on
//              the row's result, the store
//   gemm       per matmul of the group: A and B as strided views with batch strides (A's batch
//              folded into its rows when they are laid out that way), the epilogue program on
//              the accumulator (input register 0) over the output's index space, the store
//   attention  Q, K, V, O as strided views [batch..., heads, seq, head_dim], grouped heads, the
//              scale, causal (iota-compare select with -inf), and anything else between Q Kᵀ and
//              the softmax as a score program over (batch..., kv head, group, query, key)
//   update     dynamic_update_slice: the operand copied to the result (nothing, when the result
//              takes the operand's buffer) and the update written at the run-time start
//   repeat     a stacked block (its body's groups have descriptors of their own)
// A refused group names its reason; the reasons are a closed list (docs/fusion.md, "Refusals"),
// and backends run such a group through their general path (the CPU interpreter).
#include <array>
#include <initializer_list>
#include <limits>

#include "fusedsl/plan/code.hpp"
#include "fusedsl/plan/groups.hpp"
#include "fusedsl/plan/view.hpp"

namespace fusedsl::plan {

enum class kernel_kind : std::uint8_t {
  loop,
  reduce,
  row,
  gemm,
  attention,
  update,
  repeat,
  refused
};

constexpr std::string_view name_of(kernel_kind k) {
  constexpr std::string_view names[] = {"loop",      "reduce", "row",    "gemm",
                                        "attention", "update", "repeat", "refused"};
  return names[std::size_t(k)];
}

inline constexpr int max_segments = 8;

// One box of the iteration space and the instructions that compute the root's value there.
struct segment {
  iter_vec lo{}, hi{};
  std::int16_t begin = 0, end = 0;  // its instructions [begin, end) of the kernel's code
  std::int16_t result = -1;         // the register holding the value written
};

// A program over an iteration space: code [begin, end), result register.
struct program_range {
  std::int16_t begin = 0, end = 0, result = -1;
  constexpr bool empty() const { return begin == end; }
};

struct gemm_part {
  int matmul = -1;  // the matmul node
  int out = -1;     // the node written: the last op of the epilogue
  strided_view a{}, b{};
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0;  // A(i, p) at a[i * lda + p], or a[p * lda + i] when trans_a
  bool trans_a = false;
  std::int64_t b_ks = 0, b_ns = 0;  // B(p, j) at b[p * b_ks + j * b_ns]
  bool b_param = false;             // B is a parameter read without batch: packed once, at bind
  // Batch: the output's leading axes. With `folded`, A's batch axes are its rows (m counts them)
  // and B has none; otherwise the kernel runs once per batch index.
  int batch_rank = 0;
  dims batch{};
  std::array<std::int64_t, max_rank> a_batch_stride{}, b_batch_stride{};
  bool folded = false;
  program_range epilogue{};  // over the output's index space (batch..., m, n); input 0: the acc
  int store = -1;            // access of the output's element
  int rows_per_batch = 0;    // folded: m of one batch index (the epilogue splits rows by it)
  // Horizontal fusion (pair_gemms): `pair` is a matmul of another group whose product the
  // epilogue reads (load `pair_access`, at the output's own element) and nothing else does, with
  // the same A, shape and rows and a parameter B of B's dtype (`pair_b`, B(p, j) at
  // pair_b[p * pair_b_ks + j * pair_b_ns]). A backend may compute both products in one pass over
  // [B | pair_b] and hand the second accumulator to the epilogue in place of that load; the other
  // group is then not run (its kernel_desc::paired_into names this group).
  int pair = -1, pair_access = -1;
  strided_view pair_b{};
  std::int64_t pair_b_ks = 0, pair_b_ns = 0;
};

struct attention_part {
  strided_view q{}, k{}, v{},
      o{};  // [batch..., heads, seq, head_dim] (o: [batch..., heads, seq, d])
  int batch_rank = 0;
  dims batch{};
  std::int64_t heads = 0, kv_heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  float scale = 1.0f;
  bool causal = false;       // where(iota_q + (seq_kv - seq_q) >= iota_k, s, -inf) last
  // Keys at or past a run-time length are masked: where(iota_k < len, s, -inf) (or iota_k <= pos:
  // len = pos + 1), len an i32 scalar (one for every batch index) or one per batch index; the
  // kernel reads keys [0, clamp(len, 0, seq_kv)) only, and causal counts from that length.
  int kv_len = -1;               // the node holding len (a buffer), or -1
  std::int64_t kv_len_offset = 0;  // len = value + offset
  bool kv_len_per_batch = false;
  program_range score{};     // the scores' other ops, over (batch..., kv head, group, query, key);
                             // input 0: q . k times `scale`; empty: none
};

struct kernel_desc {
  kernel_kind kind = kernel_kind::refused;
  const char* why = nullptr;  // refused: the reason
  int group = -1;
  int root = -1;              // loop, reduce, row: the node written
  // the iteration space (loop, reduce, row, attention's score program)
  int rank = 0;
  iter_vec extent{};
  int n_seg = 0;
  std::array<segment, max_segments> seg{};
  code c{};
  int store = -1;  // loop, reduce, row: the access of the root's element
  // reduce
  op_kind reduce_op = op_kind::reduce_sum;
  int reduce_first = 0, reduce_count = 0;  // the reduced iteration axes
  std::int64_t reduce_length = 1;
  program_range epilogue{};  // reduce, row: input 0 is the reduced value / the row op's result
  // row
  op_kind row_op = op_kind::softmax;
  float eps = 0.0f;
  int gamma = -1, beta = -1;  // accesses (over the iteration space; the row axis is the last)
  // gemm
  int n_gemm = 0;
  std::array<gemm_part, max_roots> gemm{};
  // attention
  attention_part att{};
  // update: result = x with `update` at [start, start + len) along update_axis
  int update_x = -1, update_value = -1, update_start = -1;  // nodes (start: an i32 scalar)
  int update_axis = 0;
  bool start_is_constant = false;
  std::int64_t start_constant = 0;
  // gemm: the group one of whose parts computes this group's one product as its pair (-1: none)
  int paired_into = -1;

  constexpr bool refused() const { return kind == kernel_kind::refused; }
};

namespace detail {

template <std::size_t N>
struct lowerer {
  const graph::graph<N>& g;
  const fusion_plan<N>& f;
  int gi;
  kernel_desc d{};

  constexpr lowerer(const graph::graph<N>& g_, const fusion_plan<N>& f_, int gi_)
      : g(g_), f(f_), gi(gi_) {
    d.group = gi;
  }

  constexpr emit_scope scope() const {
    emit_scope s;
    s.nodes = g.data();
    s.group_of = f.group_of.data();
    s.group = gi;
    return s;
  }
  constexpr bool member(int id) const { return f.group_of[std::size_t(id)] == gi; }
  constexpr kernel_desc refuse(const char* why) {
    kernel_desc r;
    r.group = gi;
    r.kind = kernel_kind::refused;
    r.why = why;
    return r;
  }
  constexpr int store_access(int id, const index_map& m) {
    access a;
    a.node = id;
    a.type = g[id].type;
    a.at = offset_row(m, g[id].shape);
    return d.c.add_access(a);
  }

  // The program computing `node` over the iteration space of the refined shape of `root`, cut
  // into segments; refines `ref` as the maps need. Sets d's space and segments. nullptr or why.
  template <class Scope>
  constexpr const char* program_over(int node, refinement& ref, const Scope& sc,
                                     index_map (*root_map)(const refinement&)) {
    for (int attempt = 0; attempt < 16; ++attempt) {
      d.c = code{};
      d.n_seg = 1;
      const iter_space full = ref.space();
      d.seg[0] = segment{};
      d.seg[0].lo = full.lo;
      d.seg[0].hi = full.hi;
      bool restart = false;
      for (int s = 0; s < d.n_seg && !restart; ++s) {
        iter_space sp = full;
        sp.lo = d.seg[std::size_t(s)].lo;
        sp.hi = d.seg[std::size_t(s)].hi;
        const int begin = d.c.n_ins;
        emitter<Scope> e(sc, d.c, sp);
        const int r = e.emit(node, root_map(ref));
        if (e.req.kind == refine_request::split_axis) {
          if (!ref.split(e.req.axis, e.req.at))
            return "a reshape needs a finer iteration than the kernel has axes";
          restart = true;
        } else if (e.req.kind == refine_request::split_box) {
          if (d.n_seg == max_segments)
            return "concats cut the iteration into more than eight parts";
          const int t = e.req.axis;
          segment cut = d.seg[std::size_t(s)];
          d.seg[std::size_t(s)].hi[std::size_t(t)] = e.req.at;
          cut.lo[std::size_t(t)] = e.req.at;
          d.seg[std::size_t(d.n_seg++)] = cut;
          d.c.n_ins = begin;  // lower this segment again, now narrower
          --s;
        } else if (e.req.kind == refine_request::fail) {
          return e.req.why;
        } else {
          d.seg[std::size_t(s)].begin = std::int16_t(begin);
          d.seg[std::size_t(s)].end = std::int16_t(d.c.n_ins);
          d.seg[std::size_t(s)].result = std::int16_t(r);
        }
      }
      if (!restart) {
        d.rank = ref.rank;
        d.extent = ref.extent;
        return nullptr;
      }
    }
    return "the iteration could not be refined to an affine one";
  }

  static constexpr index_map plain_root(const refinement& r) { return r.root_map(); }

  // ---- update ----
  constexpr kernel_desc update(int root) {
    const node& n = g[root];
    for (int k = 0; k < 3; ++k)
      if (member(n.in[std::size_t(k)]) && !graph::is_leaf(g[n.in[std::size_t(k)]].op))
        return refuse("a dynamic update slice whose operands are computed in its kernel");
    d.kind = kernel_kind::update;
    d.root = root;
    d.update_x = n.in[0];
    d.update_value = n.in[1];
    d.update_start = n.in[2];
    d.update_axis = n.axis;
    if (g[n.in[2]].op == op_kind::constant) {
      d.start_is_constant = true;
      d.start_constant = std::int64_t(g[n.in[2]].value);
    }
    if (g[n.in[0]].op == op_kind::constant || g[n.in[0]].op == op_kind::iota ||
        g[n.in[1]].op == op_kind::constant || g[n.in[1]].op == op_kind::iota)
      return refuse("a dynamic update slice of a constant or iota");
    return d;
  }

  // ---- loop ----
  constexpr kernel_desc loop() {
    const fusion_group& gr = f.groups[std::size_t(gi)];
    if (gr.n_roots != 1) return refuse("a loop group with more than one result");
    const int root = gr.roots[0];
    if (g[root].op == op_kind::dynamic_update_slice) return update(root);
    d.kind = kernel_kind::loop;
    d.root = root;
    refinement ref = refinement::of(g[root].shape);
    if (const char* why = program_over(root, ref, scope(), plain_root)) return refuse(why);
    d.store = store_access(root, ref.root_map());
    if (d.store < 0) return refuse("a fusion group reads more than 32 distinct operand elements");
    return d;
  }

  // ---- reduce ----
  constexpr kernel_desc reduce() {
    const fusion_group& gr = f.groups[std::size_t(gi)];
    const int red = gr.anchor;
    const node& rn = g[red];
    const int x = rn.in[0];
    d.kind = kernel_kind::reduce;
    d.reduce_op = rn.op;
    d.reduce_length = g[x].shape[rn.axis];
    refinement ref = refinement::of(g[x].shape);
    if (const char* why = program_over(x, ref, scope(), plain_root)) return refuse(why);
    if (d.n_seg != 1) return refuse("a concat across a reduced axis");
    d.reduce_first = ref.first[std::size_t(rn.axis)];
    d.reduce_count = ref.count[std::size_t(rn.axis)];
    // The reduced value's map: the operand's without the reduced axis (or with it at 0).
    const index_map xm = ref.root_map();
    index_map rm;
    rm.rank = rn.shape.rank;
    for (int c = 0, o = 0; c < g[x].shape.rank; ++c) {
      if (c == rn.axis) {
        if (rn.keepdims) ++o;  // a kept axis of extent 1 reads index 0
        continue;
      }
      rm.row[std::size_t(o++)] = xm.row[std::size_t(c)];
    }
    const int root = gr.roots[0];
    d.root = root;
    if (root != red) {  // an epilogue on the reduced value
      emit_scope sc = scope();
      sc.input_node[0] = red;
      iter_space sp = ref.space();
      const int begin = d.c.n_ins;
      emitter<emit_scope> e(sc, d.c, sp);
      const int r = e.emit(root, rm);
      if (!e.req.ok())
        return refuse(e.req.kind == refine_request::fail ? e.req.why
                                                         : "a reduce epilogue that reshapes");
      d.epilogue = {std::int16_t(begin), std::int16_t(d.c.n_ins), std::int16_t(r)};
    }
    d.store = store_access(root, rm);
    if (d.store < 0) return refuse("a fusion group reads more than 32 distinct operand elements");
    return d;
  }

  // ---- row ----
  constexpr kernel_desc row() {
    const fusion_group& gr = f.groups[std::size_t(gi)];
    const int op = gr.anchor;
    const node& n = g[op];
    d.kind = kernel_kind::row;
    d.row_op = n.op;
    d.eps = float(n.value);
    const dims& s = n.shape;
    // The row axis becomes the last iteration axis: iterate over s with that axis moved last.
    dims it = s;
    std::array<int, max_rank> from{};  // iteration axis -> axis of s
    for (int c = 0, o = 0; c < s.rank; ++c)
      if (c != n.axis) {
        it[o] = s[c];
        from[std::size_t(o++)] = c;
      }
    it[s.rank - 1] = s[n.axis];
    from[std::size_t(s.rank - 1)] = n.axis;
    refinement ref = refinement::of(it);
    // root map of s (and of every same-shape member) from the permuted iteration
    struct permuted {
      static constexpr index_map map(const refinement& r, const std::array<int, max_rank>& fr) {
        const index_map im = r.root_map();
        index_map m;
        m.rank = im.rank;
        for (int o = 0; o < im.rank; ++o)
          m.row[std::size_t(fr[std::size_t(o)])] = im.row[std::size_t(o)];
        return m;
      }
    };
    // A prologue program for the row input (x computed in the group, or a load of it).
    const int x = n.in[0];
    for (int attempt = 0; attempt < 8; ++attempt) {
      d.c = code{};
      const iter_space sp = ref.space();
      emitter<emit_scope> e(scope(), d.c, sp);
      const index_map m = permuted::map(ref, from);
      const int rx = e.emit(x, m);
      if (e.req.kind == refine_request::split_axis) {
        if (e.req.axis == ref.rank - 1 || !ref.split(e.req.axis, e.req.at))
          return refuse("a row prologue that reshapes the row axis");
        continue;
      }
      if (!e.req.ok())
        return refuse(e.req.kind == refine_request::fail ? e.req.why
                                                         : "a concat in a row prologue");
      d.n_seg = 1;
      d.seg[0].lo = sp.lo;
      d.seg[0].hi = sp.hi;
      d.seg[0].begin = 0;
      d.seg[0].end = std::int16_t(d.c.n_ins);
      d.seg[0].result = std::int16_t(rx);
      if (ref.count[std::size_t(s.rank - 1)] != 1)
        return refuse("a row prologue that reshapes the row axis");
      // gamma, beta: [C] loads along the row axis
      for (int k = 1; k < n.n_in; ++k) {
        const int p = n.in[std::size_t(k)];
        if (member(p)) return refuse("a norm whose gamma or beta is computed in its group");
        access a;
        a.node = p;
        a.type = g[p].type;
        a.at = offset_row(broadcast_map(m, g[p].shape, s), g[p].shape);
        const int ref_k = d.c.add_access(a);
        if (ref_k < 0) return refuse("a fusion group reads more than 32 distinct operand elements");
        (k == 1 ? d.gamma : d.beta) = ref_k;
      }
      const int root = gr.roots[0];
      d.root = root;
      if (root != op) {
        emit_scope sc = scope();
        sc.input_node[0] = op;
        const int begin = d.c.n_ins;
        emitter<emit_scope> e2(sc, d.c, sp);
        const int r = e2.emit(root, m);
        if (!e2.req.ok())
          return refuse(e2.req.kind == refine_request::fail ? e2.req.why
                                                            : "a row epilogue that reshapes");
        d.epilogue = {std::int16_t(begin), std::int16_t(d.c.n_ins), std::int16_t(r)};
      }
      d.rank = ref.rank;
      d.extent = ref.extent;
      d.store = store_access(root, m);
      if (d.store < 0) return refuse("a fusion group reads more than 32 distinct operand elements");
      return d;
    }
    return refuse("a row prologue that reshapes the row axis");
  }

  // ---- gemm ----
  // The epilogue chain of matmul mm: its members reached from mm through single consumers.
  constexpr int epilogue_tail(int mm) const {
    int tail = mm;
    for (;;) {
      int next = -1;
      for (int i = tail + 1; i < int(N) && next < 0; ++i)
        if (member(i) && g[i].op != op_kind::matmul)
          for (int k = 0; k < g[i].n_in; ++k)
            if (g[i].in[std::size_t(k)] == tail) next = i;
      if (next < 0) return tail;
      tail = next;
    }
  }

  constexpr const char* gemm_part_of(int mm, gemm_part& p) {
    const node& n = g[mm];
    p.matmul = mm;
    p.a = read_view(g, f, gi, n.in[0]);
    p.b = read_view(g, f, gi, n.in[1]);
    if (!p.a.ok || !p.b.ok) return "a matmul operand read through an op that is not a view";
    const int ra = p.a.shape.rank, rb = p.b.shape.rank, ro = n.shape.rank;
    p.n = n.shape[ro - 1];
    p.trans_a = n.trans_a;
    // A: unit stride along k (or, transposed, along m).
    const std::int64_t s_last = p.a.stride[std::size_t(ra - 1)],
                       s_prev = p.a.stride[std::size_t(ra - 2)];
    if (!n.trans_a) {
      p.m = p.a.shape[ra - 2];
      p.k = p.a.shape[ra - 1];
      if (s_last != 1 && p.k > 1) {
        if (s_prev == 1 && p.m > 1) {  // stored transposed
          p.trans_a = true;
          p.lda = s_last;
        } else {
          return "a matmul whose A has no unit-stride axis";
        }
      } else {
        p.lda = s_prev;
      }
    } else {
      p.k = p.a.shape[ra - 2];
      p.m = p.a.shape[ra - 1];
      if (s_last != 1 && p.m > 1) {
        if (s_prev == 1 && p.k > 1) {
          p.trans_a = false;
          p.lda = s_last;
        } else {
          return "a matmul whose A has no unit-stride axis";
        }
      } else {
        p.lda = s_prev;
      }
    }
    if (p.lda == 0) p.lda = p.trans_a ? p.m : p.k;
    p.b_ks = p.b.stride[std::size_t(rb - (n.trans_b ? 1 : 2))];
    p.b_ns = p.b.stride[std::size_t(rb - (n.trans_b ? 2 : 1))];
    // Batch axes of the output; A's and B's broadcast against them.
    p.batch_rank = ro - 2;
    p.batch.rank = ro - 2;
    for (int c = 0; c < ro - 2; ++c) {
      p.batch[c] = n.shape[c];
      const int ca = c - (ro - ra), cb = c - (ro - rb);
      p.a_batch_stride[std::size_t(c)] =
          ca >= 0 && p.a.shape[ca] != 1 ? p.a.stride[std::size_t(ca)] : 0;
      p.b_batch_stride[std::size_t(c)] =
          cb >= 0 && p.b.shape[cb] != 1 ? p.b.stride[std::size_t(cb)] : 0;
    }
    bool b_batched = false;
    for (int c = 0; c < p.batch_rank; ++c)
      b_batched = b_batched || p.b_batch_stride[std::size_t(c)] != 0;
    p.b_param = g[p.b.base].op == op_kind::param && !b_batched;
    p.rows_per_batch = int(p.m);
    // A's batch axes fold into its rows when laid out as consecutive row blocks and B has none.
    if (!b_batched && !p.trans_a && p.batch_rank > 0) {
      bool fold = true;
      std::int64_t expect = p.lda * p.m;
      for (int c = p.batch_rank - 1; c >= 0 && fold; --c) {
        if (p.batch[c] == 1) continue;
        if (p.a_batch_stride[std::size_t(c)] != expect) fold = false;
        expect *= p.batch[c];
      }
      if (fold) {
        p.folded = true;
        p.m *= p.batch.size();
      }
    }
    // The epilogue over the output's index space, the accumulator as input 0.
    p.out = epilogue_tail(mm);
    if (g[p.out].type != dtype::f32 && g[p.out].type != dtype::bf16)
      return "a matmul group whose result is neither f32 nor bf16";
    emit_scope sc = scope();
    sc.input_node[0] = mm;
    const refinement ref = refinement::of(n.shape);
    const iter_space sp = ref.space();
    const int begin = d.c.n_ins;
    emitter<emit_scope> e(sc, d.c, sp);
    const int r = e.emit(p.out, ref.root_map());
    if (!e.req.ok())
      return e.req.kind == refine_request::fail ? e.req.why : "a matmul epilogue that reshapes";
    p.epilogue = {std::int16_t(begin), std::int16_t(d.c.n_ins), std::int16_t(r)};
    p.store = store_access(p.out, ref.root_map());
    if (p.store < 0) return "a fusion group reads more than 32 distinct operand elements";
    return nullptr;
  }

  constexpr kernel_desc gemm() {
    d.kind = kernel_kind::gemm;
    for (int i = 0; i < int(N); ++i) {
      if (!member(i) || g[i].op != op_kind::matmul) continue;
      if (d.n_gemm == max_roots) return refuse("a matmul group of more than four matmuls");
      gemm_part& p = d.gemm[std::size_t(d.n_gemm++)];
      if (const char* why = gemm_part_of(i, p)) return refuse(why);
      d.rank = g[i].shape.rank;
    }
    return d;
  }

  // ---- attention ----
  // The index an iota-like value holds at map m: an iota, or an iota plus a constant.
  constexpr bool iota_index(int id, const index_map& m, affine_row& out) const {
    const node& n = g[id];
    if (n.op == op_kind::iota) {
      out = m.row[std::size_t(n.axis)];
      return true;
    }
    if (n.op != op_kind::add) return false;
    for (int k = 0; k < 2; ++k) {
      const node &a = g[n.in[std::size_t(k)]], &c = g[n.in[std::size_t(1 - k)]];
      if (c.op == op_kind::constant &&
          iota_index(n.in[std::size_t(k)], broadcast_map(m, a.shape, n.shape), out)) {
        out.base += std::int64_t(c.value);
        return true;
      }
    }
    return false;
  }
  // pred is (query index + a) >= (key index + b) with a - b = seq_kv - seq_q: the causal mask, as
  // the kernel aligns it (the last query with the last key).
  constexpr bool is_causal_pred(int pred, const index_map& m, int tq, int tk,
                                std::int64_t offset) const {
    const node& p = g[pred];
    if (p.op != op_kind::ge) return false;
    affine_row ra, rb;
    if (!iota_index(p.in[0], broadcast_map(m, g[p.in[0]].shape, p.shape), ra) ||
        !iota_index(p.in[1], broadcast_map(m, g[p.in[1]].shape, p.shape), rb))
      return false;
    return unit_axis(ra, max_iter_rank) == tq && unit_axis(rb, max_iter_rank) == tk &&
           ra.base - rb.base == offset;
  }

  // pred is (key index) < (a run-time scalar + c) or <= ...: the key-length mask. Sets a's fields.
  constexpr bool is_kv_len_pred(int pred, const index_map& m, int tk, attention_part& a) const {
    const node& p = g[pred];
    int key = -1, len = -1;
    bool inclusive = false;
    if (p.op == op_kind::lt || p.op == op_kind::le)
      key = p.in[0], len = p.in[1], inclusive = p.op == op_kind::le;
    else if (p.op == op_kind::gt || p.op == op_kind::ge)
      key = p.in[1], len = p.in[0], inclusive = p.op == op_kind::ge;
    else return false;
    affine_row rk;
    if (!iota_index(key, broadcast_map(m, g[key].shape, p.shape), rk) ||
        unit_axis(rk, max_iter_rank) != tk || rk.base != 0)
      return false;
    std::int64_t offset = inclusive ? 1 : 0;
    if (g[len].op == op_kind::add && member(len)) {  // len + c
      const node& ln = g[len];
      const int k = g[ln.in[1]].op == op_kind::constant   ? 1
                    : g[ln.in[0]].op == op_kind::constant ? 0
                                                          : -1;
      if (k < 0) return false;
      offset += std::int64_t(g[ln.in[std::size_t(k)]].value);
      len = ln.in[std::size_t(1 - k)];
    }
    const node& ln = g[len];
    if ((member(len) && !graph::is_leaf(ln.op)) || ln.op == op_kind::constant ||
        ln.op == op_kind::iota || ln.type != dtype::i32)
      return false;
    if (ln.shape.size() == 1) {
      a.kv_len_per_batch = false;
    } else if (a.batch_rank > 0 && ln.shape.size() == a.batch.size()) {
      a.kv_len_per_batch = true;  // one per batch index, in the batch's row-major order
    } else {
      return false;
    }
    a.kv_len = len;
    a.kv_len_offset = offset;
    return true;
  }

  constexpr kernel_desc attention() {
    const fusion_group& gr = f.groups[std::size_t(gi)];
    const int pv = gr.anchor, sm = g[pv].in[0];
    attention_part& a = d.att;
    d.kind = kernel_kind::attention;
    // Walk down from the softmax to Q Kᵀ: the chain of scale, mask and reshape ops.
    int qk = g[sm].in[0];
    while (g[qk].op != op_kind::matmul) {
      const node& c = g[qk];
      qk = c.op == op_kind::select ? c.in[1] : c.in[0];
      if (!member(qk)) return refuse("an attention whose scores are not a member matmul");
    }
    const node& s = g[qk];
    if (s.trans_a) return refuse("an attention whose scores are not Q Kᵀ");
    // Q: [..., H, L, dh], possibly through the grouped-heads reshape [..., Hkv, G*L, dh].
    int qn = s.in[0];
    if (g[qn].op == op_kind::reshape && member(qn) && g[g[qn].in[0]].shape.rank == g[qn].shape.rank)
      qn = g[qn].in[0];
    // Q, K and V read through layout ops; K and V also through a cast widening a narrow buffer
    // (a bf16 KV cache), which the executor reads as it is or widens.
    a.q = read_view(g, f, gi, qn);
    a.k = read_view(g, f, gi, s.in[1], true);
    if (!s.trans_b && a.k.ok) {  // K read through a transpose of its last two axes: undo it
      const int rk = a.k.shape.rank;
      const std::int64_t e = a.k.shape[rk - 1], st = a.k.stride[std::size_t(rk - 1)];
      a.k.shape[rk - 1] = a.k.shape[rk - 2];
      a.k.stride[std::size_t(rk - 1)] = a.k.stride[std::size_t(rk - 2)];
      a.k.shape[rk - 2] = e;
      a.k.stride[std::size_t(rk - 2)] = st;
    }
    a.v = read_view(g, f, gi, g[pv].in[1], true);
    // O: the value after pv, after the grouped-heads reshape back to [..., H, L, dh], if any.
    int on = pv;
    for (int i = pv + 1; i < int(N); ++i)
      if (member(i) && g[i].op == op_kind::reshape && g[i].in[0] == on && g[i].shape == g[qn].shape)
        on = i;
    a.o = write_view(g, gr.roots[0], on);
    if (!a.q.ok || !a.k.ok || !a.v.ok || !a.o.ok)
      return refuse("an attention operand that is not a view");
    const int r = a.q.shape.rank;
    if (r < 3 || a.k.shape.rank != r || a.v.shape.rank != r || a.o.shape.rank != r)
      return refuse("an attention whose Q, K, V and O differ in rank");
    if (a.q.stride[std::size_t(r - 1)] != 1 || a.k.stride[std::size_t(r - 1)] != 1 ||
        a.v.stride[std::size_t(r - 1)] != 1 || a.o.stride[std::size_t(r - 1)] != 1)
      return refuse("an attention whose head_dim axis is not contiguous");
    a.batch_rank = r - 3;
    a.batch.rank = r - 3;
    for (int c = 0; c < r - 3; ++c) {
      a.batch[c] = a.q.shape[c];
      if (a.k.shape[c] != a.batch[c] || a.v.shape[c] != a.batch[c])
        return refuse("an attention whose batch axes broadcast");
    }
    a.heads = a.q.shape[r - 3];
    a.seq_q = a.q.shape[r - 2];
    a.head_dim = a.q.shape[r - 1];
    a.kv_heads = a.k.shape[r - 3];
    a.seq_kv = a.k.shape[r - 2];
    if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0 || a.v.shape[r - 3] != a.kv_heads ||
        a.v.shape[r - 2] != a.seq_kv || a.v.shape[r - 1] != a.head_dim ||
        a.o.shape[r - 3] != a.heads)
      return refuse("an attention whose Q, K, V shapes do not agree");
    const std::int64_t group = a.heads / a.kv_heads;
    // The score program's iteration: (batch..., kv head, group, query, key).
    refinement ref;
    ref.root_rank = 0;
    ref.rank = r - 3 + 4;
    for (int c = 0; c < r - 3; ++c) ref.extent[std::size_t(c)] = a.batch[c];
    ref.extent[std::size_t(r - 3)] = a.kv_heads;
    ref.extent[std::size_t(r - 2)] = group;
    ref.extent[std::size_t(r - 1)] = a.seq_q;
    ref.extent[std::size_t(r)] = a.seq_kv;
    const int tq = r - 1, tk = r;
    // The softmax input's map: [batch..., Hkv, G*L, Lk] (one reshape of Q) or [batch..., H, L, Lk].
    const dims ss = g[sm].shape;
    if (ss.rank != r) return refuse("an attention whose scores have an unexpected rank");
    index_map m;
    m.rank = r;
    for (int c = 0; c < r - 3; ++c) m.row[std::size_t(c)].coef[std::size_t(c)] = 1;
    if (ss[r - 3] == a.kv_heads && ss[r - 2] == group * a.seq_q) {
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 3)] = 1;
      if (group > 1)
        m.row[std::size_t(r - 2)].coef[std::size_t(r - 2)] =
            a.seq_q;  // the g axis (extent 1: none)
      m.row[std::size_t(r - 2)].coef[std::size_t(r - 1)] = 1;
    } else if (ss[r - 3] == a.heads && ss[r - 2] == a.seq_q) {
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 3)] = group;
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 2)] = 1;
      m.row[std::size_t(r - 2)].coef[std::size_t(r - 1)] = 1;
    } else {
      return refuse("an attention whose scores have an unexpected shape");
    }
    m.row[std::size_t(r - 1)].coef[std::size_t(tk)] = 1;
    // The chain: a scale right above Q Kᵀ folds into the kernel's scale; a causal select with -inf
    // right below the softmax is the kernel's causal mode; anything between is the score program.
    const iter_space sp = ref.space();
    int top = g[sm].in[0];
    index_map top_map = m;
    auto through_reshape = [&](int id, index_map& mm) {
      const map_result rr = reshape_map(mm, g[id].shape, g[g[id].in[0]].shape, sp);
      mm = rr.map;
      return rr.req.ok();
    };
    for (;;) {  // reshapes, a causal select and a key-length select peel off the top
      const node& c = g[top];
      if (a.kv_len < 0 && c.op == op_kind::select && g[c.in[2]].op == op_kind::constant &&
          g[c.in[2]].value == -std::numeric_limits<double>::infinity() &&
          is_kv_len_pred(c.in[0], broadcast_map(top_map, g[c.in[0]].shape, c.shape), tk, a)) {
        top = c.in[1];
        top_map = broadcast_map(top_map, g[top].shape, c.shape);
        continue;
      }
      if (c.op == op_kind::reshape) {
        if (!through_reshape(top, top_map))
          return refuse("an attention whose score reshapes are not affine");
        top = c.in[0];
        continue;
      }
      if (!a.causal && c.op == op_kind::select && g[c.in[2]].op == op_kind::constant &&
          g[c.in[2]].value == -std::numeric_limits<double>::infinity() &&
          is_causal_pred(c.in[0], broadcast_map(top_map, g[c.in[0]].shape, c.shape), tq, tk,
                         a.seq_kv - a.seq_q)) {
        a.causal = true;
        top = c.in[1];
        top_map = broadcast_map(top_map, g[top].shape, c.shape);
        continue;
      }
      break;
    }
    // A constant scale directly above Q Kᵀ (through reshapes).
    int bottom = qk;
    a.scale = 1.0f;
    {
      // Walk up from qk through single-consumer reshapes and constant scales.
      int cur = qk;
      for (;;) {
        int up = -1;
        for (int i = cur + 1; i < int(N) && up < 0; ++i)
          if (member(i))
            for (int k = 0; k < g[i].n_in; ++k)
              if (g[i].in[std::size_t(k)] == cur) up = i;
        if (up < 0 || cur == top) break;
        const node& u = g[up];
        const bool scale = (u.op == op_kind::mul || u.op == op_kind::div) && u.in[0] == cur &&
                           g[u.in[1]].op == op_kind::constant;
        if (!scale) break;
        a.scale = u.op == op_kind::mul ? a.scale * float(g[u.in[1]].value)
                                       : a.scale / float(g[u.in[1]].value);
        bottom = up;
        if (up == top) break;
        cur = up;
      }
    }
    if (top != bottom) {  // the score program from `bottom` (input 0) to `top`
      emit_scope sc = scope();
      sc.input_node[0] = bottom;
      emitter<emit_scope> e(sc, d.c, sp);
      const int res = e.emit(top, top_map);
      if (!e.req.ok())
        return refuse(e.req.kind == refine_request::fail
                          ? e.req.why
                          : "an attention score program that reshapes");
      // The input must be read at the plain score index: check the map the emitter used for it.
      for (int i = 0; i < d.c.n_ins; ++i)
        if (d.c.instr[std::size_t(i)].kind == ins_kind::input &&
            !(e.memo_map[std::size_t(i)] == qk_map(bottom, m, sp)))
          return refuse("an attention whose score program reads the scores at another index");
      a.score = {0, std::int16_t(d.c.n_ins), std::int16_t(res)};
    }
    d.rank = ref.rank;
    d.extent = ref.extent;
    return d;
  }

  // The map at which node `id` (Q Kᵀ or a scale of it, shape [..., Hkv, G*L, Lk] or [..., H, L,
  // Lk]) holds the score of (batch..., kv head, group, query, key).
  constexpr index_map qk_map(int id, const index_map& softmax_map, const iter_space&) const {
    const dims s = g[id].shape;
    const int r = s.rank;
    index_map m = softmax_map;
    const attention_part& a = d.att;
    const std::int64_t group = a.heads / a.kv_heads;
    m = index_map{};
    m.rank = r;
    for (int c = 0; c < r - 3; ++c) m.row[std::size_t(c)].coef[std::size_t(c)] = 1;
    if (s[r - 3] == a.kv_heads && s[r - 2] == group * a.seq_q) {
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 3)] = 1;
      if (group > 1)
        m.row[std::size_t(r - 2)].coef[std::size_t(r - 2)] =
            a.seq_q;  // the g axis (extent 1: none)
      m.row[std::size_t(r - 2)].coef[std::size_t(r - 1)] = 1;
    } else {
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 3)] = group;
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 2)] = 1;
      m.row[std::size_t(r - 2)].coef[std::size_t(r - 1)] = 1;
    }
    m.row[std::size_t(r - 1)].coef[std::size_t(r)] = 1;
    return m;
  }

  constexpr kernel_desc run() {
    const fusion_group& gr = f.groups[std::size_t(gi)];
    for (int i = 0; i < int(N); ++i)
      if (member(i) && g[i].type != dtype::f32 && !is_floating(g[i].type) &&
          g[i].type != dtype::i32 && g[i].type != dtype::boolean)
        return refuse("a value of an unknown dtype");
    switch (gr.kind) {
      case group_kind::loop: return loop();
      case group_kind::reduce: return reduce();
      case group_kind::row: return row();
      case group_kind::matmul: return gemm();
      case group_kind::attention: return attention();
      case group_kind::repeat: {
        if (g[gr.anchor].region != 0) return refuse("a stack inside a stack");
        kernel_desc r;
        r.kind = kernel_kind::repeat;
        r.group = gi;
        r.root = gr.anchor;
        return r;
      }
    }
    return refuse("a group of an unknown kind");
  }
};

}  // namespace detail

// The kernel descriptor of group gi.
template <std::size_t N>
constexpr kernel_desc lower_group(const graph::graph<N>& g, const fusion_plan<N>& f, int gi) {
  detail::lowerer<N> l(g, f, gi);
  return l.run();
}

// Every group's descriptor, indexed by group.
template <std::size_t N, int G>
struct lowered_plan {
  std::array<kernel_desc, std::size_t(G > 0 ? G : 1)> desc{};
  int n_refused = 0;
  constexpr const kernel_desc& operator[](int gi) const { return desc[std::size_t(gi)]; }
};

namespace detail {

constexpr bool same_view(const strided_view& x, const strided_view& y) {
  if (x.base != y.base || x.offset != y.offset || !(x.shape == y.shape)) return false;
  for (int c = 0; c < x.shape.rank; ++c)
    if (x.stride[std::size_t(c)] != y.stride[std::size_t(c)]) return false;
  return true;
}

// Whether part u (the one product of group gu) can be computed as part p's pair: its product is
// an f32 matmul with no epilogue, read by p's epilogue at p's output element and by nothing else,
// in the same region, over the same A with the same rows and shape, and B is a parameter of the
// dtype of p's B.
template <std::size_t N>
constexpr bool pairs_with(const graph::graph<N>& g, const fusion_plan<N>& f, const kernel_desc& d,
                          const gemm_part& p, const kernel_desc& du, int access) {
  if (du.kind != kernel_kind::gemm || du.n_gemm != 1 || du.paired_into >= 0) return false;
  const gemm_part& u = du.gemm[0];
  if (u.out != u.matmul || g[u.matmul].type != dtype::f32) return false;
  if (f.n_users[std::size_t(u.matmul)] != 1) return false;  // a program output counts as a user
  if (f.groups[std::size_t(du.group)].region != f.groups[std::size_t(d.group)].region)
    return false;
  if (!p.b_param || !u.b_param || g[p.b.base].type != g[u.b.base].type) return false;
  if (!same_view(p.a, u.a) || p.trans_a != u.trans_a || p.lda != u.lda || p.m != u.m ||
      p.n != u.n || p.k != u.k || p.folded != u.folded || !(p.batch == u.batch) ||
      p.rows_per_batch != u.rows_per_batch || g[p.matmul].trans_a != g[u.matmul].trans_a)
    return false;
  if (p.batch.size() != 1 && !p.folded) return false;
  if (!(g[u.matmul].shape == g[p.out].shape)) return false;
  // The load reads the product at the element the epilogue writes (over the output's index space;
  // an axis of extent 1 may carry any coefficient).
  const affine_row &x = d.c.acc[std::size_t(access)].at, &y = d.c.acc[std::size_t(p.store)].at;
  if (x.base != y.base) return false;
  const dims& s = g[p.out].shape;
  for (int t = 0; t < max_iter_rank; ++t)
    if (x.coef[std::size_t(t)] != y.coef[std::size_t(t)] && (t >= s.rank || s[t] != 1))
      return false;
  return true;
}

// Horizontal fusion of GEMM pairs: for each GEMM part whose epilogue loads the product of another
// group's lone matmul (SwiGLU's silu(gate) * up), record that matmul as the part's pair.
template <std::size_t N, int G>
constexpr void pair_gemms(const graph::graph<N>& g, const fusion_plan<N>& f,
                          std::array<kernel_desc, std::size_t(G > 0 ? G : 1)>& desc) {
  for (int gi = 0; gi < G; ++gi) {
    kernel_desc& d = desc[std::size_t(gi)];
    if (d.kind != kernel_kind::gemm || d.paired_into >= 0) continue;
    for (int q = 0; q < d.n_gemm; ++q) {
      gemm_part& p = d.gemm[std::size_t(q)];
      for (int i = p.epilogue.begin; i < p.epilogue.end && p.pair < 0; ++i) {
        const ins& x = d.c.instr[std::size_t(i)];
        if (x.kind != ins_kind::load) continue;
        const int u = d.c.acc[std::size_t(x.ref)].node;
        if (u < 0 || g[u].op != op_kind::matmul) continue;
        const int gu = f.group_of[std::size_t(u)];
        if (gu < 0 || gu == gi || !pairs_with(g, f, d, p, desc[std::size_t(gu)], x.ref)) continue;
        const gemm_part& o = desc[std::size_t(gu)].gemm[0];
        p.pair = u;
        p.pair_access = x.ref;
        p.pair_b = o.b;
        p.pair_b_ks = o.b_ks;
        p.pair_b_ns = o.b_ns;
        desc[std::size_t(gu)].paired_into = gi;
      }
    }
  }
}

}  // namespace detail

template <int G, std::size_t N>
constexpr lowered_plan<N, G> lower(const graph::graph<N>& g, const fusion_plan<N>& f) {
  lowered_plan<N, G> p;
  for (int gi = 0; gi < G; ++gi) {
    p.desc[std::size_t(gi)] = lower_group(g, f, gi);
    p.n_refused += p.desc[std::size_t(gi)].refused();
  }
  detail::pair_gemms<N, G>(g, f, p.desc);
  return p;
}

}  // namespace fusedsl::plan
