#include <doctest/doctest.h>

#include <cmath>

#include "fusedsl/tpu/chip.hpp"

namespace tpu = fusedsl::tpu;

TEST_CASE("every known chip's clock reproduces its published peak bf16 FLOP/s") {
  for (const auto& c : tpu::known_chips()) {
    CAPTURE(c.name);
    tpu::validate(c);
    const double peak = 2.0 * c.mxus_per_core * c.mxu_dim * c.mxu_dim * c.clock_hz() * c.cores_per_chip;
    CHECK(peak == doctest::Approx(c.peak_bf16_flops).epsilon(1e-12));
    CHECK(c.clock_hz() > 0.5e9);
    CHECK(c.clock_hz() < 4e9);
  }
}

TEST_CASE("v5e is one TensorCore with four 128x128 MXUs, 128 MiB VMEM, 819 GB/s, 197 TFLOP/s") {
  const auto c = tpu::chip_by_name("v5e");
  CHECK(c.cores_per_chip == 1);
  CHECK(c.mxus_per_core == 4);
  CHECK(c.mxu_dim == 128);
  CHECK(c.vmem_bytes_per_core == 128 * tpu::mib);
  CHECK(c.hbm_bytes_per_s == 819e9);
  CHECK(c.peak_bf16_flops == 197e12);
  CHECK(c.clock_hz() == doctest::Approx(1.503e9).epsilon(1e-3));
}

TEST_CASE("v6e has 256x256 MXUs; v4 and v5p have two TensorCores") {
  CHECK(tpu::chip_by_name("v6e").mxu_dim == 256);
  CHECK(tpu::chip_by_name("v4").cores_per_chip == 2);
  CHECK(tpu::chip_by_name("v5p").cores_per_chip == 2);
}

TEST_CASE("an unknown chip name is an error listing the known ones") {
  CHECK_THROWS_WITH_AS(tpu::chip_by_name("v9z"), doctest::Contains("known: v4, v5e, v5p, v6e"),
                       tpu::tpu_error);
}

TEST_CASE("a user-given spec overrides the fields it names and keeps the rest") {
  const auto c = tpu::parse_chip_spec("name=toy,mxu_dim=256,mxus=1,vmem_mib=8,peak_tflops=100");
  CHECK(c.name == "toy");
  CHECK(c.mxu_dim == 256);
  CHECK(c.mxus_per_core == 1);
  CHECK(c.vmem_bytes_per_core == 8 * tpu::mib);
  CHECK(c.peak_bf16_flops == 100e12);
  CHECK(c.hbm_bytes_per_s == 819e9);  // from the v5e base
  CHECK(c.clock_hz() == doctest::Approx(100e12 / (2.0 * 256 * 256)));
}

TEST_CASE("a malformed user-given spec names the key at fault") {
  CHECK_THROWS_WITH_AS(tpu::parse_chip_spec("mxu_dim=100"), doctest::Contains("mxu_dim"),
                       tpu::tpu_error);
  CHECK_THROWS_WITH_AS(tpu::parse_chip_spec("hbm_gbps=fast"), doctest::Contains("hbm_gbps"),
                       tpu::tpu_error);
  CHECK_THROWS_WITH_AS(tpu::parse_chip_spec("clock=1"), doctest::Contains("unknown key 'clock'"),
                       tpu::tpu_error);
  CHECK_THROWS_WITH_AS(tpu::parse_chip_spec("mxus"), doctest::Contains("key=value"),
                       tpu::tpu_error);
}
