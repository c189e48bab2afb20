// Modules exported by jax.jit(...).lower(...).as_text(dialect="hlo") (data/gen_jax_modules.py),
// parsed with the HLO parser, scheduled on every chip model and run; results compared with the
// outputs XLA computed on CPU for the same inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../common/compare.hpp"
#include "../common/test_paths.hpp"
#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/tpu/cost.hpp"
#include "fusedsl/tpu/execute.hpp"
#include "fusedsl/tpu/inputs.hpp"
#include "fusedsl/tpu/schedule.hpp"
#include "invariants.hpp"

namespace tpu = fusedsl::tpu;
namespace hlo = fusedsl::hlo;
namespace fs = std::filesystem;
namespace ft = fusedsl::test;

namespace {

const fs::path data_dir = fusedsl::test::test_path(FUSEDSL_TPU_DATA_DIR);

hlo::module load(const std::string& name, const std::string& file = "module.hlo") {
  std::ifstream f(data_dir / name / file);
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return hlo::parse_module(ss.str());
}

// Every |result - expected| within tol of the largest |expected|.
ft::comparison within_scale(const tpu::value& v, const tpu::value& ref, double tol) {
  return ft::compare(v.data, ref.data, ft::abs_tol(tol * ft::max_abs(ref.data, 0.0)));
}

}  // namespace

TEST_CASE("jax-exported modules match XLA's results on every chip model") {
  struct c { const char* name; double tolerance; };
  for (const c& cs : {c{"matmul_bias_gelu", 1e-5}, c{"layer_f32", 1e-5}, c{"layer_bf16", 1e-4}}) {
    const std::string name = cs.name;
    const double tol = cs.tolerance;
    CAPTURE(name);
    const auto m = load(name);
    const auto inputs = tpu::load_inputs(m, data_dir / name);
    const auto expected = tpu::read_npy_value(data_dir / name / "out0.npy");
    for (const auto& chip : tpu::known_chips()) {
      CAPTURE(chip.name);
      const auto s = tpu::make_schedule(m, chip);
      check_invariants(s.kernels, s.tl, chip);
      const auto out = tpu::execute(s, inputs);
      CHECK(within_scale(out, expected, tol));
    }
  }
}

TEST_CASE("jax's int8 linear layer: the s32 products exactly as XLA sums them, at the int8 rate") {
  const auto m = load("int8_linear");
  const auto inputs = tpu::load_inputs(m, data_dir / "int8_linear");
  const auto sums = tpu::read_npy_value(data_dir / "int8_linear" / "out0.npy");
  const auto scaled = tpu::read_npy_value(data_dir / "int8_linear" / "out1.npy");
  REQUIRE(sums.data.size() == 40u * 72u);
  CHECK(sums.data[0] == 128.0 * 128.0 * 600.0);
  for (const auto& chip : tpu::known_chips()) {
    CAPTURE(chip.name);
    const auto s = tpu::make_schedule(m, chip);
    check_invariants(s.kernels, s.tl, chip);
    const auto out = tpu::execute(s, inputs);
    REQUIRE(out.elements.size() == 2u);
    CHECK(ft::compare(out.elements[0].data, sums.data, ft::exact()));
    CHECK(within_scale(out.elements[1], scaled, 1e-6));
    std::size_t int8_dots = 0;
    for (const auto& k : s.kernels)
      if (k.kind == tpu::kernel_kind::matmul || k.kind == tpu::kernel_kind::fused) {
        const auto& p = k.dot_problems.empty() ? k.mm : k.dot_problems.front();
        int8_dots += p.lhs_bytes == 1 && p.rhs_bytes == 1 && p.mxu_rate == chip.int8_rate;
      }
    CHECK(int8_dots == 1u);
  }
}

TEST_CASE("small VMEM budgets force multi-step matmuls and still give XLA's results") {
  const auto m = load("layer_bf16");
  const auto inputs = tpu::load_inputs(m, data_dir / "layer_bf16");
  const auto expected = tpu::read_npy_value(data_dir / "layer_bf16" / "out0.npy");
  tpu::schedule_options opt;
  opt.blocks = tpu::matmul_blocks{16, 128, 128};
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"), opt);
  check_invariants(s.kernels, s.tl, s.chip);
  CHECK(within_scale(tpu::execute(s, inputs), expected, 1e-4));
}

TEST_CASE("in the jax transformer layer every matmul is fused with what follows it when legal") {
  const auto m = load("layer_f32");
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  std::size_t matmuls = 0, fused = 0;
  for (const auto& k : s.kernels)
    if (k.kind == tpu::kernel_kind::matmul) {
      ++matmuls;
      if (k.ops.size() > 1) ++fused;
      CHECK(k.mm.mxu_passes == 6);  // f32 operands: precision HIGHEST, six bf16 passes
    }
  CHECK(matmuls == 6);  // qkv, scores, probabilities x v, output projection, two MLP matmuls
  CHECK(fused == 4);    // scores+scale+mask, out-proj+residual, mlp1+bias, mlp2+residual+bias
  const auto mb = load("layer_bf16");
  const auto b = tpu::make_schedule(mb, tpu::chip_by_name("v5e"));
  for (const auto& k : b.kernels)
    if (k.kind == tpu::kernel_kind::matmul) CHECK(k.mm.mxu_passes == 1);
}

TEST_CASE("the cost of the jax layer is never below its roofline, per kernel and in total") {
  for (const char* name : {"matmul_bias_gelu", "layer_f32", "layer_bf16"}) {
    CAPTURE(name);
    const auto m = load(name);
    for (const auto& chip : tpu::known_chips()) {
      CAPTURE(chip.name);
      const auto s = tpu::make_schedule(m, chip);
      const auto c = tpu::summarize(s);
      for (const auto& k : c.kernels) CHECK(k.time_s >= k.roofline_s * (1 - 1e-12));
      CHECK(c.total_time_s >= c.roofline_time_s * (1 - 1e-12));
      CHECK(c.total_time_s >= c.matmul_flops / chip.peak_bf16_flops);
      CHECK(c.total_time_s >= double(c.hbm_bytes) / chip.hbm_bytes_per_s * (1 - 1e-12));
      CHECK(c.vmem_peak_bytes <= chip.vmem_bytes_per_core);
      CHECK(c.mxu_utilization <= 1.0);
    }
  }
}

TEST_CASE("npy inputs of the wrong shape and missing input files are named in the error") {
  const auto m = load("matmul_bias_gelu");
  CHECK_THROWS_WITH_AS(tpu::load_inputs(m, data_dir / "layer_f32"),
                       doctest::Contains("input 0"), tpu::tpu_error);
  CHECK_THROWS_WITH_AS(tpu::load_inputs(m, data_dir), doctest::Contains("no file for input 0"),
                       tpu::tpu_error);
}

TEST_CASE("every elementwise, logical, reduce and layout op jax emits computes what XLA computes") {
  const auto m = load("ops_zoo");
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  check_invariants(s.kernels, s.tl, s.chip);
  const auto out = tpu::execute(s, tpu::load_inputs(m, data_dir / "ops_zoo"));
  REQUIRE(out.shape.is_tuple());
  REQUIRE(out.elements.size() == 34u);
  for (std::size_t i = 0; i < out.elements.size(); ++i) {
    CAPTURE(i);
    const auto expected =
        tpu::read_npy_value(data_dir / "ops_zoo" / ("out" + std::to_string(i) + ".npy"));
    CHECK(ft::compare(out.elements[i].data, expected.data,
                      ft::abs_tol(1e-6 * ft::max_abs(expected.data)), ft::nans::expected));
  }
}
