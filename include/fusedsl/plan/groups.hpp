#pragma once
// Fusion groups: the partition of a node table into kernels (plan::fuse, plan/fusion.hpp, makes
// it; plan::lower, plan/lower.hpp, turns each group into a kernel descriptor).
#include <array>
#include <string_view>

#include "fusedsl/graph/node.hpp"

namespace fusedsl::plan {

using graph::node;
using graph::op_kind;

enum class group_kind : std::uint8_t { loop, matmul, row, reduce, attention, repeat };

constexpr std::string_view name_of(group_kind k) {
  constexpr std::string_view names[] = {"loop", "matmul", "row", "reduce", "attention", "repeat"};
  return names[std::size_t(k)];
}

inline constexpr int max_roots = 4;

struct fusion_group {
  group_kind kind = group_kind::loop;
  int region = 0;
  int anchor = -1;                     // the op that gives the group its kind (for loop: the root)
  std::array<int, max_roots> roots{};  // members whose values leave the group (materialised)
  int n_roots = 0;
};

template <std::size_t N>
struct fusion_plan {
  std::array<int, N> group_of{};       // group of each node; -1: not computed by any group (leaf)
  std::array<fusion_group, N> groups{};
  int n_groups = 0;
  std::array<int, N> order{};          // groups in execution order (topological)
  std::array<int, N> n_users{};        // consumers of each node (outputs and region results count)

  constexpr const fusion_group& operator[](int g) const { return groups[std::size_t(g)]; }
  constexpr int kernels_in_region(int r) const {
    int k = 0;
    for (int g = 0; g < n_groups; ++g) k += groups[std::size_t(g)].region == r;
    return k;
  }
  constexpr bool is_member(int node_id, int g) const { return group_of[std::size_t(node_id)] == g; }
};

}  // namespace fusedsl::plan
