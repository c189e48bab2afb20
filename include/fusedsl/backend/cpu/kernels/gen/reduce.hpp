#pragma once
// Reduce groups: vectors along the reduced axis (then across lanes) or along an output axis (each
// lane its own sum), over the simplified space (plan/loop_space.hpp); the epilogue per result.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "fusedsl/backend/cpu/kernels/gen/machine.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/plan/loop_space.hpp"

namespace fusedsl::cpu::kernels::gen {

// Desc with its reduce space simplified (plan/loop_space.hpp), or Desc itself where that changes
// nothing.
template <class Desc>
struct simplified_reduce {
  static constexpr kernel_desc value = plan::simplify_reduce(Desc::value);
};
template <class Desc>
using reduce_space_t =
    std::conditional_t<plan::reduce_simplifies(Desc::value), simplified_reduce<Desc>, Desc>;

template <class Desc, class Arch>
struct reduce_kernel {
  using DS = reduce_space_t<Desc>;
  static constexpr const kernel_desc& D = DS::value;
  static constexpr plan::segment seg = D.seg[0];
  static constexpr int R = D.rank, L = R - 1;
  static constexpr int rf = D.reduce_first, rc = D.reduce_count;
  static constexpr bool lane_reduced = L >= rf && L < rf + rc;
  static constexpr access_list used_pro = accesses_of(D, seg.begin, seg.end);
  static constexpr access_list used_epi = accesses_of(D, D.epilogue.begin, D.epilogue.end, D.store);
  static constexpr plan::access st = D.c.acc[std::size_t(D.store)];
  static constexpr graph::op_kind K = D.reduce_op;
  using T = graph::op_traits<K>;
  using M = machine<DS, L>;
  using V = vec_t<Arch>;
  static constexpr int W = simd<Arch>::width;
  static constexpr bool is_reduced(int t) { return t >= rf && t < rf + rc; }
  // output axes (not reduced), without the lane axis when lanes run along an output axis
  static constexpr std::int64_t out_points = [] {
    std::int64_t o = 1;
    for (int t = 0; t < R; ++t)
      if (!is_reduced(t) && (lane_reduced || t != L)) o *= D.extent[std::size_t(t)];
    return o;
  }();
  static constexpr std::int64_t red_points = [] {  // reduced points, without the lane axis
    std::int64_t o = 1;
    for (int t = rf; t < rf + rc; ++t)
      if (!lane_reduced || t != L) o *= D.extent[std::size_t(t)];
    return o;
  }();

  // Decompose `flat` over the axes selected by `pick` into idx (others untouched).
  template <class Pick>
  static void decompose(std::int64_t flat, std::int64_t* idx, Pick pick) {
    for (int t = R - 1; t >= 0; --t)
      if (pick(t)) {
        idx[t] = flat % D.extent[std::size_t(t)];
        flat /= D.extent[std::size_t(t)];
      }
  }

  // The position along the reduced axis of the point idx (its reduced iteration axes as digits).
  static std::int64_t position(const std::int64_t* idx) {
    std::int64_t p = 0;
    for (int t = rf; t < rf + rc; ++t) p = p * D.extent[std::size_t(t)] + idx[t];
    return p;
  }
  static constexpr std::int64_t lane_step() {  // positions one lane-axis step covers
    std::int64_t s = 1;
    for (int t = L + 1; t < rf + rc; ++t) s *= D.extent[std::size_t(t)];
    return s;
  }

  // The reduction of one accumulator state: acc (and, for argmax, the position of the best).
  template <class VV>
  struct state {
    VV acc = start();
    static VV start() {
      if constexpr (K == graph::op_kind::argmax)
        return VV(-std::numeric_limits<float>::infinity());
      else
        return T::template identity<vec_math, VV>();
    }
    VV pos = VV(-1.0f);
    void add(const VV& x, const VV& at) {
      if constexpr (K == graph::op_kind::argmax) {
        const VV take = T::template take<vec_math>(x, acc);
        acc = vec_math::select(take, x, acc);
        pos = vec_math::select(take, at, pos);
      } else {
        (void)at;
        acc = T::template combine<vec_math>(acc, x);
      }
    }
    VV result() const {
      if constexpr (K == graph::op_kind::argmax)
        return vmax0(pos);
      else
        return T::template finish<vec_math>(acc, D.reduce_length);
    }
    static VV vmax0(const VV& p) { return vec_math::max(p, VV(0.0f)); }  // an all -inf row: index 0
  };

  static void points(void* const* val, std::int64_t p0, std::int64_t p1) {
    std::int64_t off[plan::max_accesses];
    std::int64_t idx[plan::max_iter_rank]{};
    void* out = val[st.node];
    constexpr std::int64_t ss = st.at.coef[std::size_t(L)];
    for (std::int64_t p = p0; p < p1; ++p) {
      decompose(p, idx, [](int t) { return !is_reduced(t) && (lane_reduced || t != L); });
      if constexpr (lane_reduced) {
        state<V> vs;
        state<float> tail;
        const std::int64_t n = D.extent[std::size_t(L)];
        const V lane_pos = lane_index<V>() * V(float(lane_step()));
        for (std::int64_t q = 0; q < red_points; ++q) {
          decompose(q, idx, [](int t) { return is_reduced(t) && t != L; });
          idx[L] = 0;
          offsets_at<DS, used_pro>(idx, R, off);
          std::int64_t j = 0;
          for (; j + W <= n; j += W) {
            idx[L] = j;
            const V at = V(float(position(idx))) + lane_pos;
            vs.add(M::template run<seg.begin, seg.end, seg.result, V>(val, off, nullptr), at);
            offsets_step<DS, used_pro>(L, W, off);
          }
          for (int q2 = 0, left = int(n - j); q2 < left; ++q2, ++j) {
            idx[L] = j;
            tail.add(M::template run<seg.begin, seg.end, seg.result, float>(val, off, nullptr),
                     float(position(idx)));
            offsets_step<DS, used_pro>(L, 1, off);
          }
        }
        // Across the lanes, in lane order, then the tail: the same order on every run.
        alignas(64) float acc_l[W], pos_l[W];
        if constexpr (W == 1) {
          acc_l[0] = vs.acc, pos_l[0] = vs.pos;
        } else {
          vs.acc.store_aligned(acc_l);
          vs.pos.store_aligned(pos_l);
        }
        state<float> h;
        if constexpr (K == graph::op_kind::argmax) {
          // the first position among the lanes' bests: lanes hold interleaved positions
          for (int l = 0; l < W; ++l) {
            const float x = acc_l[l], at = pos_l[l];
            if (at < 0.0f) continue;
            const bool better = T::template take<vec_math>(x, h.acc) != 0.0f;
            const bool tie = x == h.acc || (x != x && h.acc != h.acc);
            if (h.pos < 0.0f || better || (tie && at < h.pos)) h.acc = x, h.pos = at;
          }
          if (tail.pos >= 0.0f) {
            const bool better = T::template take<vec_math>(tail.acc, h.acc) != 0.0f;
            const bool tie = tail.acc == h.acc || (tail.acc != tail.acc && h.acc != h.acc);
            if (h.pos < 0.0f || better || (tie && tail.pos < h.pos))
              h.acc = tail.acc, h.pos = tail.pos;
          }
        } else {
          for (int l = 0; l < W; ++l) h.acc = T::template combine<vec_math>(h.acc, acc_l[l]);
          h.acc = T::template combine<vec_math>(h.acc, tail.acc);
        }
        const float r = h.result();
        for (int t = rf; t < rf + rc; ++t) idx[t] = 0;
        offsets_at<DS, used_epi>(idx, R, off);
        const float y = M::template run<D.epilogue.begin, D.epilogue.end, D.epilogue.result, float>(
            val, off, &r);
        store_lanes<float, st.type, 0>(out, off[D.store], y);
      } else {
        constexpr std::int64_t n = D.extent[std::size_t(L)];
        auto lanes = [&]<class VV>(std::int64_t j0) {
          state<VV> acc;
          for (std::int64_t q = 0; q < red_points; ++q) {
            decompose(q, idx, [](int t) { return is_reduced(t); });
            idx[L] = j0;
            offsets_at<DS, used_pro>(idx, R, off);
            acc.add(M::template run<seg.begin, seg.end, seg.result, VV>(val, off, nullptr),
                    VV(float(position(idx))));
          }
          const VV r = acc.result();
          for (int t = rf; t < rf + rc; ++t) idx[t] = 0;
          offsets_at<DS, used_epi>(idx, R, off);
          const VV y = M::template run<D.epilogue.begin, D.epilogue.end, D.epilogue.result, VV>(
              val, off, &r);
          store_lanes<VV, st.type, ss>(out, off[D.store], y);
        };
        std::int64_t j = 0;
        for (; j + W <= n; j += W) lanes.template operator()<V>(j);
        if constexpr (n % W != 0)  // no tail loop when the lanes fill the axis
          for (; j < n; ++j) lanes.template operator()<float>(j);
      }
    }
  }

  static void run(void* const* val, thread_pool* pool) {
    parallel_for(pool, out_points,
                 [&](std::ptrdiff_t b, std::ptrdiff_t e, int) { points(val, b, e); });
  }
};

template <class Desc, class Arch>
void run_reduce(void* const* val, thread_pool* pool) {
  reduce_kernel<Desc, Arch>::run(val, pool);
}

}  // namespace fusedsl::cpu::kernels::gen
