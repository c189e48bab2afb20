#pragma once
// The pipeline simulation of a chip.
// The bodies of fusedsl/tpu/pipeline.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/tpu/pipeline.hpp"

namespace fusedsl::tpu {

FUSEDSL_DECL timeline simulate(const std::vector<kernel_plan>& kernels, const chip_spec& chip) {
  timeline tl;
  const double clock = chip.clock_hz();
  double t = 0;        // when the next kernel may start
  double dma_free = 0; // when the single DMA queue is idle
  auto dma = [&](std::size_t k, std::size_t s, std::int64_t bytes, double earliest, bool out) {
    timed_event e;
    e.on = unit::dma, e.kernel = k, e.step = s, e.bytes = bytes, e.outbound = out;
    e.start_s = std::max(dma_free, earliest);
    e.end_s = e.start_s + double(bytes) / chip.hbm_bytes_per_s;
    dma_free = e.end_s;
    tl.events.push_back(e);
    return tl.events.size() - 1;
  };
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    const kernel_plan& kp = kernels[k];
    kernel_timing kt;
    kt.start_s = t;
    const std::size_t first_event = tl.events.size();
    tl.vmem.push_back({t, kp.vmem_bytes, k});
    const std::size_t n = kp.steps.size();
    std::vector<std::size_t> in_event(n, SIZE_MAX);
    std::size_t last_in = SIZE_MAX;  // DMA that brought the blocks a step with in_bytes==0 reuses
    std::vector<double> out_done;       // end of each output block's DMA, in order
    double compute_free = t;
    double end = t;
    if (n > 0 && kp.steps[0].in_bytes > 0) in_event[0] = dma(k, 0, kp.steps[0].in_bytes, t, false);
    for (std::size_t s = 0; s < n; ++s) {
      const step_work& w = kp.steps[s];
      if (in_event[s] != SIZE_MAX) last_in = in_event[s];
      double ready = compute_free;
      if (last_in != SIZE_MAX) ready = std::max(ready, tl.events[last_in].end_s);
      if (w.out_bytes > 0 && out_done.size() >= 2)
        ready = std::max(ready, out_done[out_done.size() - 2]);
      // Prefetch the next step's blocks into the slot step s-1 has just released.
      if (s + 1 < n && kp.steps[s + 1].in_bytes > 0)
        in_event[s + 1] = dma(k, s + 1, kp.steps[s + 1].in_bytes, ready, false);
      double start = ready + (kp.kind == kernel_kind::layout ? 0.0 : chip.step_overhead_s);
      kt.overhead_s += start - ready;
      std::vector<std::size_t> waits;
      if (last_in != SIZE_MAX) waits.push_back(last_in);
      if (w.mxu_cycles > 0) {
        timed_event e;
        e.on = unit::mxu, e.kernel = k, e.step = s, e.start_s = start;
        e.end_s = start + w.mxu_cycles / clock, e.waits_for = waits;
        kt.mxu_busy_s += e.end_s - e.start_s;
        start = e.end_s;
        tl.events.push_back(std::move(e));
      }
      if (w.vpu_cycles > 0) {
        timed_event e;
        e.on = unit::vpu, e.kernel = k, e.step = s, e.start_s = start;
        e.end_s = start + w.vpu_cycles / clock, e.waits_for = waits;
        kt.vpu_busy_s += e.end_s - e.start_s;
        start = e.end_s;
        tl.events.push_back(std::move(e));
      }
      compute_free = start;
      end = std::max(end, compute_free);
      if (w.out_bytes > 0) {
        auto o = dma(k, s, w.out_bytes, compute_free, true);
        out_done.push_back(tl.events[o].end_s);
        end = std::max(end, tl.events[o].end_s);
      }
    }
    for (std::size_t i = first_event; i < tl.events.size(); ++i)
      if (tl.events[i].on == unit::dma) kt.dma_busy_s += tl.events[i].end_s - tl.events[i].start_s;
    kt.end_s = end;
    tl.vmem.push_back({end, -kp.vmem_bytes, k});
    tl.kernels.push_back(kt);
    t = end;
  }
  tl.end_s = t;
  return tl;
}

}  // namespace fusedsl::tpu
