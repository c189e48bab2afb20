// The op table (graph/ops.hpp) against every math policy that computes its bodies: the one-lane
// policy (graph/scalar.hpp: the interpreter, constant folding), the CPU kernels' vector policy
// (backend/cpu/kernels/vec_math.hpp) on this build's instruction set and on the scalar path.
// (cuda::device_math checks itself with the same graph::bodies_on, in device_math.cuh, with any
// compiler.) Each computed op's body is instantiated on each policy here, at compile time: a
// primitive a policy lacks stops this unit's build with an error naming the op
// (op_traits<op_kind::...>) and the policy. tests/backend/cpu/kernels/op_table_test.cpp compares
// the values.
#include <doctest/doctest.h>

#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/vec_math.hpp"
#include "fusedsl/graph/ops.hpp"
#include "fusedsl/graph/scalar.hpp"

namespace g = fusedsl::graph;
namespace k = fusedsl::cpu::kernels;

TEST_CASE("every computed op of the table has a body on every CPU math policy") {
  constexpr int scalar = g::bodies_on<g::scalar::math, float>();
  constexpr int native = g::bodies_on<k::vec_math, k::simd<k::native_arch>::vec>();
  constexpr int one_lane = g::bodies_on<k::vec_math, k::simd<k::scalar_arch>::vec>();
  static_assert(g::computed_ops() > 30);
  CHECK(scalar == g::computed_ops());
  CHECK(native == g::computed_ops());
  CHECK(one_lane == g::computed_ops());
}
