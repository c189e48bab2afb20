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

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/export/export.hpp"
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
FUSEDSL_DECL sharding to_sharding(const device_mesh& mesh, const partition_spec& spec,
                                  const dims& shape);

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
FUSEDSL_DECL sharding_spec megatron_sharding(std::int64_t devices);

}  // namespace fusedsl::hlo

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/export/impl/sharding.ipp"
#endif
