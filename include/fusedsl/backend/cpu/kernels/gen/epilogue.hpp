#pragma once
// Programs that run inside the hand-written kernels: a GEMM epilogue functor over the output tile
// (gemm.hpp's form), one for a GEMM pair, and attention's score modifier (attention.hpp's form).
#include <cstdint>
#include <limits>

#include "fusedsl/backend/cpu/kernels/gen/machine.hpp"

namespace fusedsl::cpu::kernels::gen {

// ---- GEMM epilogues ----

// The epilogue program of part P of a gemm descriptor at output element (row i of a call whose
// batch index is `batch`, column j), with input registers `in` (the accumulator, and a pair's).
template <class Desc, int P>
struct gemm_epilogue_program {
  static constexpr const kernel_desc& D = Desc::value;
  static constexpr plan::gemm_part part = D.gemm[std::size_t(P)];
  static constexpr int R = part.batch_rank + 2;
  static constexpr access_list used = accesses_of(D, part.epilogue.begin, part.epilogue.end);
  static constexpr bool heavy = range_is_heavy(D, part.epilogue.begin, part.epilogue.end);
  using M = machine<Desc, R - 1>;

  template <class V>
  [[gnu::always_inline]] static V run(void* const* val, std::int64_t batch, std::ptrdiff_t i,
                                      std::ptrdiff_t j, const V* in) {
    std::int64_t idx[plan::max_iter_rank]{};
    std::int64_t b = batch, row = i;
    if constexpr (part.folded) {
      b = i / part.rows_per_batch;
      row = i % part.rows_per_batch;
    }
    for (int t = R - 3; t >= 0; --t) {
      idx[t] = b % part.batch[t];
      b /= part.batch[t];
    }
    idx[R - 2] = row;
    idx[R - 1] = j;
    std::int64_t off[plan::max_accesses];
    offsets_at<Desc, used>(idx, R, off);
    return M::template run<part.epilogue.begin, part.epilogue.end, part.epilogue.result, V>(
        val, off, in);
  }
};

// The epilogue of part P of a gemm descriptor, as gemm.hpp's functor: the value at output element
// (row i of this call, column j), from the accumulator and the epilogue program's loads.
template <class Desc, int P>
struct gemm_epilogue {
  using E = gemm_epilogue_program<Desc, P>;
  static constexpr bool heavy = E::heavy;
  static constexpr bool identity = E::part.epilogue.empty();

  void* const* val;
  std::int64_t batch = 0;  // the batch index of this call (unfolded parts)

  template <class V>
  [[gnu::always_inline]] V operator()(const V& acc, std::ptrdiff_t i, std::ptrdiff_t j) const {
    if constexpr (identity)
      return acc;
    else
      return E::template run<V>(val, batch, i, j, &acc);
  }
};

// Desc with part P's load of its pair's product (plan::gemm_part::pair_access) read from input
// register 1 instead: the second accumulator of a GEMM pair.
template <class Desc, int P>
struct pair_desc {
  static constexpr kernel_desc value = [] {
    kernel_desc d = Desc::value;
    const plan::gemm_part& p = d.gemm[std::size_t(P)];
    for (int i = p.epilogue.begin; i < p.epilogue.end; ++i) {
      plan::ins& x = d.c.instr[std::size_t(i)];
      if (x.kind == ins_kind::load && x.ref == p.pair_access) {
        x.kind = ins_kind::input;
        x.ref = 1;
      }
    }
    return d;
  }();
  static constexpr const auto& nodes = Desc::nodes;
};

// The epilogue of part P run as a GEMM pair (gemm.hpp's gemm_pair_with): the part's sum and its
// pair's sum at the same element as input registers 0 and 1. A pair has no batch loop (its batch,
// if any, is folded into the rows: plan::detail::pairs_with).
template <class Desc, int P>
struct gemm_pair_epilogue {
  static_assert(Desc::value.gemm[std::size_t(P)].pair >= 0,
                "gemm_pair_epilogue: a part without a pair");
  using E = gemm_epilogue_program<pair_desc<Desc, P>, P>;
  static constexpr bool heavy = E::heavy;
  static constexpr bool paired = true;

  void* const* val;

  template <class V>
  [[gnu::always_inline]] V operator()(const V& acc, const V& acc2, std::ptrdiff_t i,
                                      std::ptrdiff_t j) const {
    const V in[2] = {acc, acc2};
    return E::template run<V>(val, 0, i, j, in);
  }
};

// ---- attention score programs ----

// att.score as attention.hpp's score modifier: base-2 scores in, base-2 scores out; the program
// sees natural units (scale q.k) and its result is converted back, finite where it is finite.
template <class Desc, class Arch>
struct score_mod {
  static constexpr const kernel_desc& D = Desc::value;
  static constexpr plan::attention_part att = D.att;
  static constexpr int R = att.batch_rank + 4, TQ = R - 2, TK = R - 1;
  static constexpr access_list used = accesses_of(D, att.score.begin, att.score.end);
  static constexpr bool active = !att.score.empty();
  static constexpr std::int64_t group = att.heads / att.kv_heads;
  using V = vec_t<Arch>;
  static constexpr int W = simd<Arch>::width;

  void* const* val;
  std::int64_t batch = 0;

  template <int Lane, class VV>
  [[gnu::always_inline]] static VV apply(void* const* val, const std::int64_t* off, const VV& s2) {
    const VV s = s2 * VV(float(1.0 / log2e));
    const VV t =
        machine<Desc, Lane>::template run<att.score.begin, att.score.end, att.score.result, VV>(
            val, off, &s);
    const VV t2 = t * VV(float(log2e));
    // -FLT_MAX and other finite masks stay finite in base 2 (see attention.hpp's mask_in_base2).
    const VV big(std::numeric_limits<float>::max());
    return where((absolute(t2) == VV(std::numeric_limits<float>::infinity())) &
                     (absolute(t) < VV(std::numeric_limits<float>::infinity())),
                 where(t2 < VV(0.0f), -big, big), t2);
  }

  void point(std::int64_t h, std::int64_t i, std::int64_t j, std::int64_t* idx) const {
    std::int64_t b = batch;
    for (int t = R - 5; t >= 0; --t) {
      idx[t] = b % att.batch[t];
      b /= att.batch[t];
    }
    idx[R - 4] = h / group;
    idx[R - 3] = h % group;
    idx[TQ] = i;
    idx[TK] = j;
  }

  void keys_by_queries(std::ptrdiff_t h, std::ptrdiff_t q0, std::ptrdiff_t bq, std::ptrdiff_t k0,
                       std::ptrdiff_t bk, float* st, std::ptrdiff_t ld) const {
    std::int64_t idx[plan::max_iter_rank]{};
    std::int64_t off[plan::max_accesses];
    for (std::ptrdiff_t r = 0; r < bk; ++r) {
      point(h, q0, k0 + r, idx);
      offsets_at<Desc, used>(idx, R, off);
      float* row = st + r * ld;
      std::ptrdiff_t j = 0;
      for (; j + W <= bq; j += W) {
        simd<Arch>::store(row + j, apply<TQ>(val, off, simd<Arch>::load(row + j)));
        offsets_step<Desc, used>(TQ, W, off);
      }
      for (int q = 0, tail = int(bq - j); q < tail; ++q, ++j) {
        row[j] = apply<TQ>(val, off, row[j]);
        offsets_step<Desc, used>(TQ, 1, off);
      }
    }
  }

  template <class Visible>
  void queries_by_keys(std::ptrdiff_t h, std::ptrdiff_t q0, std::ptrdiff_t rows, float* sc,
                       std::ptrdiff_t ld, const Visible& visible) const {
    std::int64_t idx[plan::max_iter_rank]{};
    std::int64_t off[plan::max_accesses];
    for (std::ptrdiff_t i = 0; i < rows; ++i) {
      point(h, q0 + i, 0, idx);
      offsets_at<Desc, used>(idx, R, off);
      float* row = sc + i * ld;
      const std::ptrdiff_t vis = visible(i);
      std::ptrdiff_t j = 0;
      for (; j + W <= vis; j += W) {
        simd<Arch>::store(row + j, apply<TK>(val, off, simd<Arch>::load(row + j)));
        offsets_step<Desc, used>(TK, W, off);
      }
      for (int q = 0, tail = int(vis - j); q < tail; ++q, ++j) {
        row[j] = apply<TK>(val, off, row[j]);
        offsets_step<Desc, used>(TK, 1, off);
      }
    }
  }
};

}  // namespace fusedsl::cpu::kernels::gen
