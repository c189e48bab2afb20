// Core vocabulary: static shapes, NumPy broadcasting, tensor storage and views.
#include <doctest/doctest.h>

#include <cstdint>

#include "fusedsl/core/shape.hpp"
#include "fusedsl/core/tensor.hpp"

namespace fd = fusedsl;

TEST_CASE("shape<Ds...> has rank, size and row-major strides as constants") {
  using s = fd::shape<2, 3, 4>;
  static_assert(s::rank == 3 && s::size == 24);
  static_assert(s::strides[0] == 12 && s::strides[1] == 4 && s::strides[2] == 1);
  static_assert(s::value == fd::make_dims(2, 3, 4));
  static_assert(fd::shape<>::rank == 0 && fd::shape<>::size == 1);
  CHECK(fd::to_string(s::value) == "[2,3,4]");
}

TEST_CASE("broadcasting follows NumPy: trailing axes equal or 1, missing axes added in front") {
  constexpr auto ok = fd::broadcast_shapes(fd::make_dims(8, 1, 5), fd::make_dims(7, 1));
  static_assert(ok.ok() && ok.value == fd::make_dims(8, 7, 5));
  static_assert(fd::broadcast_shapes(fd::dims{}, fd::make_dims(3, 2)).value == fd::make_dims(3, 2));
  constexpr auto bad = fd::broadcast_shapes(fd::make_dims(8, 4), fd::make_dims(3));
  static_assert(!bad.ok());
  CHECK(std::string(bad.error) == "operands cannot be broadcast together");
}

TEST_CASE("axes count from the end when negative") {
  static_assert(fd::normalize_axis(-1, 3) == 2 && fd::axis_in_range(-3, 3) &&
                !fd::axis_in_range(3, 3));
  constexpr auto r = fd::reduce_shape(fd::make_dims(4, 5, 6), -2, true);
  static_assert(r.ok() && r.value == fd::make_dims(4, 1, 6));
}

TEST_CASE("tensors are one 64-byte aligned, zeroed allocation; views index row-major") {
  fd::tensor<float, 3, 5> t;
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % fd::tensor_alignment == 0);
  for (int i = 0; i < 15; ++i) CHECK(t[i] == 0.0f);
  t(2, 4) = 7.0f;
  CHECK(t[14] == 7.0f);
  fd::tensor_view<float, 5, 3> v(t.data());  // the same memory seen as 5x3
  CHECK(v(4, 2) == 7.0f);
  const fd::tensor_ref r = t;
  CHECK(r.type == fd::dtype::f32);
  CHECK(r.shape == fd::make_dims(3, 5));
  CHECK(r.bytes() == 60);
  fd::dynamic_tensor d(fd::dtype::bf16, fd::make_dims(4, 4));
  CHECK(reinterpret_cast<std::uintptr_t>(d.raw()) % fd::tensor_alignment == 0);
  CHECK(d.ref().bytes() == 32);
}
