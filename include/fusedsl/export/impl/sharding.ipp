#pragma once
// Sharding annotations for the exporter: a mesh and partition specs to HLO shardings.
// The bodies of fusedsl/export/sharding.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/export/sharding.hpp"

namespace fusedsl::hlo {

FUSEDSL_DECL sharding to_sharding(const device_mesh& mesh, const partition_spec& spec,
                                  const dims& shape) {
  if (int(spec.size()) != shape.rank)
    throw ir_error("sharding: a partition spec of " + std::to_string(spec.size()) +
                   " dimensions for a tensor of rank " + std::to_string(shape.rank));
  std::vector<std::int64_t> tile, perm;
  std::vector<bool> used(mesh.axes.size(), false);
  for (int d = 0; d < shape.rank; ++d) {
    const std::string& a = spec[std::size_t(d)];
    if (a.empty()) {
      tile.push_back(1);
      continue;
    }
    const std::size_t ax = mesh.axis(a);
    if (used[ax]) throw ir_error("sharding: mesh axis '" + a + "' is used by two dimensions");
    used[ax] = true;
    const std::int64_t n = mesh.axes[ax].second;
    if (shape[d] % n != 0)
      throw ir_error("sharding: dimension " + std::to_string(d) + " of size " +
                     std::to_string(shape[d]) + " does not divide over mesh axis '" + a +
                     "' of size " + std::to_string(n));
    tile.push_back(n);
    perm.push_back(std::int64_t(ax));
  }
  std::int64_t replicated = 1;
  for (std::size_t ax = 0; ax < mesh.axes.size(); ++ax)
    if (!used[ax]) {
      replicated *= mesh.axes[ax].second;
      perm.push_back(std::int64_t(ax));
    }
  if (replicated == mesh.device_count()) return sharding::replicated();
  const bool partial = replicated > 1;
  if (partial) tile.push_back(replicated);
  sharding s = sharding::tiled(tile, partial);
  s.iota_dims.clear();
  for (const auto& a : mesh.axes) s.iota_dims.push_back(a.second);
  bool identity = true;
  for (std::size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == std::int64_t(i);
  if (!identity) s.iota_perm = perm;
  if (s.iota_dims.size() > 1 && s.iota_perm.empty())
    s.iota_dims = {mesh.device_count()};  // same order, shorter
  return s;
}

FUSEDSL_DECL sharding_spec megatron_sharding(std::int64_t devices) {
  sharding_spec s{device_mesh{{{"model", devices}}}};
  for (const char* p : {"*attn.q", "*attn.k", "*attn.v", "*ffn.fc1"}) {
    s.shard(std::string(p) + ".w", {"", "model"});
    s.shard(std::string(p) + ".b", {"model"});
  }
  s.shard("*attn.o.w", {"model", ""});
  s.shard("*ffn.fc2.w", {"model", ""});
  return s;
}

}  // namespace fusedsl::hlo
