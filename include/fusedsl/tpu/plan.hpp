#pragma once
// Step-by-step plans of the two kinds of kernels: a tiled MXU matmul with an optional fused VPU
// epilogue, and a chunked VPU kernel.
#include <algorithm>
#include <cstdint>
#include <string>

#include "fusedsl/tpu/chip.hpp"
#include "fusedsl/tpu/pipeline.hpp"
#include "fusedsl/tpu/tiling.hpp"

namespace fusedsl::tpu {


// VPU cycles to touch `rows x cols` values once, with the last two dims padded to the layout tile.
inline double vpu_tile_cycles(std::int64_t rows, std::int64_t cols, int bytes_per_element,
                              const chip_spec& chip) {
  const auto lt = layout_tile_for(std::min(bytes_per_element, 4));
  const double padded = double(round_up(std::max<std::int64_t>(rows, 1), lt.sublanes)) *
                        double(round_up(std::max<std::int64_t>(cols, 1), lt.lanes));
  return padded / chip.vpu_elems_per_cycle();
}

// Steps in grid order (batch, i, j, k), k innermost. A block whose index is unchanged from the
// previous step is not fetched again (Pallas' pipeline does the same), which only happens when
// the k extent is one block.
inline kernel_plan plan_matmul(std::string name, const matmul_problem& p, const matmul_blocks& b,
                               const chip_spec& chip, const epilogue_work& epi = {}) {
  check_blocks(p, b, chip);
  kernel_plan kp;
  kp.name = std::move(name);
  kp.kind = kernel_kind::matmul;
  kp.mm = p;
  kp.blocks = b;
  const auto g = grid_of(p, b);
  kp.vmem_bytes = vmem_footprint(p, b, epi);
  const double step_prologue =
      vpu_tile_cycles(b.bm, b.bk, p.lhs_bytes, chip) * epi.lhs_prologue_ops +
      vpu_tile_cycles(b.bk, b.bn, p.rhs_bytes, chip) * epi.rhs_prologue_ops;
  const double step_mxu =
      double(b.bm) * b.bk * b.bn * p.mxu_passes / p.mxu_rate / chip.mxu_macs_per_cycle();
  const double step_acc = vpu_tile_cycles(b.bm, b.bn, 4, chip);
  kp.steps.reserve(std::size_t(p.batch * g.gm * g.gn * g.gk));
  std::int64_t prev_lhs[3] = {-1, -1, -1}, prev_rhs[3] = {-1, -1, -1};
  for (std::int64_t bi = 0; bi < p.batch; ++bi)
    for (std::int64_t i = 0; i < g.gm; ++i)
      for (std::int64_t j = 0; j < g.gn; ++j)
        for (std::int64_t kk = 0; kk < g.gk; ++kk) {
          step_work w;
          w.tile = {bi, i, j, kk};
          const std::int64_t rows = std::min(b.bm, p.m - i * b.bm);
          const std::int64_t cols = std::min(b.bn, p.n - j * b.bn);
          const std::int64_t depth = std::min(b.bk, p.k - kk * b.bk);
          if (!(prev_lhs[0] == bi && prev_lhs[1] == i && prev_lhs[2] == kk))
            w.in_bytes += rows * depth * p.lhs_bytes;
          if (!(prev_rhs[0] == bi && prev_rhs[1] == kk && prev_rhs[2] == j))
            w.in_bytes += depth * cols * p.rhs_bytes;
          prev_lhs[0] = bi, prev_lhs[1] = i, prev_lhs[2] = kk;
          prev_rhs[0] = bi, prev_rhs[1] = kk, prev_rhs[2] = j;
          w.mxu_cycles = step_mxu;
          w.vpu_cycles = step_acc + step_prologue;
          if (kk + 1 == g.gk) {
            w.in_bytes += rows * cols * epi.full_operand_bytes + cols * epi.column_operand_bytes +
                          rows * epi.row_operand_bytes;
            w.vpu_cycles += vpu_tile_cycles(b.bm, b.bn, 4, chip) * epi.vpu_ops_per_element;
            w.out_bytes = rows * cols * p.out_bytes;
          }
          kp.hbm_bytes += w.in_bytes + w.out_bytes;
          kp.steps.push_back(w);
        }
  kp.flops = 2.0 * useful_macs(p);
  return kp;
}

// A VPU kernel streaming `in_bytes` in and `out_bytes` out, doing `vpu_cycles` of work, in
// chunks small enough that two input and two output chunks fit in `vmem_budget`.
inline kernel_plan plan_vector(std::string name, std::int64_t in_bytes, std::int64_t out_bytes,
                               double vpu_cycles, double flops, const chip_spec& chip,
                               std::int64_t vmem_budget, std::int64_t chunk_target = 4 * mib) {
  kernel_plan kp;
  kp.name = std::move(name);
  kp.kind = kernel_kind::vector;
  const std::int64_t total = std::max<std::int64_t>(in_bytes + out_bytes, 1);
  const std::int64_t per_chunk = std::max<std::int64_t>(
      4096, std::min(chunk_target, vmem_budget / 2));
  const std::int64_t chunks = std::max<std::int64_t>(1, ceil_div(total, per_chunk));
  kp.vmem_bytes = 2 * ceil_div(in_bytes, chunks) + 2 * ceil_div(out_bytes, chunks);
  for (std::int64_t c = 0; c < chunks; ++c) {
    step_work w;
    w.tile = {c, 0, 0, 0};
    w.in_bytes = in_bytes * (c + 1) / chunks - in_bytes * c / chunks;
    w.out_bytes = out_bytes * (c + 1) / chunks - out_bytes * c / chunks;
    w.vpu_cycles = vpu_cycles / double(chunks);
    kp.hbm_bytes += w.in_bytes + w.out_bytes;
    kp.steps.push_back(w);
  }
  kp.flops = flops;
  (void)chip;
  return kp;
}

}  // namespace fusedsl::tpu
