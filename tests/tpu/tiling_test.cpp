#include <doctest/doctest.h>

#include "fusedsl/tpu/plan.hpp"
#include "fusedsl/tpu/tiling.hpp"

namespace tpu = fusedsl::tpu;

TEST_CASE("layout tiles are (8,128) for 32-bit and (16,128) for 16-bit elements") {
  CHECK(tpu::layout_tile_for(4).sublanes == 8);
  CHECK(tpu::layout_tile_for(2).sublanes == 16);
  CHECK(tpu::layout_tile_for(2).lanes == 128);
}

TEST_CASE("a tiled matmul moves (m*k*n/bn + k*n*m/bm + m*n) * bytes of HBM traffic") {
  const auto chip = tpu::chip_by_name("v5e");
  struct c { std::int64_t m, k, n, bm, bk, bn; int bytes; };
  for (const c& cs :
       {c{1024, 1024, 1024, 256, 256, 256, 2}, c{2048, 4096, 1024, 512, 1024, 512, 2},
        c{512, 2048, 768, 128, 512, 256, 4}, c{8192, 8192, 8192, 512, 1024, 1024, 2}}) {
    const std::int64_t m = cs.m, k = cs.k, n = cs.n, bm = cs.bm, bk = cs.bk, bn = cs.bn;
    const int bytes = cs.bytes;
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    tpu::matmul_problem p{1, m, k, n, bytes, bytes, bytes, 1};
    tpu::matmul_blocks b{bm, bk, bn};
    const std::int64_t formula = (m * k * n / bn + k * n * m / bm + m * n) * bytes;
    CHECK(tpu::hbm_traffic_bytes(p, b) == formula);
    CHECK(tpu::plan_matmul("mm", p, b, chip).hbm_bytes == formula);
  }
}

TEST_CASE("the plan's traffic equals the closed form also for ragged shapes and batches") {
  const auto chip = tpu::chip_by_name("v6e");
  tpu::matmul_problem p{3, 300, 700, 520, 2, 2, 4, 1};
  for (auto b : {tpu::matmul_blocks{128, 256, 256}, tpu::matmul_blocks{64, 1024, 256},
                 tpu::matmul_blocks{304, 512, 512}}) {
    CAPTURE(b.bm);
    CHECK(tpu::plan_matmul("mm", p, b, chip).hbm_bytes == tpu::hbm_traffic_bytes(p, b));
  }
}

TEST_CASE("blocks that are not multiples of the MXU or layout tile are rejected") {
  const auto chip = tpu::chip_by_name("v6e");
  tpu::matmul_problem p{1, 512, 512, 512, 2, 2, 2, 1};
  CHECK_THROWS_WITH_AS(tpu::check_blocks(p, {128, 128, 256}, chip),
                       doctest::Contains("multiples of the MXU dimension 256"), tpu::tpu_error);
  CHECK_THROWS_WITH_AS(tpu::check_blocks(p, {8, 256, 256}, chip),
                       doctest::Contains("bm must be a multiple of 16"), tpu::tpu_error);
  CHECK_NOTHROW(tpu::check_blocks(p, {16, 256, 256}, chip));
}

TEST_CASE("chosen blocks obey the MXU and layout tiles and fit VMEM double-buffered") {
  for (const auto& chip : tpu::known_chips()) {
    for (const auto& mkn : {std::array<std::int64_t, 3>{8192, 8192, 8192},
                            std::array<std::int64_t, 3>{16, 64, 192},
                            std::array<std::int64_t, 3>{1000, 3000, 200}}) {
      const std::int64_t m = mkn[0], k = mkn[1], n = mkn[2];
      CAPTURE(chip.name);
      CAPTURE(m);
      tpu::matmul_problem p{1, m, k, n, 2, 2, 2, 1};
      const auto b = tpu::choose_blocks(p, chip, chip.vmem_bytes_per_core);
      CHECK_NOTHROW(tpu::check_blocks(p, b, chip));
      CHECK(tpu::vmem_footprint(p, b) <= chip.vmem_bytes_per_core);
    }
  }
}

TEST_CASE("a small VMEM budget shrinks the blocks; one too small for any block is an error") {
  const auto chip = tpu::chip_by_name("v5e");
  tpu::matmul_problem p{1, 4096, 4096, 4096, 2, 2, 2, 1};
  const auto big = tpu::choose_blocks(p, chip, chip.vmem_bytes_per_core);
  const auto small = tpu::choose_blocks(p, chip, 2 * tpu::mib);
  CHECK(tpu::vmem_footprint(p, small) <= 2 * tpu::mib);
  CHECK(small.bm * small.bk * small.bn < big.bm * big.bk * big.bn);
  CHECK_THROWS_WITH_AS(tpu::choose_blocks(p, chip, 1024), doctest::Contains("fits in 1024 bytes"),
                       tpu::tpu_error);
}

TEST_CASE("padding to MXU tiles is counted as MXU work") {
  tpu::matmul_problem p{1, 100, 100, 100, 2, 2, 2, 1};
  tpu::matmul_blocks b{112, 128, 128};
  CHECK(tpu::padded_macs(p, b) == 112.0 * 128 * 128);
  CHECK(tpu::useful_macs(p) == 1e6);
}
