#pragma once
// The cost summary of a schedule.
// The bodies of fusedsl/tpu/cost.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/tpu/cost.hpp"

namespace fusedsl::tpu {

FUSEDSL_DECL std::int64_t vmem_high_water(const timeline& tl) {
  auto ev = tl.vmem;
  std::stable_sort(ev.begin(), ev.end(), [](const vmem_event& a, const vmem_event& b) {
    return a.t < b.t || (a.t == b.t && a.delta < b.delta);  // releases first at equal times
  });
  std::int64_t live = 0, peak = 0;
  for (const auto& e : ev) peak = std::max(peak, live += e.delta);
  return peak;
}

FUSEDSL_DECL cost_summary summarize(const schedule& s) {
  cost_summary c;
  c.chip = s.chip.name;
  c.clock_hz = s.chip.clock_hz();
  double bf16_slot_flops = 0;  // matmul FLOPs in bf16 product slots (int8 ones at the int8 rate)
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
    // The kernel's MXU peak: int8 products run at the chip's int8 rate (every dot of a fused
    // kernel must have it; else the bf16 peak).
    int rate = kp.mm.mxu_rate;
    for (const auto& p : kp.dot_problems) rate = std::min(rate, p.mxu_rate);
    const double peak = s.chip.peak_bf16_flops * rate;
    kc.roofline_s = std::max(mxu_flops / peak, double(kp.hbm_bytes) / s.chip.hbm_bytes_per_s);
    if (on_mxu && kc.time_s > 0) kc.mxu_utilization = kp.flops / (kc.time_s * peak);
    if (on_mxu) bf16_slot_flops += kp.flops / rate;
    (on_mxu ? c.matmul_flops : c.vector_flops) += kp.flops;
    c.hbm_bytes += kp.hbm_bytes;
    c.roofline_time_s += kc.roofline_s;
    c.kernels.push_back(std::move(kc));
  }
  c.total_time_s = s.tl.end_s;
  c.total_cycles = c.total_time_s * c.clock_hz;
  c.mxu_utilization =
      c.total_time_s > 0 ? bf16_slot_flops / (c.total_time_s * s.chip.peak_bf16_flops) : 0;
  c.vmem_peak_bytes = vmem_high_water(s.tl);
  return c;
}

}  // namespace fusedsl::tpu
