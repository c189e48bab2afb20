#pragma once
// fusedsl::cpu::packed_weight_cache: GEMM weight panels shared by several executors.
//
// An executor packs each matmul weight into GEMM panels when it is bound (a copy, laid out for
// the micro-kernel). Several programs over the same weights (an encoder compiled for several
// sequence lengths, a generator's prefill buckets and its decode step) would each hold a copy, and
// a call of one would find the weights the previous call read cold in the caches. Executors given
// one cache (executor::share_packed_weights, before any parameter is bound) hold one copy: panels
// are keyed by the weight's memory and how the GEMM reads it (address, k, n, strides, dtype, panel
// layout), so executors that bind the same memory the same way read the same panels.
//
// Binding a weight packs it again into the shared panels, which every executor sharing them then
// reads: change a shared weight between calls and bind it again in any one of them. Binding
// writes the panels and a call reads them, so bind in one thread while no executor sharing the
// cache runs; calls only read, and may run on several threads at once.
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/tensor.hpp"

namespace fusedsl::cpu {

class packed_weight_cache {
 public:
  // How one weight is packed: its first element, the GEMM's k x n view of it (element (p, j) at
  // p * ks + j * ns), its dtype, the panel layout (`layout`, the executor's) and panel width.
  struct key {
    std::uintptr_t data = 0;
    std::int64_t k = 0, n = 0, ks = 0, ns = 0;
    dtype type = dtype::f32;
    int layout = 0;
    int panel_width = 0;
    auto operator<=>(const key&) const = default;
  };

  // The panels of `k`: `bytes` of zeros when they are new, else the panels packed before (of the
  // same size, as the key fixes the layout).
  std::byte* panels(const key& k, std::size_t bytes) {
    auto [it, fresh] = entries_.try_emplace(k);
    if (fresh) it->second = aligned_buffer(bytes);
    return it->second.data();
  }

  std::size_t entries() const { return entries_.size(); }
  // All panels held, in bytes.
  std::size_t bytes() const {
    std::size_t b = 0;
    for (const auto& e : entries_) b += e.second.size();
    return b;
  }

 private:
  std::map<key, aligned_buffer> entries_;
};

}  // namespace fusedsl::cpu
