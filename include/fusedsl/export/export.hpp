#pragma once
// hlo::export: a fusedsl program (its node table and fusion plan) as an HLO module of the runtime
// IR (ir.hpp), for XLA and for the TPU-style backend. Two forms:
//   unfused  every node becomes plain HLO instructions in the entry computation; XLA fuses itself;
//   fused    one `fusion` computation per fusion group of the plan, called from the entry.
// Both are valid HloModule text for XLA's parser (printer.hpp). Mapping (docs/hlo-export.md):
//   * NumPy broadcasting is an explicit `broadcast` with dimensions={...} (size-1 axes reshaped
//     away first); scalar constants are typed with the dtype of the op that reads them (weak
//     constants), so -inf is an f32[] or bf16[] `constant(-inf)`;
//   * matmul is `dot` with batch and contracting dimension numbers (trans_a/trans_b only move the
//     contracting dimension; no transpose is emitted); batch axes are broadcast first;
//   * reductions are `reduce` with a to_apply computation (add/maximum/minimum); mean = sum then
//     divide; keepdims is a reshape; argmax is jax's variadic reduce of (x, iota) with a
//     comparator computation (first maximum, NaN the largest), the index its second result;
//   * gather is XLA's `gather` of table rows (index_vector_dim = the ids' rank, table dim 0
//     collapsed); dynamic_slice / dynamic_update_slice are `dynamic-slice` (dynamic_slice_sizes)
//     / `dynamic-update-slice` with one s32 start per dimension; sin / cos are `sine` / `cosine`;
//   * gelu and silu are the op table's bodies written with primitives (impl/op_bodies.ipp), relu
//     is maximum(x, 0), the row composites the decompositions of graph/expand.hpp; bf16/f16
//     arithmetic is done in f32 between two `convert`s (the dtype rule of core/dtype.hpp), so dot
//     and reduce accumulate in f32;
//   * a stacked block (`repeat`) is unrolled: layer i reads entry parameters
//     "<prefix>.<i>.<param>"; in the fused form every layer calls the same fusion computations;
//   * entry parameters follow the binding order (every input and param in the order the graph
//     first reads them, layer by layer, as the reference backend lists them) and each keeps its
//     binding name in metadata={op_name="..."}; several outputs give a tuple root.
// The fused form's groups are `fusion` instructions with the plan's kinds (loop: kLoop; matmul,
// attention: kOutput; row, reduce: kInput); with group_calls::call, `call`s of the very same
// computations (XLA inlines them); with group_calls::xla_cpu, kLoop fusions that XLA's CPU backend
// compiles as given: one per group where the group keeps XLA:CPU's rules, else the group's parts
// (xla_cpu_fusion.hpp). XLA:CPU refuses kInput, takes kOutput only as add(dot(p, p), p), and
// aborts on loop fusions with several outputs or a transpose/reshape of an intermediate, since
// its layout assignment clears the layouts inside a fusion body it is handed.
//
//   hlo::module m = hlo::to_module(program);                              // unfused
//   std::string t = hlo::to_text(program, {.form = hlo::export_form::fused});
// An op with no HLO mapping is a compile-time error naming the op (check_exportable).
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/export/xla_cpu_fusion.hpp"
#include "fusedsl/graph/builder.hpp"
#include "fusedsl/graph/node.hpp"
#include "fusedsl/hlo/builder.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "fusedsl/plan/fusion.hpp"

namespace fusedsl::hlo {

using graph::op_kind;

// ---- which ops have an HLO mapping (checked at compile time) ----

// From the op table (graph/ops.hpp): an op has a mapping when its row names an HLO opcode or a
// composite lowering.
struct hlo_mapping {
  static constexpr bool has(op_kind k) { return graph::has_hlo_lowering(k); }
};

namespace diag {
// The op is the template argument: "no_hlo_mapping<fusedsl::graph::op_kind::erf, false>".
template <op_kind Op, bool Mapped>
struct no_hlo_mapping {
  static_assert(Mapped,
                "hlo::export: the graph holds an op with no HLO mapping (named in this template's "
                "Op argument)");
};
}  // namespace diag

// The first node whose op `Mapping` cannot export, or -1.
template <class Mapping, std::size_t N>
constexpr int first_unmapped(const graph::graph<N>& g) {
  for (int i = 0; i < int(N); ++i)
    if (!Mapping::has(g[i].op)) return i;
  return -1;
}

// A compile-time error, naming the op, when a node of Program's graph has no HLO mapping.
template <class Program, class Mapping = hlo_mapping>
constexpr bool check_exportable() {
  using P = std::remove_cvref_t<Program>;
  constexpr int bad = first_unmapped<Mapping>(P::graph);
  if constexpr (bad >= 0) (void)diag::no_hlo_mapping<P::graph[bad].op, false>{};
  return true;  // the diagnostic above is the one error; nothing else fails after it
}

// ---- options ----

enum class export_form : std::uint8_t { unfused, fused };
// How the fused form's entry runs a group: one `fusion` of the plan's kind (kLoop/kInput/kOutput,
// the plan's shape; XLA parses it but its CPU backend compiles only some of it), a `call` of the
// same computation, or the kLoop fusions XLA's CPU backend compiles (xla_cpu_fusion.hpp: one per
// group where XLA:CPU can take it, else the group's parts in order).
enum class group_calls : std::uint8_t { fusion, call, xla_cpu };

// A sharding annotation for a named entry parameter or output ("output.<k>"), or none.
using sharding_rule =
    std::function<std::optional<hlo::sharding>(std::string_view name, const dims& shape)>;

struct export_options {
  export_form form = export_form::unfused;
  group_calls groups = group_calls::fusion;  // fused form: how the entry calls a group
  xla_cpu_options xla_cpu{};                 // group_calls::xla_cpu: e.g. plain library dots
  std::string module_name = "fusedsl";
  sharding_rule sharding{};  // empty: no annotations
};

// A run-time view of a fusion_plan<N>.
struct fusion_view {
  const int* group_of = nullptr;
  const plan::fusion_group* groups = nullptr;
  int n_groups = 0;
  const int* order = nullptr;

  template <std::size_t N>
  constexpr fusion_view(const plan::fusion_plan<N>& p)
      : group_of(p.group_of.data()),
        groups(p.groups.data()),
        n_groups(p.n_groups),
        order(p.order.data()) {}
  constexpr fusion_view() = default;
};

// One entry parameter: the name it is bound by, and what it holds.
struct export_binding {
  std::string name;
  dtype type = dtype::f32;
  dims shape{};
  op_kind kind = op_kind::input;
};

// The entry parameters of an exported graph, in order.
FUSEDSL_DECL std::vector<export_binding> export_bindings(const graph::graph_view& g);

// Run-time export of a node table (and, for the fused form, its fusion plan).
FUSEDSL_DECL module to_module(const graph::graph_view& g, const fusion_view* fusion,
                              const export_options& o = {});

// Export a compiled program (fusedsl::compile(...)).
template <class Program>
  requires requires { Program::graph; Program::fusion; }
module to_module(const Program&, const export_options& o = {}) {
  static constexpr bool exportable = check_exportable<Program>();
  (void)exportable;
  const fusion_view f(Program::fusion);
  return to_module(graph::graph_view(Program::graph), &f, o);
}

template <class Program>
  requires requires { Program::graph; Program::fusion; }
std::string to_text(const Program& p, const export_options& o = {}) {
  return to_text(to_module(p, o));
}

}  // namespace fusedsl::hlo

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/export/impl/export.ipp"
#endif
