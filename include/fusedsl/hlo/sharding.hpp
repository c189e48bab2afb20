#pragma once
// HLO sharding annotations: {replicated}, {maximal device=N}, {manual}, tiled
// {devices=[a,b]0,1,...} or {devices=[a,b]<=[N]} (iota device order, optionally transposed
// <=[x,y]T(1,0)), with optional last_tile_dim_replicate, and tuples of those.

#include <cstdint>
#include <vector>

#include "fusedsl/hlo/shape.hpp"

namespace fusedsl::hlo {

struct sharding {
  enum class kind : std::uint8_t { replicated, maximal, manual, tiled, tuple };

  kind k = kind::replicated;
  std::vector<std::int64_t> tile_dims;  // devices=[...] (tiled)
  std::vector<std::int64_t> devices;    // explicit device list; empty in the iota form
  std::vector<std::int64_t> iota_dims;  // <=[...] reshape dims of iota(N) (iota form)
  std::vector<std::int64_t> iota_perm;  // T(...) transpose of the reshaped iota; may be empty
  bool last_tile_dim_replicate = false;
  std::int64_t device = -1;        // maximal
  std::vector<sharding> elements;  // tuple

  static sharding replicated() { return {}; }
  static sharding manual() {
    sharding s;
    s.k = kind::manual;
    return s;
  }
  static sharding maximal(std::int64_t device) {
    sharding s;
    s.k = kind::maximal;
    s.device = device;
    return s;
  }
  // Tiled over devices 0..N-1 in order, N = product of tile_dims: {devices=[..]<=[N]}.
  static sharding tiled(std::vector<std::int64_t> tile_dims, bool last_tile_dim_replicate = false) {
    sharding s;
    s.k = kind::tiled;
    const std::int64_t n = product(tile_dims);
    s.tile_dims = std::move(tile_dims);
    s.iota_dims = {n};
    s.last_tile_dim_replicate = last_tile_dim_replicate;
    return s;
  }
  // Tiled with an explicit device for each tile (row-major over tile_dims).
  static sharding tiled_devices(std::vector<std::int64_t> tile_dims,
                                std::vector<std::int64_t> devices,
                                bool last_tile_dim_replicate = false) {
    sharding s;
    s.k = kind::tiled;
    const std::int64_t n = product(tile_dims);
    if (n != static_cast<std::int64_t>(devices.size()))
      throw ir_error("sharding: " + std::to_string(devices.size()) + " devices for " +
                     std::to_string(n) + " tiles");
    s.tile_dims = std::move(tile_dims);
    s.devices = std::move(devices);
    s.last_tile_dim_replicate = last_tile_dim_replicate;
    return s;
  }
  static sharding make_tuple(std::vector<sharding> elements) {
    sharding s;
    s.k = kind::tuple;
    s.elements = std::move(elements);
    return s;
  }

  // Number of devices a tiled sharding spans.
  std::int64_t device_count() const { return product(tile_dims); }

  // Product of positive counts; throws ir_error past 2^31 (no device mesh is that large).
  static std::int64_t product(const std::vector<std::int64_t>& v) {
    std::int64_t n = 1;
    for (std::int64_t d : v) {
      if (d <= 0 || d > (std::int64_t{1} << 31) / n)
        throw ir_error("sharding: device counts must be positive and below 2^31");
      n *= d;
    }
    return n;
  }

  friend bool operator==(const sharding&, const sharding&) = default;
};

}  // namespace fusedsl::hlo
