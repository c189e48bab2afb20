#pragma once
// The bodies of fusedsl/backend/cpu/weight_packs.hpp's functions: included at the end of that
// header in header-only mode, compiled once into fusedsl::compiled otherwise
// (core/compiled_mode.hpp).
#include <algorithm>

#include "fusedsl/backend/cpu/weight_packs.hpp"
#include "fusedsl/core/error.hpp"

namespace fusedsl::cpu {

FUSEDSL_DECL void weight_packs::assign_storage() {
  std::size_t floats = 0, bf16 = 0;
  for (packed_weight& p : packs) {
    if (p.shared) continue;
    p.offset = p.bf16_storage ? bf16 : floats;
    (p.bf16_storage ? bf16 : floats) += p.size;
  }
  f32_ = aligned_buffer(floats * sizeof(float) + 64);
  bf16_ = aligned_buffer(bf16 * sizeof(kernels::bf16_bits) + 64);
  for (packed_weight& p : packs) {
    p.ready = false;
    p.halves = 0;
    p.amx_data = nullptr;
    if (p.shared)
      p.panels = nullptr;
    else if (p.bf16_storage)
      p.panels = bf16_storage() + p.offset;
    else
      p.panels = f32_storage() + p.offset;
  }
}

FUSEDSL_DECL void weight_packs::share(std::shared_ptr<packed_weight_cache> cache) {
  cache_ = std::move(cache);
  for (packed_weight& p : packs) p.shared = cache_ != nullptr && !p.pair && !p.amx && p.slices == 1;
  assign_storage();
}

FUSEDSL_DECL const packed_weight& weight_packs::ready(int group, int part, int iter) const {
  for (const packed_weight& p : packs)
    if (p.group == group && p.part == part && p.iter == iter && p.ready) return p;
  throw binding_error("matmul weight not packed (bind its parameter again)");
}

FUSEDSL_DECL std::size_t weight_packs::shared_bytes() const {
  std::size_t bytes = 0;
  std::vector<const void*> seen;
  for (const packed_weight& p : packs) {
    if (!p.shared || p.panels == nullptr ||
        std::find(seen.begin(), seen.end(), p.panels) != seen.end())
      continue;
    seen.push_back(p.panels);
    bytes += p.size * (p.bf16_storage ? sizeof(kernels::bf16_bits) : sizeof(float));
  }
  return bytes;
}

FUSEDSL_DECL int weight_packs::amx_ready() const {
  int n = 0;
  for (const packed_weight& p : packs) n += p.amx && p.ready;
  return n;
}

}  // namespace fusedsl::cpu
