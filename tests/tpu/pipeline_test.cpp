#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "fusedsl/tpu/plan.hpp"
#include "invariants.hpp"

namespace tpu = fusedsl::tpu;

namespace {

double mxu_utilisation(const tpu::kernel_plan& kp, const tpu::timeline& tl,
                       const tpu::chip_spec& c) {
  return kp.flops / (tl.end_s * c.peak_bf16_flops);
}

}  // namespace

TEST_CASE("large aligned bf16 matmuls with 512x1024x1024 blocks on v5e reach 80-95% of MXU peak") {
  const auto chip = tpu::chip_by_name("v5e");
  for (std::int64_t s : {4096, 8192}) {
    CAPTURE(s);
    tpu::matmul_problem p{1, s, s, s, 2, 2, 2, 1};
    std::vector<tpu::kernel_plan> ks{tpu::plan_matmul("mm", p, {512, 1024, 1024}, chip)};
    const auto tl = tpu::simulate(ks, chip);
    const double u = mxu_utilisation(ks[0], tl, chip);
    CHECK(u >= 0.80);
    CHECK(u <= 0.95);
    check_invariants(ks, tl, chip);
  }
}

TEST_CASE("a simulated matmul is never faster than its compute or HBM roofline") {
  for (const auto& chip : tpu::known_chips()) {
    for (const auto& mkn : {std::array<std::int64_t, 3>{8192, 8192, 8192},
                            std::array<std::int64_t, 3>{8, 4096, 4096},
                            std::array<std::int64_t, 3>{300, 70, 1000}}) {
      const std::int64_t m = mkn[0], k = mkn[1], n = mkn[2];
      CAPTURE(chip.name);
    CAPTURE(m);
    CAPTURE(k);
      tpu::matmul_problem p{1, m, k, n, 2, 2, 2, 1};
      const auto b = tpu::choose_blocks(p, chip, chip.vmem_bytes_per_core);
      std::vector<tpu::kernel_plan> ks{tpu::plan_matmul("mm", p, b, chip)};
      const auto tl = tpu::simulate(ks, chip);
      CHECK(tl.end_s >= ks[0].flops / chip.peak_bf16_flops * (1 - 1e-12));
      CHECK(tl.end_s >= double(ks[0].hbm_bytes) / chip.hbm_bytes_per_s * (1 - 1e-12));
      check_invariants(ks, tl, chip);
    }
  }
}

TEST_CASE("a skinny matmul (m=8) is HBM-bound: its time is close to bytes / bandwidth") {
  const auto chip = tpu::chip_by_name("v5e");
  tpu::matmul_problem p{1, 8, 8192, 8192, 2, 2, 2, 1};
  const auto b = tpu::choose_blocks(p, chip, chip.vmem_bytes_per_core);
  std::vector<tpu::kernel_plan> ks{tpu::plan_matmul("mm", p, b, chip)};
  const auto tl = tpu::simulate(ks, chip);
  const double hbm_s = double(ks[0].hbm_bytes) / chip.hbm_bytes_per_s;
  CHECK(tl.end_s < 1.2 * hbm_s);
}

TEST_CASE("DMA of step i+1 overlaps compute of step i") {
  const auto chip = tpu::chip_by_name("v5e");
  tpu::matmul_problem p{1, 1024, 4096, 1024, 2, 2, 2, 1};
  std::vector<tpu::kernel_plan> ks{tpu::plan_matmul("mm", p, {512, 512, 512}, chip)};
  const auto tl = tpu::simulate(ks, chip);
  std::map<std::size_t, const tpu::timed_event*> mxu, in;
  for (const auto& e : tl.events) {
    if (e.on == tpu::unit::mxu) mxu[e.step] = &e;
    if (e.on == tpu::unit::dma && !e.outbound) in[e.step] = &e;
  }
  int overlapped = 0;
  for (auto& [s, e] : mxu)
    if (in.count(s + 1) && in[s + 1]->start_s < e->end_s && in[s + 1]->end_s > e->start_s)
      ++overlapped;
  CHECK(overlapped >= int(mxu.size()) - 2);
  // Serial would be the sum of all DMA and compute; the pipeline is well below it.
  double serial = 0;
  for (const auto& e : tl.events) serial += e.end_s - e.start_s;
  CHECK(tl.end_s < 0.8 * serial);
}

TEST_CASE("a vector kernel is chunked to fit VMEM and is bound by HBM for one op per element") {
  const auto chip = tpu::chip_by_name("v5e");
  const std::int64_t n = 64 * 1024 * 1024;
  std::vector<tpu::kernel_plan> ks{tpu::plan_vector("add", 2 * 4 * n, 4 * n,
                                                    tpu::vpu_tile_cycles(n / 1024, 1024, 4, chip),
                                                    double(n), chip, chip.vmem_bytes_per_core)};
  CHECK(ks[0].steps.size() > 1);
  CHECK(ks[0].hbm_bytes == 12 * n);
  const auto tl = tpu::simulate(ks, chip);
  CHECK(tl.end_s >= double(12 * n) / chip.hbm_bytes_per_s * (1 - 1e-12));
  CHECK(tl.end_s < 1.1 * double(12 * n) / chip.hbm_bytes_per_s);
  check_invariants(ks, tl, chip);
}
