// The op table (graph/ops.hpp) against every math policy that computes its bodies: the one-lane
// policy (graph/scalar.hpp: the interpreter, constant folding), the CPU kernels' vector policy
// (backend/cpu/kernels/vec_math.hpp) on this build's instruction set and on the scalar path.
// (cuda::device_math checks itself the same way, in device_math.cuh, with any compiler.) Each
// computed op's body is instantiated on each policy here, at compile time: a primitive a policy
// lacks stops this unit's build with an error naming the op (op_traits<op_kind::...>) and the
// policy. tests/backend/cpu/kernels/op_table_test.cpp compares the values.
#include <doctest/doctest.h>

#include <cstddef>
#include <utility>

#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/vec_math.hpp"
#include "fusedsl/graph/ops.hpp"
#include "fusedsl/graph/scalar.hpp"

namespace g = fusedsl::graph;
namespace k = fusedsl::cpu::kernels;

namespace {

template <class M, class V, g::op_kind K>
constexpr int body_instantiates() {
  using T = g::op_traits<K>;
  constexpr g::op_category c = g::category_of(K);
  if constexpr (K == g::op_kind::argmax) {
    (void)&T::template take<M, V>;
  } else if constexpr (c == g::op_category::reduce) {
    (void)&T::template identity<M, V>;
    (void)&T::template combine<M, V>;
    (void)&T::template finish<M, V>;
  } else if constexpr (T::has_body) {
    (void)&T::template apply<M, V>;
  } else {
    return 0;
  }
  return 1;
}

// How many computed ops policy M has every body of, for values of type V.
template <class M, class V, std::size_t... I>
constexpr int bodies_on(std::index_sequence<I...>) {
  return (body_instantiates<M, V, g::op_kind(I)>() + ...);
}

template <class M, class V>
constexpr int bodies_on() {
  return bodies_on<M, V>(std::make_index_sequence<g::op_count>{});
}

// The table's computed ops: its elementwise, cast and reduce rows.
constexpr int computed_ops() {
  int n = 0;
  for (std::size_t i = 0; i < g::op_count; ++i) {
    const g::op_category c = g::op_infos[i].category;
    n += c == g::op_category::unary || c == g::op_category::binary ||
         c == g::op_category::compare || c == g::op_category::select || c == g::op_category::cast ||
         c == g::op_category::reduce;
  }
  return n;
}

}  // namespace

TEST_CASE("every computed op of the table has a body on every CPU math policy") {
  constexpr int scalar = bodies_on<g::scalar::math, float>();
  constexpr int native = bodies_on<k::vec_math, k::simd<k::native_arch>::vec>();
  constexpr int one_lane = bodies_on<k::vec_math, k::simd<k::scalar_arch>::vec>();
  static_assert(computed_ops() > 30);
  CHECK(scalar == computed_ops());
  CHECK(native == computed_ops());
  CHECK(one_lane == computed_ops());
}
