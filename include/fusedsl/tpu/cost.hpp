#pragma once
// What a schedule costs: per kernel and in total, time, cycles, bound, MXU utilisation, HBM
// bytes, VMEM high-water mark, and the roofline lower bound it is compared with.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
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
  double mxu_utilization = 0;      // matmul kernels: useful FLOPs / (time * the kernel's MXU peak:
                                   // bf16, or int8 at the chip's int8 rate)
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
  double mxu_utilization = 0;      // matmul FLOPs (int8 ones over the int8 rate) /
                                   // (total time * peak bf16 FLOP/s)
  double roofline_time_s = 0;      // sum of the kernels' roofline bounds
  std::int64_t hbm_bytes = 0;
  std::int64_t vmem_peak_bytes = 0;
  std::vector<kernel_cost> kernels;
};

// Highest VMEM held at any moment of the timeline.
FUSEDSL_DECL std::int64_t vmem_high_water(const timeline& tl);

FUSEDSL_DECL cost_summary summarize(const schedule& s);

}  // namespace fusedsl::tpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/tpu/impl/cost.ipp"
#endif
