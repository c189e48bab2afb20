#pragma once
// Shared by the executor tests: random bindings, and a comparison with the Eigen reference.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/fusedsl.hpp"
#include "../../../common/compare.hpp"

namespace fusedsl::test {

struct bound_program {
  std::vector<std::string> names;  // the reference's bindings view these
  std::vector<dynamic_tensor> storage;
  std::vector<reference::binding> refs;
};

// Random data for every binding; gammas near 1, inputs larger than weights.
template <class Exec>
bound_program bind_random(Exec& ex, unsigned seed) {
  bound_program b;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  const auto infos = ex.bindings();
  b.storage.reserve(infos.size());
  b.names.reserve(infos.size());
  for (const auto& info : infos) {
    b.storage.emplace_back(info.type, info.shape);
    dynamic_tensor& t = b.storage.back();
    for (std::int64_t i = 0; i < info.shape.size(); ++i) {
      float v = nd(rng) * (info.kind == graph::op_kind::input ? 10.0f : 1.0f);
      if (info.name.find("gamma") != std::string::npos) v += 1.0f;
      switch (info.type) {
        case dtype::f32: t.data<float>()[i] = v; break;
        case dtype::bf16: t.data<bf16>()[i] = bf16(v); break;
        case dtype::f16: t.data<f16>()[i] = f16(v); break;
        case dtype::i32:
          t.data<std::int32_t>()[i] = std::int32_t(rng() % 17) - 3;
          break;  // some out of range
        case dtype::boolean: t.data<bool>()[i] = (rng() % 4) != 0; break;
        case dtype::i8: t.data<std::int8_t>()[i] = std::int8_t(int(rng() % 256) - 128); break;
        case dtype::u8: t.data<std::uint8_t>()[i] = std::uint8_t(rng() % 256); break;
      }
    }
    ex.bind(info.name, t.ref());
    b.names.push_back(info.name);
    b.refs.push_back({b.names.back(), t.ref()});
  }
  return b;
}

// Element i of t, of any dtype, as a double.
inline double element(const dynamic_tensor& t, std::int64_t i) {
  switch (t.type()) {
    case dtype::f32: return t.data<float>()[i];
    case dtype::bf16: return double(float(t.data<bf16>()[i]));
    case dtype::f16: return double(float(t.data<f16>()[i]));
    case dtype::i32: return t.data<std::int32_t>()[i];
    case dtype::boolean: return t.data<bool>()[i] ? 1.0 : 0.0;
    case dtype::i8: return t.data<std::int8_t>()[i];
    case dtype::u8: return t.data<std::uint8_t>()[i];
  }
  return 0.0;
}

// Runs the executor and compares every output with the Eigen reference on the same bindings
// (compare.hpp's rules; the outputs as one sequence, output 0 first).
template <class Program>
comparison compare_with_reference(cpu::executor<Program>& ex, const bound_program& b, tolerance tol,
                                  nans policy = nans::unexpected) {
  std::vector<dynamic_tensor> outs;
  for (int o = 0; o < Program::graph.n_outputs; ++o) {
    const graph::node& n = Program::graph[Program::graph.outputs[std::size_t(o)]];
    outs.emplace_back(n.type, n.shape);
    ex.bind_output(o, outs.back().ref());
  }
  ex.run();
  const auto expected = reference::run(graph::graph_view(Program::graph),
                                       std::span<const reference::binding>(b.refs));
  std::vector<double> got, want;
  for (std::size_t o = 0; o < outs.size(); ++o) {
    REQUIRE(expected[o].shape() == outs[o].shape());
    REQUIRE(expected[o].type() == outs[o].type());
    for (std::int64_t i = 0; i < outs[o].shape().size(); ++i) {
      got.push_back(element(outs[o], i));
      want.push_back(element(expected[o], i));
    }
  }
  return compare(got, want, tol, policy);
}

// The largest |cpu - reference| / max(1, |reference|) over all outputs; +inf where a NaN or an
// inf differs from the reference.
template <class Program>
double max_relative_error(cpu::executor<Program>& ex, const bound_program& b) {
  return compare_with_reference(ex, b, rel_tol(1.0)).max_ratio;
}

}  // namespace fusedsl::test
