#pragma once
// The node table: one flat array of node descriptors in topological order. Every pass and every
// backend reads this value; none of them looks at expression types.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/fixed_string.hpp"
#include "fusedsl/core/shape.hpp"
#include "fusedsl/graph/ops.hpp"

namespace fusedsl::graph {

inline constexpr int max_operands = 8;

struct node {
  op_kind op = op_kind::constant;
  dtype type = dtype::f32;
  dims shape{};
  int region = 0;  // 0: the main graph; r > 0: the body of a repeated block
  int n_in = 0;
  std::array<int, max_operands> in{};

  // attributes (meaning depends on op)
  int axis = 0;                   // reductions, softmax, slice, concat, iota
  bool keepdims = false;          // reductions
  bool trans_a = false, trans_b = false;  // matmul: operand read transposed (last two axes swapped)
  bool weak = false;  // constant: takes the dtype of the other operand (like JAX weak types)
  std::array<int, max_rank> perm{};  // transpose
  std::int64_t begin = 0, end = 0;   // slice
  double value = 0;               // constant value; epsilon of layernorm/rmsnorm
  node_name name{};               // input/param names; repeat: parameter prefix
  int body = 0;                   // repeat: the region of the body
  int count = 0;                  // repeat: number of iterations

  constexpr bool same_as(const node& o) const {
    if (op != o.op || type != o.type || !(shape == o.shape) || region != o.region || n_in != o.n_in)
      return false;
    for (int i = 0; i < n_in; ++i)
      if (in[std::size_t(i)] != o.in[std::size_t(i)]) return false;
    if (axis != o.axis || keepdims != o.keepdims || trans_a != o.trans_a || trans_b != o.trans_b ||
        weak != o.weak)
      return false;
    for (int i = 0; i < max_rank; ++i)
      if (perm[std::size_t(i)] != o.perm[std::size_t(i)]) return false;
    if (begin != o.begin || end != o.end || body != o.body || count != o.count) return false;
    // NaN constants compare equal to themselves so that they merge.
    if (!(value == o.value) && !(value != value && o.value != o.value)) return false;
    return name == o.name;
  }
  constexpr std::int64_t bytes() const { return shape.size() * size_of(type); }
};

inline constexpr int max_outputs = 8;
inline constexpr int max_regions = 8;

// A region: the main graph (0) or a block body. A body reads its placeholder and has one result.
struct region_info {
  int placeholder = -1;  // node id of the body's input (-1 for the main graph)
  int result = -1;       // node id of the body's result (-1 for the main graph)
};

// The frozen node table, N nodes, usable as a constexpr value.
template <std::size_t N>
struct graph {
  std::array<node, N> nodes{};
  std::array<int, max_outputs> outputs{};
  // -1: output k goes to user memory; else the state node whose new value it is (fd::update)
  std::array<int, max_outputs> output_state{-1, -1, -1, -1, -1, -1, -1, -1};
  int n_outputs = 0;
  std::array<region_info, max_regions> regions{};
  int n_regions = 1;

  static constexpr int size() { return int(N); }
  constexpr const node& operator[](int i) const { return nodes[std::size_t(i)]; }
  constexpr const node* data() const { return nodes.data(); }
};

// A run-time view of any graph<N>, so that run-time code does not need to be a template on N.
struct graph_view {
  const node* nodes = nullptr;
  int size = 0;
  const int* outputs = nullptr;
  int n_outputs = 0;
  const region_info* regions = nullptr;
  int n_regions = 1;
  const int* output_state = nullptr;  // per output: -1, or the state node it updates

  template <std::size_t N>
  constexpr graph_view(const graph<N>& g)
      : nodes(g.nodes.data()), size(int(N)), outputs(g.outputs.data()), n_outputs(g.n_outputs),
        regions(g.regions.data()), n_regions(g.n_regions), output_state(g.output_state.data()) {}
  constexpr int state_of_output(int k) const { return output_state ? output_state[k] : -1; }
  constexpr graph_view() = default;
  constexpr const node& operator[](int i) const { return nodes[i]; }
};

// A value a program needs bound before it runs, as the executors' bindings() list it: the binding
// name ("layers.0.attn.q.w"), whether it is an input or a param, its dtype and its shape.
struct binding_info {
  std::string name;
  op_kind kind;
  dtype type;
  dims shape;

  static binding_info of(graph_view g, int node_id, std::string binding_name) {
    const node& n = g[node_id];
    return {std::move(binding_name), n.op, n.type, n.shape};
  }
};

}  // namespace fusedsl::graph
