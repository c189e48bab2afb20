#pragma once
// The timing model: each kernel is a sequence of grid steps; a step's input blocks are DMA'd from
// HBM into one of two VMEM slots while the previous step computes (double buffering), results go
// back to HBM by DMA. One DMA queue at HBM bandwidth; MXU and VPU work of a step run back to back.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/tpu/chip.hpp"
#include "fusedsl/tpu/tiling.hpp"

namespace fusedsl::tpu {

enum class unit : std::uint8_t { dma, mxu, vpu };
inline const char* to_string(unit u) {
  switch (u) {
    case unit::dma: return "DMA";
    case unit::mxu: return "MXU";
    case unit::vpu: return "VPU";
  }
  return "?";
}

// The work of one grid step.
struct step_work {
  std::int64_t in_bytes = 0;   // HBM -> VMEM this step (0 when its blocks are already resident)
  double mxu_cycles = 0;       // systolic-array cycles (padding included)
  double vpu_cycles = 0;       // vector-unit cycles (accumulate, epilogue, elementwise work)
  std::int64_t out_bytes = 0;  // VMEM -> HBM after this step (0 when no output block completes)
  std::array<std::int64_t, 4> tile{};  // matmul: (batch, i, j, k); vector kernels: (chunk, 0, 0, 0)
};

enum class kernel_kind : std::uint8_t { matmul, vector, layout, fused, dma };
inline const char* to_string(kernel_kind k) {
  switch (k) {
    case kernel_kind::matmul: return "matmul";
    case kernel_kind::vector: return "vector";
    case kernel_kind::layout: return "layout";
    case kernel_kind::fused: return "fused";
    case kernel_kind::dma:
      return "dma";
  }
  return "?";
}

// One kernel of the schedule: a matmul with its fused epilogue, a vector (VPU) kernel, a
// layout-only op (reshape, broadcast, tuple, ...) that moves no data and costs nothing, an HLO
// fusion holding several dots (e.g. attention), whose intermediates stay in VMEM, or a row copy
// (gather, dynamic-slice, dynamic-update-slice): DMAs of the rows it moves, no vector work.
struct kernel_plan {
  std::string name;                // the HLO instruction whose result the kernel produces
  kernel_kind kind = kernel_kind::vector;
  std::vector<std::string> ops;    // every HLO instruction the kernel covers
  matmul_problem mm{};             // matmul kernels only
  matmul_blocks blocks{};          // matmul kernels only
  std::vector<step_work> steps;
  std::int64_t vmem_bytes = 0;     // VMEM the kernel holds while it runs
  double flops = 0;                // useful floating-point work (2 per MAC; 1 per VPU op result)
  std::int64_t hbm_bytes = 0;      // sum of in_bytes + out_bytes over steps
  // A dynamic-update-slice (alone or as an HLO fusion's root) written into its operand's buffer:
  // only the update moves. Otherwise the operand is copied to a new buffer first.
  bool in_place = false;
  // Fused kernels only: each dot's flat node id, problem and MXU blocks.
  std::vector<std::size_t> dot_nodes;
  std::vector<matmul_problem> dot_problems;
  std::vector<matmul_blocks> dot_blocks;
};

struct timed_event {
  unit on = unit::dma;
  std::size_t kernel = 0;
  std::size_t step = 0;
  double start_s = 0, end_s = 0;
  std::int64_t bytes = 0;     // DMA events
  bool outbound = false;      // DMA VMEM -> HBM
  std::vector<std::size_t> waits_for;  // indices of the DMA events whose data this compute reads
};

struct vmem_event {
  double t = 0;
  std::int64_t delta = 0;  // + on allocation, - on release
  std::size_t kernel = 0;
};

struct kernel_timing {
  double start_s = 0, end_s = 0;
  double mxu_busy_s = 0, vpu_busy_s = 0, dma_busy_s = 0, overhead_s = 0;
};

struct timeline {
  std::vector<timed_event> events;
  std::vector<vmem_event> vmem;
  std::vector<kernel_timing> kernels;
  double end_s = 0;
};

// Runs the kernels one after another on the chip model and returns every DMA, MXU and VPU
// interval. A step computes once its inputs have landed and the previous step is done; the DMA
// for step s+1 is issued when step s starts (its slot was freed by step s-1); an output block
// waits for the DMA of the output block two tiles earlier to have left its slot.
FUSEDSL_DECL timeline simulate(const std::vector<kernel_plan>& kernels, const chip_spec& chip);

}  // namespace fusedsl::tpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/tpu/impl/pipeline.ipp"
#endif
