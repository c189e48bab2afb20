#pragma once
// Bindings for exported programs: random values for every entry parameter, and the reference
// backend's outputs for them (the expected numbers of the export and interop tests).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/export/export.hpp"

namespace export_cases {

namespace fd = fusedsl;

// Random bindings for a program's entry parameters: [-1, 1], or [0.5, 2] for "pos"; a rank-2
// param (a weight [in, out]) is scaled by 1/sqrt(in), the usual initialisation, so that activations
// stay O(1) through the layers as in a trained model.
inline std::vector<fd::dynamic_tensor> random_bindings(
    const std::vector<fd::hlo::export_binding>& bs, unsigned seed_value) {
  std::mt19937 rng(seed_value);
  std::vector<fd::dynamic_tensor> out;
  for (const auto& b : bs) {
    const bool positive = b.name == "pos";
    const float scale = b.kind == fd::graph::op_kind::param && b.shape.rank == 2
                            ? 1.0f / std::sqrt(float(b.shape[0]))
                            : 1.0f;
    std::uniform_real_distribution<float> u(positive ? 0.5f : -scale, positive ? 2.0f : scale);
    fd::dynamic_tensor t(b.type, b.shape);
    for (std::int64_t i = 0; i < b.shape.size(); ++i) {
      const float v = u(rng);
      switch (b.type) {
        case fd::dtype::f32:
          t.data<float>()[i] = v;
          break;
        case fd::dtype::bf16:
          t.data<fd::bf16>()[i] = fd::bf16(v);
          break;
        case fd::dtype::f16:
          t.data<fd::f16>()[i] = fd::f16(v);
          break;
        case fd::dtype::i32:
          t.data<std::int32_t>()[i] = std::int32_t(v * 10);
          break;  // [-9, 9]
        case fd::dtype::boolean:
          t.data<bool>()[i] = v > 0;
          break;
        case fd::dtype::i8:
          t.data<std::int8_t>()[i] = std::int8_t(v * 100);
          break;
        case fd::dtype::u8:
          t.data<std::uint8_t>()[i] = std::uint8_t(v * 100 + 100);
          break;
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

// The reference backend's outputs for those bindings.
inline std::vector<fd::dynamic_tensor> reference_outputs(
    const fd::graph::graph_view& g, const std::vector<fd::hlo::export_binding>& bs,
    std::vector<fd::dynamic_tensor>& inputs) {
  fd::reference::evaluator ev{g};
  for (std::size_t i = 0; i < bs.size(); ++i) ev.bind(bs[i].name, inputs[i].ref());
  return ev.run();
}

}  // namespace export_cases
