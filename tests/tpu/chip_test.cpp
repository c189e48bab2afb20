#include "fusedsl/tpu/chip.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>

#include "../common/compare.hpp"

namespace tpu = fusedsl::tpu;
namespace ft = fusedsl::test;

namespace {

// The published figures, written here independently of chip.hpp.
//   TensorCores per chip, MXUs per TensorCore, peak bf16 FLOP/s per chip, HBM bandwidth per chip:
//     Google's Cloud TPU system-architecture pages: cloud.google.com/tpu/docs/v4 ("two
//     TensorCores ... four MXUs", 275 teraflops, "32 GiB, 1200 GBps"), /tpu/docs/v5e ("one
//     TensorCore ... four MXUs", 197 TFLOPs, "16 GB, 819 GBps"), /tpu/docs/v5p-training (four
//     MXUs per TensorCore, 2 TensorCores per chip, 459 TFLOPs, 2765 GBps) and /tpu/docs/v6e ("one
//     TensorCore ... two 256x256 matrix-multiply units", 918 TFLOPs, 1638 GBps).
//   MXU size (128x128 before v6e) and VMEM per TensorCore: JAX's TpuInfo table
//     (jax.experimental.pallas.tpu.get_tpu_info: mxu_column_size, vmem_capacity_bytes).
//   Clock: none of these pages publishes one, so it is not checked: chip_spec::clock_hz() is
//     derived from the peak (docs/tpu.md, "Chip models and where the figures come from").
struct published {
  const char* name;
  int tensorcores, mxus_per_core, mxu_dim, vmem_mib;
  double peak_bf16_tflops, hbm_gbps;
};
constexpr published figures[] = {
    {"v4", 2, 4, 128, 16, 275, 1200},
    {"v5e", 1, 4, 128, 128, 197, 819},
    {"v5p", 2, 4, 128, 64, 459, 2765},
    {"v6e", 1, 2, 256, 128, 918, 1638},
};

}  // namespace

TEST_CASE("every known chip carries the published TensorCores, MXUs, peak, HBM bandwidth, VMEM") {
  REQUIRE(tpu::known_chips().size() == std::size(figures));
  for (const published& p : figures) {
    CAPTURE(p.name);
    const auto c = tpu::chip_by_name(p.name);
    tpu::validate(c);
    CHECK(c.cores_per_chip == p.tensorcores);
    CHECK(c.mxus_per_core == p.mxus_per_core);
    CHECK(c.mxu_dim == p.mxu_dim);
    CHECK(c.vmem_bytes_per_core == p.vmem_mib * tpu::mib);
    CHECK(ft::compare(c.peak_bf16_flops, p.peak_bf16_tflops * 1e12, ft::exact()));
    CHECK(ft::compare(c.hbm_bytes_per_s, p.hbm_gbps * 1e9, ft::exact()));
  }
}

TEST_CASE("the int8 rate is the published int8 peak over the bf16 peak") {
  // v4: "275 teraflops (bf16 or int8)" (cloud.google.com/tpu/docs/v4); v5e, v5p, v6e: JAX's TpuInfo
  // (int8_ops_per_second 3.94e14, 9.18e14 and 1.84e15 per chip, twice bf16_ops_per_second).
  const std::pair<const char*, int> rates[] = {{"v4", 1}, {"v5e", 2}, {"v5p", 2}, {"v6e", 2}};
  for (const auto& [name, rate] : rates) {
    CAPTURE(name);
    CHECK(tpu::chip_by_name(name).int8_rate == rate);
  }
  CHECK(tpu::parse_chip_spec("int8_rate=1").int8_rate == 1);
  CHECK_THROWS_WITH_AS(tpu::parse_chip_spec("int8_rate=3"), doctest::Contains("int8_rate"),
                       tpu::tpu_error);
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
  CHECK(ft::compare(c.clock_hz(), 100e12 / (2.0 * 256 * 256), ft::rel_tol(1e-12)));
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
