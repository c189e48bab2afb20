#pragma once
// Attention groups: Q, K, V and O as strided views, grouped heads, the scale, causal and key-length
// masks recognised, anything else between Q Kᵀ and the softmax as a score program.
#include <limits>

#include "fusedsl/plan/lower/lowering.hpp"

namespace fusedsl::plan::detail {

// An attention group.
template <std::size_t N>
struct attention_lowering : lowering<N> {
  FUSEDSL_LOWERING_BASE_NAMES

  // The index an iota-like value holds at map m: an iota, or an iota plus a constant.
  constexpr bool iota_index(int id, const index_map& m, affine_row& out) const {
    const node& n = program[id];
    if (n.op == op_kind::iota) {
      out = m.row[std::size_t(n.axis)];
      return true;
    }
    if (n.op != op_kind::add) return false;
    for (int k = 0; k < 2; ++k) {
      const node &a = program[n.in[std::size_t(k)]], &c = program[n.in[std::size_t(1 - k)]];
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
    const node& p = program[pred];
    if (p.op != op_kind::ge) return false;
    affine_row ra, rb;
    if (!iota_index(p.in[0], broadcast_map(m, program[p.in[0]].shape, p.shape), ra) ||
        !iota_index(p.in[1], broadcast_map(m, program[p.in[1]].shape, p.shape), rb))
      return false;
    return unit_axis(ra, max_iter_rank) == tq && unit_axis(rb, max_iter_rank) == tk &&
           ra.base - rb.base == offset;
  }

  // pred is (key index) < (a run-time scalar + c) or <= ...: the key-length mask. Sets a's fields.
  constexpr bool is_kv_len_pred(int pred, const index_map& m, int tk, attention_part& a) const {
    const node& p = program[pred];
    int key = -1, len = -1;
    bool inclusive = false;
    if (p.op == op_kind::lt || p.op == op_kind::le)
      key = p.in[0], len = p.in[1], inclusive = p.op == op_kind::le;
    else if (p.op == op_kind::gt || p.op == op_kind::ge)
      key = p.in[1], len = p.in[0], inclusive = p.op == op_kind::ge;
    else
      return false;
    affine_row key_row;
    if (!iota_index(key, broadcast_map(m, program[key].shape, p.shape), key_row) ||
        unit_axis(key_row, max_iter_rank) != tk || key_row.base != 0)
      return false;
    std::int64_t offset = inclusive ? 1 : 0;
    if (program[len].op == op_kind::add && member(len)) {  // len + c
      const node& ln = program[len];
      const int k = program[ln.in[1]].op == op_kind::constant   ? 1
                    : program[ln.in[0]].op == op_kind::constant ? 0
                                                                : -1;
      if (k < 0) return false;
      offset += std::int64_t(program[ln.in[std::size_t(k)]].value);
      len = ln.in[std::size_t(1 - k)];
    }
    const node& ln = program[len];
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

  // Q, K, V and O of the attention whose scores are qk_matmul and whose output is pv_matmul, as
  // strided views [batch..., heads, seq, head_dim] (q_node: Q's node); nullptr, or why not.
  constexpr const char* read_operands(int qk_matmul, int pv_matmul, int& q_node) {
    const node& s = program[qk_matmul];
    attention_part& a = desc.att;
    // Q: [..., H, L, dh], possibly through the grouped-heads reshape [..., Hkv, G*L, dh].
    q_node = s.in[0];
    if (program[q_node].op == op_kind::reshape && member(q_node) &&
        program[program[q_node].in[0]].shape.rank == program[q_node].shape.rank)
      q_node = program[q_node].in[0];
    // Q, K and V read through layout ops; K and V also through a cast widening a narrow buffer
    // (a bf16 KV cache), which the executor reads as it is or widens.
    a.q = read_view(program, fusion, group, q_node);
    a.k = read_view(program, fusion, group, s.in[1], true);
    if (!s.trans_b && a.k.ok) {  // K read through a transpose of its last two axes: undo it
      const int k_rank = a.k.shape.rank;
      const std::int64_t last_extent = a.k.shape[k_rank - 1],
                         last_stride = a.k.stride[std::size_t(k_rank - 1)];
      a.k.shape[k_rank - 1] = a.k.shape[k_rank - 2];
      a.k.stride[std::size_t(k_rank - 1)] = a.k.stride[std::size_t(k_rank - 2)];
      a.k.shape[k_rank - 2] = last_extent;
      a.k.stride[std::size_t(k_rank - 2)] = last_stride;
    }
    a.v = read_view(program, fusion, group, program[pv_matmul].in[1], true);
    // O: the value after pv_matmul, after the grouped-heads reshape back to [..., H, L, dh], if
    // any.
    int o_node = pv_matmul;
    for (int i = pv_matmul + 1; i < int(N); ++i)
      if (member(i) && program[i].op == op_kind::reshape && program[i].in[0] == o_node &&
          program[i].shape == program[q_node].shape)
        o_node = i;
    a.o = write_view(program, this_group().roots[0], o_node);
    if (!a.q.ok || !a.k.ok || !a.v.ok || !a.o.ok)
      return "an attention operand that is not a view";
    const int r = a.q.shape.rank;
    if (r < 3 || a.k.shape.rank != r || a.v.shape.rank != r || a.o.shape.rank != r)
      return "an attention whose Q, K, V and O differ in rank";
    if (a.q.stride[std::size_t(r - 1)] != 1 || a.k.stride[std::size_t(r - 1)] != 1 ||
        a.v.stride[std::size_t(r - 1)] != 1 || a.o.stride[std::size_t(r - 1)] != 1)
      return "an attention whose head_dim axis is not contiguous";
    a.batch_rank = r - 3;
    a.batch.rank = r - 3;
    for (int c = 0; c < r - 3; ++c) {
      a.batch[c] = a.q.shape[c];
      if (a.k.shape[c] != a.batch[c] || a.v.shape[c] != a.batch[c])
        return "an attention whose batch axes broadcast";
    }
    a.heads = a.q.shape[r - 3];
    a.seq_q = a.q.shape[r - 2];
    a.head_dim = a.q.shape[r - 1];
    a.kv_heads = a.k.shape[r - 3];
    a.seq_kv = a.k.shape[r - 2];
    if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0 || a.v.shape[r - 3] != a.kv_heads ||
        a.v.shape[r - 2] != a.seq_kv || a.v.shape[r - 1] != a.head_dim ||
        a.o.shape[r - 3] != a.heads)
      return "an attention whose Q, K, V shapes do not agree";
    return nullptr;
  }

  // The constant scales right above qk_matmul (through single-consumer reshapes, up to `top`),
  // folded into the kernel's scale; the node the score program then starts from.
  constexpr int fold_scale(int qk_matmul, int top) {
    attention_part& a = desc.att;
    int bottom = qk_matmul;
    a.scale = 1.0f;
    int cur = qk_matmul;
    for (;;) {
      int up = -1;
      for (int i = cur + 1; i < int(N) && up < 0; ++i)
        if (member(i))
          for (int k = 0; k < program[i].n_in; ++k)
            if (program[i].in[std::size_t(k)] == cur) up = i;
      if (up < 0 || cur == top) break;
      const node& u = program[up];
      const bool scale = (u.op == op_kind::mul || u.op == op_kind::div) && u.in[0] == cur &&
                         program[u.in[1]].op == op_kind::constant;
      if (!scale) break;
      a.scale = u.op == op_kind::mul ? a.scale * float(program[u.in[1]].value)
                                     : a.scale / float(program[u.in[1]].value);
      bottom = up;
      if (up == top) break;
      cur = up;
    }
    return bottom;
  }

  constexpr kernel_desc lower() {
    const fusion_group& grp = this_group();
    const int pv_matmul = grp.anchor, softmax_node = program[pv_matmul].in[0];
    attention_part& a = desc.att;
    desc.kind = kernel_kind::attention;
    // Walk down from the softmax to Q Kᵀ: the chain of scale, mask and reshape ops.
    int qk_matmul = program[softmax_node].in[0];
    while (program[qk_matmul].op != op_kind::matmul) {
      const node& c = program[qk_matmul];
      qk_matmul = c.op == op_kind::select ? c.in[1] : c.in[0];
      if (!member(qk_matmul)) return refuse("an attention whose scores are not a member matmul");
    }
    const node& s = program[qk_matmul];
    if (s.trans_a) return refuse("an attention whose scores are not Q Kᵀ");
    int q_node = -1;
    if (const char* why = read_operands(qk_matmul, pv_matmul, q_node)) return refuse(why);
    const int r = a.q.shape.rank;
    const std::int64_t group_size = a.heads / a.kv_heads;  // query heads per kv head
    // The score program's iteration: (batch..., kv head, group, query, key).
    refinement ref;
    ref.root_rank = 0;
    ref.rank = r - 3 + 4;
    for (int c = 0; c < r - 3; ++c) ref.extent[std::size_t(c)] = a.batch[c];
    ref.extent[std::size_t(r - 3)] = a.kv_heads;
    ref.extent[std::size_t(r - 2)] = group_size;
    ref.extent[std::size_t(r - 1)] = a.seq_q;
    ref.extent[std::size_t(r)] = a.seq_kv;
    const int tq = r - 1, tk = r;
    // The softmax input's map: [batch..., Hkv, G*L, Lk] (one reshape of Q) or [batch..., H, L, Lk].
    const dims ss = program[softmax_node].shape;
    if (ss.rank != r) return refuse("an attention whose scores have an unexpected rank");
    index_map m;
    if (!score_map(ss, m)) return refuse("an attention whose scores have an unexpected shape");
    // The chain: a scale right above Q Kᵀ folds into the kernel's scale; a causal select with -inf
    // right below the softmax is the kernel's causal mode; anything between is the score program.
    const iter_space sp = ref.space();
    int top = program[softmax_node].in[0];
    index_map top_map = m;
    auto through_reshape = [&](int id, index_map& mm) {
      const map_result rr =
          reshape_map(mm, program[id].shape, program[program[id].in[0]].shape, sp);
      mm = rr.map;
      return rr.req.ok();
    };
    for (;;) {  // reshapes, a causal select and a key-length select peel off the top
      const node& c = program[top];
      if (a.kv_len < 0 && c.op == op_kind::select && program[c.in[2]].op == op_kind::constant &&
          program[c.in[2]].value == -std::numeric_limits<double>::infinity() &&
          is_kv_len_pred(c.in[0], broadcast_map(top_map, program[c.in[0]].shape, c.shape), tk, a)) {
        top = c.in[1];
        top_map = broadcast_map(top_map, program[top].shape, c.shape);
        continue;
      }
      if (c.op == op_kind::reshape) {
        if (!through_reshape(top, top_map))
          return refuse("an attention whose score reshapes are not affine");
        top = c.in[0];
        continue;
      }
      if (!a.causal && c.op == op_kind::select && program[c.in[2]].op == op_kind::constant &&
          program[c.in[2]].value == -std::numeric_limits<double>::infinity() &&
          is_causal_pred(c.in[0], broadcast_map(top_map, program[c.in[0]].shape, c.shape), tq, tk,
                         a.seq_kv - a.seq_q)) {
        a.causal = true;
        top = c.in[1];
        top_map = broadcast_map(top_map, program[top].shape, c.shape);
        continue;
      }
      break;
    }
    const int bottom = fold_scale(qk_matmul, top);
    if (top != bottom) {  // the score program from `bottom` (input 0) to `top`
      emit_scope sc = scope();
      sc.input_node[0] = bottom;
      emitter<emit_scope> scores(sc, desc.c, sp);
      const int res = scores.emit(top, top_map);
      if (!scores.req.ok())
        return refuse(scores.req.kind == refine_request::fail
                          ? scores.req.why
                          : "an attention score program that reshapes");
      // The input must be read at the plain score index: check the map the emitter used for it.
      for (int i = 0; i < desc.c.n_ins; ++i)
        if (desc.c.instr[std::size_t(i)].kind == ins_kind::input &&
            !same_on(scores.memo_map[std::size_t(i)], qk_map(bottom), sp))
          return refuse("an attention whose score program reads the scores at another index");
      a.score = {0, std::int16_t(desc.c.n_ins), std::int16_t(res)};
    }
    desc.rank = ref.rank;
    desc.extent = ref.extent;
    return desc;
  }

  // The map at which a value of shape s ([batch..., Hkv, G*L, Lk], one reshape of Q's heads, or
  // [batch..., H, L, Lk]) holds the score of (batch..., kv head, group, query, key); false for
  // another shape.
  constexpr bool score_map(const dims& s, index_map& m) const {
    const attention_part& a = desc.att;
    const int r = s.rank;
    const std::int64_t group_size = a.heads / a.kv_heads;
    m = index_map{};
    m.rank = r;
    for (int c = 0; c < r - 3; ++c) m.row[std::size_t(c)].coef[std::size_t(c)] = 1;
    if (s[r - 3] == a.kv_heads && s[r - 2] == group_size * a.seq_q) {
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 3)] = 1;
      if (group_size > 1)  // the group axis (of extent 1: none)
        m.row[std::size_t(r - 2)].coef[std::size_t(r - 2)] = a.seq_q;
      m.row[std::size_t(r - 2)].coef[std::size_t(r - 1)] = 1;
    } else if (s[r - 3] == a.heads && s[r - 2] == a.seq_q) {
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 3)] = group_size;
      m.row[std::size_t(r - 3)].coef[std::size_t(r - 2)] = 1;
      m.row[std::size_t(r - 2)].coef[std::size_t(r - 1)] = 1;
    } else {
      return false;
    }
    m.row[std::size_t(r - 1)].coef[std::size_t(r)] = 1;
    return true;
  }
  // The map of node `id` (Q Kᵀ or a scale of it), whose shape score_map accepted for the softmax.
  constexpr index_map qk_map(int id) const {
    index_map m;
    score_map(program[id].shape, m);
    return m;
  }
};

}  // namespace fusedsl::plan::detail
