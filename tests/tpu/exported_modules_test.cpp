// Our exporter's seed transformer (data/seed), unfused and with the planner's fusion groups as
// HLO fusions: both run on the TPU model and must give the same numbers; fusion must cut traffic.
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
namespace ft = fusedsl::test;

namespace {

hlo::module load_seed(const char* file) {
  std::ifstream f(std::filesystem::path(fusedsl::test::test_path(FUSEDSL_TPU_DATA_DIR)) / "seed" /
                  file);
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return hlo::parse_module(ss.str());
}

// Inputs scaled like trained weights: activations ~N(0,1), matrices ~N(0, 1/fan_in).
std::vector<tpu::value> seed_inputs(const hlo::module& m) {
  auto in = tpu::random_inputs(m, 7);
  for (auto& v : in)
    if (v.shape.rank() == 2 && v.shape.dims[0] != 128)  // not x: a weight matrix
      for (auto& x : v.data)
        x = hlo::round_to(v.shape.type, x / std::sqrt(double(v.shape.dims[0])));
  return in;
}

}  // namespace

TEST_CASE(
    "the exported seed transformer gives the same numbers fused and unfused on the TPU model") {
  const auto unfused = load_seed("seed_unfused.hlo");
  const auto fused = load_seed("seed_fused.hlo");
  const auto inputs = seed_inputs(unfused);
  const auto a = tpu::execute(tpu::make_schedule(unfused, tpu::chip_by_name("v5e")), inputs);
  const auto b = tpu::execute(tpu::make_schedule(fused, tpu::chip_by_name("v5e")), inputs);
  const auto& ya = a.shape.is_tuple() ? a.elements.at(0) : a;
  const auto& yb = b.shape.is_tuple() ? b.elements.at(0) : b;
  const double scale = ft::max_abs(ya.data, 0.0);
  CHECK(scale > 0.5);
  CHECK(ft::compare(yb.data, ya.data, ft::abs_tol(1e-4 * scale)));
}

TEST_CASE("fusing the seed transformer cuts HBM traffic and time on every chip; multi-dot fusions "
          "run as fused kernels") {
  const auto unfused = load_seed("seed_unfused.hlo");
  const auto fused = load_seed("seed_fused.hlo");
  for (const auto& chip : tpu::known_chips()) {
    CAPTURE(chip.name);
    const auto su = tpu::make_schedule(unfused, chip);
    const auto sf = tpu::make_schedule(fused, chip);
    check_invariants(su.kernels, su.tl, chip);
    check_invariants(sf.kernels, sf.tl, chip);
    const auto cu = tpu::summarize(su), cf = tpu::summarize(sf);
    CHECK(cf.hbm_bytes < cu.hbm_bytes);
    CHECK(cf.total_time_s < cu.total_time_s);
    CHECK(ft::compare(cf.matmul_flops, cu.matmul_flops, ft::rel_tol(1e-12)));
    for (const auto* c : {&cu, &cf}) {
      for (const auto& k : c->kernels) CHECK(k.time_s >= k.roofline_s * (1 - 1e-12));
      CHECK(c->vmem_peak_bytes <= chip.vmem_bytes_per_core);
    }
    std::size_t multi = 0;
    for (const auto& k : sf.kernels)
      if (k.kind == tpu::kernel_kind::fused) {
        ++multi;
        CHECK(k.dot_nodes.size() >= 2u);
        CHECK(k.hbm_bytes > 0);
      }
    CHECK(multi >= 2u);  // the attention fusion of each layer
  }
}
