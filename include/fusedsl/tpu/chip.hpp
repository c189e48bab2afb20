#pragma once
// Models of TPU chips from public figures (sources in docs/tpu.md), plus user-given specs.
#include <array>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "fusedsl/tpu/error.hpp"

namespace fusedsl::tpu {

struct chip_spec {
  std::string name;
  int mxu_dim = 128;                 // systolic array is mxu_dim x mxu_dim
  int mxus_per_core = 4;
  int cores_per_chip = 1;            // TensorCores; a 2-core chip runs as one megacore device
  std::int64_t vmem_bytes_per_core = 0;
  double hbm_bytes_per_s = 0;        // per chip
  double peak_bf16_flops = 0;        // per chip
  int int8_rate = 1;                 // int8 products per bf16 product slot (int8 peak / bf16)
  int vpu_sublanes = 8;              // VPU works on (8, 128) f32 vregs
  int vpu_lanes = 128;
  double step_overhead_s = 0.35e-6;  // fixed cost of one pipelined grid step (assumption, see docs)

  // peak = 2 * mxus * mxu_dim^2 * clock * cores  =>  clock = peak / (2 * mxus * mxu_dim^2 * cores)
  [[nodiscard]] double clock_hz() const {
    return peak_bf16_flops / (2.0 * mxus_per_core * double(mxu_dim) * mxu_dim * cores_per_chip);
  }
  // bf16 multiply-accumulates the whole chip retires per cycle.
  [[nodiscard]] double mxu_macs_per_cycle() const {
    return double(mxus_per_core) * mxu_dim * mxu_dim * cores_per_chip;
  }
  // f32 elementwise results the whole chip's VPUs produce per cycle (one vreg per core per cycle).
  [[nodiscard]] double vpu_elems_per_cycle() const {
    return double(vpu_sublanes) * vpu_lanes * cores_per_chip;
  }
  [[nodiscard]] double hbm_bytes_per_cycle() const { return hbm_bytes_per_s / clock_hz(); }
};

// Throws tpu_error naming the field when a spec cannot describe a real chip.
inline void validate(const chip_spec& c) {
  auto bad = [&](const char* what) {
    throw tpu_error("chip spec '" + c.name + "': " + what);
  };
  if (c.mxu_dim <= 0 || c.mxu_dim % 128 != 0) bad("mxu_dim must be a positive multiple of 128");
  if (c.mxus_per_core <= 0) bad("mxus_per_core must be positive");
  if (c.cores_per_chip <= 0) bad("cores_per_chip must be positive");
  if (c.vmem_bytes_per_core <= 0) bad("vmem_bytes_per_core must be positive");
  if (!(c.hbm_bytes_per_s > 0)) bad("hbm_bytes_per_s must be positive");
  if (!(c.peak_bf16_flops > 0)) bad("peak_bf16_flops must be positive");
  if (c.int8_rate != 1 && c.int8_rate != 2) bad("int8_rate must be 1 or 2");
  if (c.vpu_sublanes <= 0 || c.vpu_lanes <= 0) bad("vpu_sublanes and vpu_lanes must be positive");
  if (!(c.step_overhead_s >= 0)) bad("step_overhead_s must be >= 0");
}

inline constexpr std::int64_t mib = 1024 * 1024;

// Figures per chip from the Cloud TPU system-architecture pages; VMEM per core from JAX's TpuInfo;
// the int8 rate from the int8 and bf16 peaks (docs/tpu.md).
inline const std::array<chip_spec, 4>& known_chips() {
  static const std::array<chip_spec, 4> chips = {{
      {"v4", 128, 4, 2, 16 * mib, 1200e9, 275e12, 1},
      {"v5e", 128, 4, 1, 128 * mib, 819e9, 197e12, 2},
      {"v5p", 128, 4, 2, 64 * mib, 2765e9, 459e12, 2},
      {"v6e", 256, 2, 1, 128 * mib, 1638e9, 918e12, 2},
  }};
  return chips;
}

inline chip_spec chip_by_name(std::string_view name) {
  std::string known;
  for (const auto& c : known_chips()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  throw tpu_error("unknown chip '" + std::string(name) + "' (known: " + known + ")");
}

// Parses a user-given spec "name=x,mxu_dim=128,mxus=4,cores=1,vmem_mib=128,hbm_gbps=819,
// peak_tflops=197[,int8_rate=2][,step_overhead_us=0.35]"; keys not given keep the values of
// `base`.
inline chip_spec parse_chip_spec(std::string_view text, chip_spec base = chip_by_name("v5e")) {
  base.name = "custom";
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw tpu_error("chip spec: expected key=value, got '" + std::string(item) + "'");
    std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "name") {
      base.name = std::string(value);
      continue;
    }
    double v = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc{} || ptr != value.data() + value.size())
      throw tpu_error("chip spec: value of '" + std::string(key) + "' is not a number: '" +
                      std::string(value) + "'");
    if (key == "mxu_dim") base.mxu_dim = int(v);
    else if (key == "mxus") base.mxus_per_core = int(v);
    else if (key == "cores") base.cores_per_chip = int(v);
    else if (key == "vmem_mib") base.vmem_bytes_per_core = std::int64_t(v * double(mib));
    else if (key == "hbm_gbps") base.hbm_bytes_per_s = v * 1e9;
    else if (key == "peak_tflops") base.peak_bf16_flops = v * 1e12;
    else if (key == "int8_rate")
      base.int8_rate = int(v);
    else if (key == "step_overhead_us") base.step_overhead_s = v * 1e-6;
    else
      throw tpu_error("chip spec: unknown key '" + std::string(key) +
                      "' (known: name, mxu_dim, mxus, cores, vmem_mib, hbm_gbps, peak_tflops, "
                      "int8_rate, step_overhead_us)");
  }
  validate(base);
  return base;
}

}  // namespace fusedsl::tpu
