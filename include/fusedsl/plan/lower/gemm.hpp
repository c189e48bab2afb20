#pragma once
// GEMM groups: per matmul, A and B as strided views with batch strides and the epilogue program
// on the accumulator; then GEMM pairs across groups (SwiGLU's gate and up as one GEMM).
#include "fusedsl/plan/lower/lowering.hpp"

namespace fusedsl::plan::detail {

// A matmul group: up to four matmuls, each a part.
template <std::size_t N>
struct gemm_lowering : lowering<N> {
  FUSEDSL_LOWERING_BASE_NAMES

  // The epilogue chain of matmul mm: its members reached from mm through single consumers.
  constexpr int epilogue_tail(int mm) const {
    int tail = mm;
    for (;;) {
      int next = -1;
      for (int i = tail + 1; i < int(N) && next < 0; ++i)
        if (member(i) && program[i].op != op_kind::matmul)
          for (int k = 0; k < program[i].n_in; ++k)
            if (program[i].in[std::size_t(k)] == tail) next = i;
      if (next < 0) return tail;
      tail = next;
    }
  }

  constexpr const char* gemm_part_of(int mm, gemm_part& p) {
    const node& n = program[mm];
    p.matmul = mm;
    p.a = read_view(program, fusion, group, n.in[0]);
    p.b = read_view(program, fusion, group, n.in[1]);
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
    bool b_batched = false, b_repeats = false;  // B varies along a batch axis; B is broadcast
    for (int c = 0; c < p.batch_rank; ++c) {
      b_batched = b_batched || p.b_batch_stride[std::size_t(c)] != 0;
      b_repeats = b_repeats || (p.batch[c] > 1 && p.b_batch_stride[std::size_t(c)] == 0);
    }
    // A parameter B is packed at bind, a batched one slice by slice (each slice of it once: not
    // where it is broadcast along a batch axis, which would pack a slice again per index).
    p.b_param = program[p.b.base].op == op_kind::param && !(b_batched && b_repeats);
    p.b_slices = p.b_param && b_batched ? p.batch.size() : 1;
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
    if (program[p.out].type != dtype::f32 && program[p.out].type != dtype::bf16)
      return "a matmul group whose result is neither f32 nor bf16";
    emit_scope sc = scope();
    sc.input_node[0] = mm;
    const refinement ref = refinement::of(n.shape);
    const iter_space sp = ref.space();
    const int begin = desc.c.n_ins;
    emitter<emit_scope> e(sc, desc.c, sp);
    const int r = e.emit(p.out, ref.root_map());
    if (!e.req.ok())
      return e.req.kind == refine_request::fail ? e.req.why : "a matmul epilogue that reshapes";
    p.epilogue = {std::int16_t(begin), std::int16_t(desc.c.n_ins), std::int16_t(r)};
    p.store = store_access(p.out, ref.root_map());
    if (p.store < 0) return "a fusion group reads more than 32 distinct operand elements";
    return nullptr;
  }

  constexpr kernel_desc lower() {
    desc.kind = kernel_kind::gemm;
    for (int i = 0; i < int(N); ++i) {
      if (!member(i) || program[i].op != op_kind::matmul) continue;
      if (desc.n_gemm == max_roots) return refuse("a matmul group of more than four matmuls");
      gemm_part& p = desc.gemm[std::size_t(desc.n_gemm++)];
      if (const char* why = gemm_part_of(i, p)) return refuse(why);
      desc.rank = program[i].shape.rank;
    }
    return desc;
  }
};

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
  if (f.groups[std::size_t(du.group)].region != f.groups[std::size_t(d.group)].region) return false;
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

}  // namespace fusedsl::plan::detail
