#pragma once
// Loop groups: per segment, over its simplified iteration space (plan/loop_space.hpp), the outer
// axes in rows and the innermost axis in vectors.
#include <cstdint>
#include <type_traits>
#include <utility>

#include "fusedsl/backend/cpu/kernels/gen/machine.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/plan/loop_space.hpp"

namespace fusedsl::cpu::kernels::gen {

// Desc with loop segment S's iteration space simplified for Lanes-wide vectors (plan/
// loop_space.hpp: no axes of extent 1, contiguous axes merged, the vector axis chosen by the
// strides), or Desc itself where that changes nothing.
template <class Desc, int S, int Lanes>
struct simplified_loop {
  static constexpr kernel_desc value = plan::simplify_loop_segment(Desc::value, S, Lanes);
};
template <class Desc, int S, int Lanes>
using loop_space_t = std::conditional_t<plan::loop_segment_simplifies(Desc::value, S, Lanes),
                                        simplified_loop<Desc, S, Lanes>, Desc>;

template <class Desc, class Arch, int S>
struct loop_segment {
  using DS = loop_space_t<Desc, S, simd<Arch>::width>;
  static constexpr const kernel_desc& D = DS::value;
  static constexpr plan::segment seg = D.seg[std::size_t(S)];
  static constexpr int R = D.rank, L = R - 1;
  static constexpr access_list used = accesses_of(D, seg.begin, seg.end, D.store);
  static constexpr plan::access st = D.c.acc[std::size_t(D.store)];
  static constexpr std::int64_t inner =
      R > 0 ? seg.hi[std::size_t(R - 1)] - seg.lo[std::size_t(R - 1)] : 1;
  static constexpr std::int64_t outer = [] {
    std::int64_t o = 1;
    for (int t = 0; t < R - 1; ++t) o *= seg.hi[std::size_t(t)] - seg.lo[std::size_t(t)];
    return o;
  }();
  using M = machine<DS, L>;
  using V = vec_t<Arch>;
  static constexpr int W = simd<Arch>::width;

  // rows [r0, r1) of the outer axes, lanes [c0, c1) of the last
  static void rows(void* const* val, std::int64_t r0, std::int64_t r1, std::int64_t c0,
                   std::int64_t c1) {
    std::int64_t off[plan::max_accesses];
    std::int64_t idx[plan::max_iter_rank]{};
    void* out = val[st.node];
    constexpr std::int64_t ss = R > 0 ? st.at.coef[std::size_t(R - 1)] : 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t rest = r;
      for (int t = R - 2; t >= 0; --t) {
        const std::int64_t e = seg.hi[std::size_t(t)] - seg.lo[std::size_t(t)];
        idx[t] = seg.lo[std::size_t(t)] + rest % e;
        rest /= e;
      }
      if constexpr (R > 0) idx[R - 1] = seg.lo[std::size_t(R - 1)] + c0;
      offsets_at<DS, used>(idx, R, off);
      std::int64_t j = c0;
      if constexpr (R > 0) {
        for (; j + W <= c1; j += W) {
          const V v = M::template run<seg.begin, seg.end, seg.result, V>(val, off, nullptr);
          store_lanes<V, st.type, ss>(out, off[D.store], v);
          offsets_step<DS, used>(R - 1, W, off);
        }
      }
      for (int q = 0, tail = int(c1 - j); q < tail; ++q) {
        const float v = M::template run<seg.begin, seg.end, seg.result, float>(val, off, nullptr);
        store_lanes<float, st.type, ss>(out, off[D.store], v);
        if constexpr (R > 0) offsets_step<DS, used>(R - 1, 1, off);
      }
    }
  }

  static void run(void* const* val, thread_pool* pool) {
    const int threads = pool ? pool->size() : 1;
    if (outer >= threads || inner < 2 * W * threads) {
      parallel_for(pool, outer,
                   [&](std::ptrdiff_t b, std::ptrdiff_t e, int) { rows(val, b, e, 0, inner); });
    } else {  // few long rows: split the lanes, in whole vectors
      const std::int64_t chunks = (inner + W - 1) / W;
      parallel_for(pool, chunks, [&](std::ptrdiff_t b, std::ptrdiff_t e, int) {
        rows(val, 0, outer, b * W, std::min<std::int64_t>(inner, e * W));
      });
    }
  }
};

template <class Desc, class Arch>
void run_loop(void* const* val, thread_pool* pool) {
  [&]<int... S>(std::integer_sequence<int, S...>) {
    (loop_segment<Desc, Arch, S>::run(val, pool), ...);
  }(std::make_integer_sequence<int, Desc::value.n_seg>{});
}

}  // namespace fusedsl::cpu::kernels::gen
