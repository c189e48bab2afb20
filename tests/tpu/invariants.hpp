#pragma once
// Schedule invariants shared by the tests: VMEM never over capacity, every DMA finished before
// its data is read, every matmul output tile produced exactly once.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "fusedsl/tpu/pipeline.hpp"

inline void check_invariants(const std::vector<fusedsl::tpu::kernel_plan>& ks,
                             const fusedsl::tpu::timeline& tl,
                             const fusedsl::tpu::chip_spec& chip) {
  namespace tpu = fusedsl::tpu;
  auto vm = tl.vmem;
  std::stable_sort(vm.begin(), vm.end(), [](const tpu::vmem_event& a, const tpu::vmem_event& b) {
    return a.t < b.t || (a.t == b.t && a.delta < b.delta);
  });
  std::int64_t live = 0;
  for (const auto& e : vm) {
    live += e.delta;
    CHECK(live <= chip.vmem_bytes_per_core);
    CHECK(live >= 0);
  }
  for (const auto& e : tl.events)
    for (auto w : e.waits_for) {
      CHECK(tl.events[w].on == tpu::unit::dma);
      CHECK(tl.events[w].kernel == e.kernel);
      CHECK(tl.events[w].end_s <= e.start_s);
    }
  for (std::size_t k = 0; k < ks.size(); ++k) {
    if (ks[k].kind != tpu::kernel_kind::matmul) continue;
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
    std::size_t writes = 0;
    for (const auto& s : ks[k].steps)
      if (s.out_bytes > 0) {
        ++writes;
        seen.insert({s.tile[0], s.tile[1], s.tile[2]});
      }
    const auto g = tpu::grid_of(ks[k].mm, ks[k].blocks);
    CHECK(writes == seen.size());
    CHECK(std::int64_t(seen.size()) == ks[k].mm.batch * g.gm * g.gn);
  }
}
