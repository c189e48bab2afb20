#pragma once
// User-facing sharding for the HLO exporter: a device mesh with named axes, and a partition spec
// (one mesh axis or none per tensor dimension, as in JAX's PartitionSpec) for each entry parameter
// and output, chosen by name pattern. They become HLO sharding annotations
// ({devices=[...]<=[...]} or {replicated}) for XLA's SPMD partitioner.
//
//   hlo::device_mesh mesh{{"model", 8}};
//   hlo::sharding_spec spec{mesh};
//   spec.shard("*.attn.q.w", {"", "model"})      // columns split over "model"
//       .shard("*.attn.o.w", {"model", ""});     // rows split
//   hlo::module m = hlo::to_module(program, spec.options());
//   auto megatron = hlo::megatron_sharding(8);   // the whole Megatron-LM layout (see below)
//
// Patterns are matched against the binding name ("layers.0.attn.q.w") or "output" / "output.<k>";
// '*' matches any run of characters; the first rule that matches wins; no match: replicated.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusedsl/hlo/export.hpp"
#include "fusedsl/hlo/sharding.hpp"

namespace fusedsl::hlo {

struct device_mesh {
  std::vector<std::pair<std::string, std::int64_t>> axes;  // name and size, major to minor

  std::int64_t device_count() const {
    std::int64_t n = 1;
    for (const auto& a : axes) n *= a.second;
    return n;
  }
  // Index of a named axis; throws ir_error when there is none.
  std::size_t axis(std::string_view name) const {
    for (std::size_t i = 0; i < axes.size(); ++i)
      if (axes[i].first == name) return i;
    throw ir_error("sharding: the mesh has no axis named '" + std::string(name) + "'");
  }
};

// One mesh axis name per tensor dimension; "" leaves that dimension whole.
using partition_spec = std::vector<std::string>;

// Glob match with '*' (any run of characters).
inline bool glob_match(std::string_view pattern, std::string_view s) {
  std::size_t p = 0, i = 0, star = std::string_view::npos, mark = 0;
  while (i < s.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = i;
    } else if (p < pattern.size() && pattern[p] == s[i]) {
      ++p;
      ++i;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// The HLO sharding of a tensor of `shape` laid out by `spec` over `mesh`: tile dims are the sizes
// of the named axes; mesh axes the spec does not use become a trailing replicated tile dimension;
// the device order is the mesh's iota, transposed to (used axes in spec order, unused axes).
inline sharding to_sharding(const device_mesh& mesh, const partition_spec& spec,
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

class sharding_spec {
 public:
  explicit sharding_spec(device_mesh mesh) : mesh_(std::move(mesh)) {}

  // Tensors whose name matches `pattern` are laid out by `spec` (first matching rule wins).
  sharding_spec& shard(std::string pattern, partition_spec spec) {
    rules_.emplace_back(std::move(pattern), std::move(spec));
    return *this;
  }
  // Tensors whose name matches `pattern` are replicated.
  sharding_spec& replicate(std::string pattern) {
    rules_.emplace_back(std::move(pattern), std::nullopt);
    return *this;
  }

  const device_mesh& mesh() const { return mesh_; }

  // The annotation of a named tensor: its rule's sharding, or {replicated}.
  sharding of(std::string_view name, const dims& shape) const {
    for (const auto& [pattern, spec] : rules_)
      if (glob_match(pattern, name))
        return spec ? to_sharding(mesh_, *spec, shape) : sharding::replicated();
    return sharding::replicated();
  }

  // export_options carrying this sharding (a copy of the spec lives in the rule).
  export_options options(export_form form = export_form::unfused,
                         group_calls groups = group_calls::fusion) const {
    export_options o;
    o.form = form;
    o.groups = groups;
    o.sharding = [self = *this](std::string_view name,
                                const dims& shape) -> std::optional<sharding> {
      return self.of(name, shape);
    };
    return o;
  }

 private:
  device_mesh mesh_;
  std::vector<std::pair<std::string, std::optional<partition_spec>>> rules_;
};

// Megatron-LM tensor parallelism (Shoeybi et al., 2019, section 3) over `devices` devices on one
// mesh axis "model": attention q/k/v weights and biases split by output columns (heads), the
// output projection by rows; FFN fc1 by columns, fc2 by rows; everything else (layer norms, the
// o and fc2 biases, inputs, outputs) replicated. XLA inserts the all-reduces after o and fc2.
inline sharding_spec megatron_sharding(std::int64_t devices) {
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
