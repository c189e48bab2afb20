#pragma once
// MXU blocking of one matmul: layout tiles, padding, VMEM footprint, HBM traffic, block choice.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fusedsl/tpu/chip.hpp"
#include "fusedsl/tpu/error.hpp"

namespace fusedsl::tpu {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Native VMEM layout tile (sublanes, lanes) of a dtype: (8,128) for 32-bit, (16,128) for 16-bit.
struct layout_tile {
  int sublanes;
  int lanes;
};
inline layout_tile layout_tile_for(int bytes_per_element) {
  if (bytes_per_element <= 0 || bytes_per_element > 4)
    throw tpu_error("layout_tile_for: unsupported element size " +
                    std::to_string(bytes_per_element));
  return {8 * (4 / bytes_per_element), 128};
}

// out[b, m, n] = sum_k lhs[b, m, k] * rhs[b, k, n]  (batch dims flattened into `batch`).
struct matmul_problem {
  std::int64_t batch = 1, m = 0, k = 0, n = 0;
  int lhs_bytes = 2, rhs_bytes = 2, out_bytes = 2;  // bytes per element in HBM
  int mxu_passes = 1;  // bf16 passes per product: 1 for bf16 operands, more for f32 (see docs)
  int mxu_rate = 1;    // products per bf16 product slot: the chip's int8_rate for int8 operands
};

// What a fused epilogue adds to each output tile: VPU work per element and operand blocks read.
struct epilogue_work {
  double vpu_ops_per_element = 0;  // weighted op count (see vpu_op_weight in schedule.hpp)
  int full_operand_bytes = 0;      // sum of bytes/element of operands shaped like the output
  int column_operand_bytes = 0;    // operands broadcast along m (one value per column, e.g. bias)
  int row_operand_bytes = 0;       // operands broadcast along n (one value per row)
  // Fused operand prologues (a convert of each fetched block): weighted ops per element.
  double lhs_prologue_ops = 0;
  double rhs_prologue_ops = 0;
};

struct matmul_blocks {
  std::int64_t bm = 0, bk = 0, bn = 0;
};

// Block sizes must be multiples of the MXU dimension (bk, bn) and of the layout tiles (bm).
inline void check_blocks(const matmul_problem& p, const matmul_blocks& b, const chip_spec& chip) {
  const auto lt = layout_tile_for(std::min(p.lhs_bytes, p.out_bytes));
  auto fail = [&](const std::string& why) {
    throw tpu_error("matmul blocks (" + std::to_string(b.bm) + "," + std::to_string(b.bk) + "," +
                    std::to_string(b.bn) + "): " + why);
  };
  if (b.bm <= 0 || b.bk <= 0 || b.bn <= 0) fail("block sizes must be positive");
  if (b.bm % lt.sublanes != 0) fail("bm must be a multiple of " + std::to_string(lt.sublanes));
  if (b.bk % chip.mxu_dim != 0 || b.bn % chip.mxu_dim != 0)
    fail("bk and bn must be multiples of the MXU dimension " + std::to_string(chip.mxu_dim));
}

// Grid extents: how many blocks along m, n and k (edge blocks are padded).
struct matmul_grid {
  std::int64_t gm, gn, gk;
};
inline matmul_grid grid_of(const matmul_problem& p, const matmul_blocks& b) {
  return {ceil_div(p.m, b.bm), ceil_div(p.n, b.bn), ceil_div(p.k, b.bk)};
}

// VMEM bytes the kernel holds: two buffers per operand block and for the output block, the f32
// accumulator, two buffers per fused epilogue operand, and one bf16 block per fused convert.
inline std::int64_t vmem_footprint(const matmul_problem& p, const matmul_blocks& b,
                                   const epilogue_work& epi = {}) {
  std::int64_t bytes = 2 * (b.bm * b.bk * p.lhs_bytes + b.bk * b.bn * p.rhs_bytes) +
                       2 * b.bm * b.bn * p.out_bytes + b.bm * b.bn * 4;
  bytes += 2 * b.bm * b.bn * epi.full_operand_bytes + 2 * b.bn * epi.column_operand_bytes +
           2 * b.bm * epi.row_operand_bytes;
  if (epi.lhs_prologue_ops > 0) bytes += b.bm * b.bk * 2;
  if (epi.rhs_prologue_ops > 0) bytes += b.bk * b.bn * 2;
  return bytes;
}

// HBM bytes moved with grid order (b, i, j, k), k innermost: lhs fetched once per j, rhs once per
// i, output written once. For divisible shapes this is the Pallas TPU matmul guide's
// (m*k*n/bn + k*n*m/bm + m*n) * bytes-per-element. When k is a single block, a block whose index
// does not change between consecutive steps stays resident (lhs across j; rhs too if n is one
// block), as in Pallas' pipeline.
inline std::int64_t hbm_traffic_bytes(const matmul_problem& p, const matmul_blocks& b) {
  const auto g = grid_of(p, b);
  const std::int64_t lhs_fetches = g.gk == 1 ? 1 : g.gn;
  const std::int64_t rhs_fetches = (g.gk == 1 && g.gn == 1) ? 1 : g.gm;
  return p.batch * (p.m * p.k * lhs_fetches * p.lhs_bytes + p.k * p.n * rhs_fetches * p.rhs_bytes +
                    p.m * p.n * p.out_bytes);
}

// MXU work, counting the padding of every block up to full MXU tiles.
inline double padded_macs(const matmul_problem& p, const matmul_blocks& b) {
  const auto g = grid_of(p, b);
  return double(p.batch) * double(g.gm * b.bm) * double(g.gk * b.bk) * double(g.gn * b.bn) *
         p.mxu_passes / p.mxu_rate;
}
inline double useful_macs(const matmul_problem& p) {
  return double(p.batch) * double(p.m) * double(p.k) * double(p.n);
}

// A closed-form estimate of the pipelined time (seconds) used only to rank candidate blocks;
// the schedule's simulation gives the reported figures.
inline double estimate_seconds(const matmul_problem& p, const matmul_blocks& b,
                               const chip_spec& chip) {
  const auto g = grid_of(p, b);
  const double steps = double(p.batch) * g.gm * g.gn * g.gk;
  const double step_mxu =
      double(b.bm) * b.bk * b.bn * p.mxu_passes / p.mxu_rate / chip.mxu_macs_per_cycle();
  const double step_acc = double(b.bm) * b.bn / chip.vpu_elems_per_cycle();
  const double step_compute = (step_mxu + step_acc) / chip.clock_hz() + chip.step_overhead_s;
  const double step_dma =
      double(b.bm * b.bk * p.lhs_bytes + b.bk * b.bn * p.rhs_bytes) / chip.hbm_bytes_per_s;
  const double out_dma = double(b.bm * b.bn * p.out_bytes) / chip.hbm_bytes_per_s;
  const double tiles = double(p.batch) * g.gm * g.gn;
  return steps * std::max(step_compute, step_dma + out_dma * tiles / steps) + step_dma + out_dma;
}

// Candidate block sizes along one dimension: multiples of `unit` up to the padded extent, capped.
inline std::vector<std::int64_t> block_candidates(std::int64_t extent, std::int64_t unit,
                                                  std::int64_t cap) {
  std::vector<std::int64_t> out;
  const std::int64_t top = std::min(round_up(extent, unit), std::max(unit, cap));
  for (std::int64_t v = unit; v <= top; v *= 2) out.push_back(v);
  if (out.empty() || out.back() != top) out.push_back(top);
  return out;
}

// Picks (bm, bk, bn) with the least estimated time whose VMEM footprint fits `vmem_budget`.
inline matmul_blocks choose_blocks(const matmul_problem& p, const chip_spec& chip,
                                   std::int64_t vmem_budget, const epilogue_work& epi = {}) {
  const auto lt = layout_tile_for(std::min(p.lhs_bytes, p.out_bytes));
  matmul_blocks best{};
  double best_t = std::numeric_limits<double>::infinity();
  for (auto bm : block_candidates(p.m, lt.sublanes, 2048))
    for (auto bk : block_candidates(p.k, chip.mxu_dim, 4096))
      for (auto bn : block_candidates(p.n, chip.mxu_dim, 4096)) {
        matmul_blocks b{bm, bk, bn};
        if (vmem_footprint(p, b, epi) > vmem_budget) continue;
        const double t = estimate_seconds(p, b, chip);
        if (t < best_t) best_t = t, best = b;
      }
  if (best.bm == 0)
    throw tpu_error("choose_blocks: no MXU block of [" + std::to_string(p.m) + "x" +
                    std::to_string(p.k) + "] @ [" + std::to_string(p.k) + "x" +
                    std::to_string(p.n) + "] fits in " + std::to_string(vmem_budget) +
                    " bytes of VMEM");
  return best;
}

}  // namespace fusedsl::tpu
