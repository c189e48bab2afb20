#pragma once
// What a schedule costs: per kernel and in total, time, cycles, bound, MXU utilisation, HBM
// bytes, VMEM high-water mark, and the roofline lower bound it is compared with.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fusedsl/tpu/schedule.hpp"

namespace fusedsl::tpu {

struct kernel_cost {
  std::string name;
  kernel_kind kind = kernel_kind::vector;
  std::vector<std::string> ops;
  double start_s = 0, end_s = 0, time_s = 0, cycles = 0;
  double mxu_s = 0, vpu_s = 0, dma_s = 0, overhead_s = 0;
  std::string bound;  // busiest unit: "MXU", "HBM", "VPU"; "overhead" if step overhead exceeds
                      // them all; "none" for layout ops
  double flops = 0;
  double mxu_utilization = 0;      // matmul kernels: useful bf16-equivalent FLOPs / (time * peak)
  double roofline_s = 0;           // max(MXU FLOPs / peak, HBM bytes / bandwidth)
  std::int64_t hbm_bytes = 0;
  std::int64_t vmem_bytes = 0;
  std::size_t steps = 0;
  bool in_place = false;  // a dynamic-update-slice written into its operand's buffer
  matmul_problem mm{};
  matmul_blocks blocks{};
};

struct cost_summary {
  std::string chip;
  double clock_hz = 0;
  double total_time_s = 0, total_cycles = 0;
  double matmul_flops = 0, vector_flops = 0;
  double mxu_utilization = 0;      // matmul FLOPs / (total time * peak bf16 FLOP/s)
  double roofline_time_s = 0;      // sum of the kernels' roofline bounds
  std::int64_t hbm_bytes = 0;
  std::int64_t vmem_peak_bytes = 0;
  std::vector<kernel_cost> kernels;
};

// Highest VMEM held at any moment of the timeline.
inline std::int64_t vmem_high_water(const timeline& tl) {
  auto ev = tl.vmem;
  std::stable_sort(ev.begin(), ev.end(), [](const vmem_event& a, const vmem_event& b) {
    return a.t < b.t || (a.t == b.t && a.delta < b.delta);  // releases first at equal times
  });
  std::int64_t live = 0, peak = 0;
  for (const auto& e : ev) peak = std::max(peak, live += e.delta);
  return peak;
}

inline cost_summary summarize(const schedule& s) {
  cost_summary c;
  c.chip = s.chip.name;
  c.clock_hz = s.chip.clock_hz();
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const auto& kp = s.kernels[k];
    const auto& kt = s.tl.kernels[k];
    kernel_cost kc;
    kc.name = kp.name, kc.kind = kp.kind, kc.ops = kp.ops;
    kc.start_s = kt.start_s, kc.end_s = kt.end_s, kc.time_s = kt.end_s - kt.start_s;
    kc.cycles = kc.time_s * c.clock_hz;
    kc.mxu_s = kt.mxu_busy_s, kc.vpu_s = kt.vpu_busy_s, kc.dma_s = kt.dma_busy_s;
    kc.overhead_s = kt.overhead_s;
    kc.flops = kp.flops;
    kc.hbm_bytes = kp.hbm_bytes, kc.vmem_bytes = kp.vmem_bytes, kc.steps = kp.steps.size();
    kc.in_place = kp.in_place;
    kc.mm = kp.mm, kc.blocks = kp.blocks;
    if (kp.kind == kernel_kind::layout) {
      kc.bound = "none";
    } else {
      kc.bound = kc.mxu_s >= kc.vpu_s && kc.mxu_s >= kc.dma_s ? "MXU"
                 : kc.dma_s >= kc.vpu_s                       ? "HBM"
                                                              : "VPU";
      // Tiny kernels: the fixed per-step cost outweighs every unit's busy time.
      if (kc.overhead_s > std::max({kc.mxu_s, kc.vpu_s, kc.dma_s})) kc.bound = "overhead";
    }
    const bool on_mxu = kp.kind == kernel_kind::matmul || kp.kind == kernel_kind::fused;
    const double mxu_flops = on_mxu ? kp.flops : 0.0;
    kc.roofline_s = std::max(mxu_flops / s.chip.peak_bf16_flops,
                             double(kp.hbm_bytes) / s.chip.hbm_bytes_per_s);
    if (on_mxu && kc.time_s > 0)
      kc.mxu_utilization = kp.flops / (kc.time_s * s.chip.peak_bf16_flops);
    (on_mxu ? c.matmul_flops : c.vector_flops) += kp.flops;
    c.hbm_bytes += kp.hbm_bytes;
    c.roofline_time_s += kc.roofline_s;
    c.kernels.push_back(std::move(kc));
  }
  c.total_time_s = s.tl.end_s;
  c.total_cycles = c.total_time_s * c.clock_hz;
  c.mxu_utilization =
      c.total_time_s > 0 ? c.matmul_flops / (c.total_time_s * s.chip.peak_bf16_flops) : 0;
  c.vmem_peak_bytes = vmem_high_water(s.tl);
  return c;
}

}  // namespace fusedsl::tpu
