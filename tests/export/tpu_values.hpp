#pragma once
// Running an exported module on the TPU-style backend's executor with the reference backend's
// bindings, and comparing its outputs with the reference's: NaN and infinities where the
// reference has them, i32 results exactly, the rest within tol of the largest |reference|.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fusedsl/core/tensor.hpp"
#include "fusedsl/hlo/ir.hpp"
#include "fusedsl/tpu/execute.hpp"

namespace tpu_values {

namespace fd = fusedsl;

// Element i of t as a double.
inline double element(const fd::dynamic_tensor& t, std::int64_t i) {
  switch (t.type()) {
    case fd::dtype::f32:
      return t.data<float>()[i];
    case fd::dtype::bf16:
      return float(t.data<fd::bf16>()[i]);
    case fd::dtype::f16:
      return float(t.data<fd::f16>()[i]);
    case fd::dtype::i32:
      return t.data<std::int32_t>()[i];
    case fd::dtype::boolean:
      return t.data<bool>()[i];
    case fd::dtype::i8:
      return t.data<std::int8_t>()[i];
    case fd::dtype::u8:
      return t.data<std::uint8_t>()[i];
  }
  return 0;
}

// The bindings as the module's entry parameters (in binding order).
inline std::vector<fd::tpu::value> to_values(const fd::hlo::module& m,
                                             const std::vector<fd::dynamic_tensor>& inputs) {
  std::vector<fd::tpu::value> args;
  const fd::hlo::computation& entry = m.entry_computation();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    fd::tpu::value v;
    v.shape = entry.instructions[entry.parameters()[i]].shape;
    for (std::int64_t k = 0; k < inputs[i].shape().size(); ++k)
      v.data.push_back(element(inputs[i], k));
    args.push_back(std::move(v));
  }
  return args;
}

inline void check_outputs(const fd::tpu::value& got, const std::vector<fd::dynamic_tensor>& want,
                          double tol) {
  const std::vector<fd::tpu::value> outs =
      got.shape.is_tuple() ? got.elements : std::vector<fd::tpu::value>{got};
  REQUIRE(outs.size() == want.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    CAPTURE(k);
    const fd::dynamic_tensor& w = want[k];
    REQUIRE(std::int64_t(outs[k].data.size()) == w.shape().size());
    double max_ref = 0, max_err = 0;
    for (std::int64_t i = 0; i < w.shape().size(); ++i) {
      const double r = element(w, i);
      const double v = outs[k].data[std::size_t(i)];
      if (std::isinf(r) || std::isnan(r)) {
        CHECK((std::isnan(r) ? std::isnan(v) : v == r));
        continue;
      }
      if (w.type() == fd::dtype::i32) CHECK(v == r);  // indices exactly
      REQUIRE(std::isfinite(v));
      max_ref = std::max(max_ref, std::abs(r));
      max_err = std::max(max_err, std::abs(v - r));
    }
    CHECK(max_err <= tol * std::max(max_ref, 1.0));
  }
}

}  // namespace tpu_values
