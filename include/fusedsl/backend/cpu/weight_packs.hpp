#pragma once
// The GEMM weights an executor packs when they are bound: one entry per product whose B is a
// parameter, per layer, and the storage of their panels (the executor's own, or a
// packed_weight_cache's shared with other executors). How a weight is packed depends on the
// target's panel layout (cpu/weight_packing.hpp); what is stored where does not.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fusedsl/backend/cpu/kernels/bf16.hpp"
#include "fusedsl/backend/cpu/weight_cache.hpp"
#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/core/tensor.hpp"

namespace fusedsl::cpu {

struct packed_weight {
  int group = -1, part = 0, iter = 0;
  std::size_t size = 0;    // elements of its storage: f32, or bf16 where bf16_storage
  std::size_t offset = 0;  // elements into the f32 or the bf16 buffer (bf16_storage)
  bool ready = false;
  bool amx = false;  // packed for the AMX tiles (bf16 weights, amx_bf16 opted in); otherwise
                     // bf16 panels where the product reads them so, else f32 panels
  bool s8_panels = false;     // int8 panels (an int8 weight read by few rows), in the bf16 buffer
  bool bf16_storage = false;  // amx, bf16 or int8 panels
  const kernels::bf16_bits* amx_data = nullptr;  // the packed panels (aligned inside the slot)
  bool pair = false;        // the part's B and its pair's, side by side (pack_b_pair_half)
  std::uint8_t halves = 0;  // pair: which of the two have been packed (bits 0 and 1)
  std::int64_t slices = 1;  // batch slices of a batched weight, each packed_slice_floats long
  bool shared = false;      // its panels live in the packed_weight_cache (not pairs, not amx,
                            // not batched)
  void* panels = nullptr;   // where its panels are (not amx): in the buffers or the cache; set
                            // when storage is assigned, or (shared) when packed
};

class weight_packs {
 public:
  std::vector<packed_weight> packs;

  // Offsets into the executor's buffers for the packs not shared, and the buffers; every pack
  // is unpacked afterwards.
  FUSEDSL_DECL void assign_storage();
  // Panels from `cache` from now on (null: the executor's own again), for the packs that can
  // share them (not pairs, not AMX tiles).
  FUSEDSL_DECL void share(std::shared_ptr<packed_weight_cache> cache);
  // Part `part` of group `group` at layer `iter`, packed; binding_error when it is not.
  FUSEDSL_DECL const packed_weight& ready(int group, int part, int iter) const;
  // The cache's panels for a weight packed as `k` (`bytes` of them).
  void* cached(const packed_weight_cache::key& k, std::size_t bytes) {
    return cache_->panels(k, bytes);
  }
  float* f32_storage() { return reinterpret_cast<float*>(f32_.data()); }
  kernels::bf16_bits* bf16_storage() { return reinterpret_cast<kernels::bf16_bits*>(bf16_.data()); }

  std::size_t own_bytes() const { return f32_.size() + bf16_.size(); }
  // Bytes of the distinct cache panels the packs read.
  FUSEDSL_DECL std::size_t shared_bytes() const;
  // Packs made for the AMX tiles and packed.
  FUSEDSL_DECL int amx_ready() const;

 private:
  std::shared_ptr<packed_weight_cache> cache_;
  aligned_buffer f32_, bf16_;
};

}  // namespace fusedsl::cpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/backend/cpu/impl/weight_packs.ipp"
#endif
