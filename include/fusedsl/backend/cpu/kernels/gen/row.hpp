#pragma once
// Row groups: the prologue into a per-thread tile (or the operand in place), the row kernel
// (kernels/row.hpp), the epilogue on the way out.
#include <cstdint>

#include "fusedsl/backend/cpu/kernels/gen/machine.hpp"
#include "fusedsl/backend/cpu/kernels/row.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"

namespace fusedsl::cpu::kernels::gen {

template <class Desc, class Arch>
struct row_kernel {
  static constexpr const kernel_desc& D = Desc::value;
  static constexpr plan::segment seg = D.seg[0];
  static constexpr int R = D.rank, L = R - 1;
  static constexpr std::int64_t cols = D.extent[std::size_t(L)];
  static constexpr std::int64_t rows_total = [] {
    std::int64_t o = 1;
    for (int t = 0; t < R - 1; ++t) o *= D.extent[std::size_t(t)];
    return o;
  }();
  static constexpr access_list used_pro = accesses_of(D, seg.begin, seg.end);
  static constexpr access_list used_epi = accesses_of(D, D.epilogue.begin, D.epilogue.end, D.store);
  static constexpr plan::access st = D.c.acc[std::size_t(D.store)];
  using M = machine<Desc, L>;
  using V = vec_t<Arch>;
  static constexpr int W = simd<Arch>::width;

  // Rows are one outer axis apart by a fixed stride (the outer axes collapse) for access a.
  static constexpr bool uniform_rows(const plan::affine_row& a) {
    std::int64_t expect = a.coef[std::size_t(R > 1 ? R - 2 : 0)];
    for (int t = R - 2; t >= 0; --t) {
      if (a.coef[std::size_t(t)] != expect && D.extent[std::size_t(t)] != 1) return false;
      expect *= D.extent[std::size_t(t)];
    }
    return true;
  }
  static constexpr bool param_ok(int ref) {
    if (ref < 0) return true;
    const plan::access& a = D.c.acc[std::size_t(ref)];
    if (a.type != dtype::f32 || a.at.coef[std::size_t(L)] != 1) return false;
    for (int t = 0; t < R - 1; ++t)
      if (a.at.coef[std::size_t(t)] != 0) return false;
    return true;
  }
  // The input is one f32 load, contiguous along the row, rows a fixed stride apart.
  static constexpr bool direct_in = [] {
    if (seg.end - seg.begin != 1) return false;
    const plan::ins& x = D.c.instr[std::size_t(seg.begin)];
    if (x.kind != ins_kind::load) return false;
    const plan::access& a = D.c.acc[std::size_t(x.ref)];
    return a.type == dtype::f32 && a.at.coef[std::size_t(L)] == 1 && uniform_rows(a.at);
  }();
  static constexpr bool direct_out = st.type == dtype::f32 && st.at.coef[std::size_t(L)] == 1 &&
                                     uniform_rows(st.at) && D.epilogue.empty();
  static constexpr bool params_ok = param_ok(D.gamma) && param_ok(D.beta);
  static constexpr std::int64_t row_stride(const plan::affine_row& a) {
    return R > 1 ? a.coef[std::size_t(R - 2)] : cols;
  }
  // rows per block: what layernorm's row groups take, within ~64 KiB of tile
  static constexpr std::int64_t block = cols <= 256 ? 8 : cols <= 512 ? 4 : cols <= 4096 ? 2 : 1;

  static constexpr std::size_t tile_floats() { return std::size_t(block * (cols + 16)); }

  static const float* param(void* const* val, int ref) {
    if (ref < 0) return nullptr;
    const plan::access& a = D.c.acc[std::size_t(ref)];
    return static_cast<const float*>(val[a.node]) + a.at.base;
  }

  static void row_op(std::int64_t n, const float* x, std::int64_t ldx, const float* gamma,
                     const float* beta, float* y, std::int64_t ldy) {
    if constexpr (D.row_op == graph::op_kind::softmax)
      softmax_rows<Arch>(n, cols, x, ldx, y, ldy);
    else if constexpr (D.row_op == graph::op_kind::log_softmax)
      log_softmax_rows<Arch>(n, cols, x, ldx, y, ldy);
    else if constexpr (D.row_op == graph::op_kind::layernorm)
      layernorm_rows<Arch>(n, cols, x, ldx, gamma, beta, D.eps, y, ldy);
    else
      rmsnorm_rows<Arch>(n, cols, x, ldx, gamma, D.eps, y, ldy);
  }

  static void index_of_row(std::int64_t r, std::int64_t* idx) {
    for (int t = R - 2; t >= 0; --t) {
      idx[t] = r % D.extent[std::size_t(t)];
      r /= D.extent[std::size_t(t)];
    }
    idx[L] = 0;
  }

  // rows [r0, r1); tile: this thread's tile_floats() floats (unused on the direct path)
  static void rows(void* const* val, std::int64_t r0, std::int64_t r1, float* tile, float* gtile) {
    std::int64_t off[plan::max_accesses];
    std::int64_t idx[plan::max_iter_rank]{};
    const float *gamma = param(val, D.gamma), *beta = param(val, D.beta);
    if constexpr (!params_ok) {  // gamma, beta through their loads, into the tile's tail
      float* g = gtile;
      index_of_row(0, idx);
      for (const int ref : {D.gamma, D.beta}) {
        if (ref < 0) continue;
        const plan::access& a = D.c.acc[std::size_t(ref)];
        for (std::int64_t j = 0; j < cols; ++j) {
          std::int64_t o = a.at.base + a.at.coef[std::size_t(L)] * j;
          g[j] = visit_load(a.type, val[a.node], o);
        }
        (ref == D.gamma ? gamma : beta) = g;
        g += cols;
      }
    }
    if constexpr (direct_in && direct_out) {
      const plan::access& a = D.c.acc[std::size_t(D.c.instr[std::size_t(seg.begin)].ref)];
      index_of_row(r0, idx);
      std::int64_t xo = a.at.base, yo = st.at.base;
      for (int t = 0; t < R - 1; ++t)
        xo += a.at.coef[std::size_t(t)] * idx[t], yo += st.at.coef[std::size_t(t)] * idx[t];
      row_op(r1 - r0, static_cast<const float*>(val[a.node]) + xo, row_stride(a.at), gamma, beta,
             static_cast<float*>(val[st.node]) + yo, row_stride(st.at));
      return;
    }
    for (std::int64_t b = r0; b < r1; b += block) {
      const std::int64_t n = std::min<std::int64_t>(block, r1 - b);
      const float* x = tile;
      std::int64_t ldx = cols + 16;
      if constexpr (direct_in) {
        const plan::access& a = D.c.acc[std::size_t(D.c.instr[std::size_t(seg.begin)].ref)];
        index_of_row(b, idx);
        std::int64_t xo = a.at.base;
        for (int t = 0; t < R - 1; ++t) xo += a.at.coef[std::size_t(t)] * idx[t];
        x = static_cast<const float*>(val[a.node]) + xo;
        ldx = row_stride(a.at);
      } else {
        for (std::int64_t i = 0; i < n; ++i) {  // the prologue, row by row into the tile
          index_of_row(b + i, idx);
          offsets_at<Desc, used_pro>(idx, R, off);
          float* tr = tile + i * (cols + 16);
          // Both bounds are constants (GCC otherwise cannot bound a tail that never runs).
          constexpr std::int64_t vec_end = cols - cols % W;
          for (std::int64_t j = 0; j < vec_end; j += W) {
            simd<Arch>::store(
                tr + j, M::template run<seg.begin, seg.end, seg.result, V>(val, off, nullptr));
            offsets_step<Desc, used_pro>(L, W, off);
          }
          for (std::int64_t j = vec_end; j < cols; ++j) {
            tr[j] = M::template run<seg.begin, seg.end, seg.result, float>(val, off, nullptr);
            offsets_step<Desc, used_pro>(L, 1, off);
          }
        }
      }
      row_op(n, x, ldx, gamma, beta, tile, cols + 16);
      for (std::int64_t i = 0; i < n; ++i) {  // the epilogue and the store
        index_of_row(b + i, idx);
        offsets_at<Desc, used_epi>(idx, R, off);
        const float* tr = tile + i * (cols + 16);
        constexpr std::int64_t ss = st.at.coef[std::size_t(L)];
        constexpr std::int64_t vec_end = cols - cols % W;
        for (std::int64_t j = 0; j < vec_end; j += W) {
          const V in = simd<Arch>::load(tr + j);
          const V y = M::template run<D.epilogue.begin, D.epilogue.end, D.epilogue.result, V>(
              val, off, &in);
          store_lanes<V, st.type, ss>(val[st.node], off[D.store], y);
          offsets_step<Desc, used_epi>(L, W, off);
        }
        for (std::int64_t j = vec_end; j < cols; ++j) {
          const float in = tr[j];
          const float y =
              M::template run<D.epilogue.begin, D.epilogue.end, D.epilogue.result, float>(val, off,
                                                                                          &in);
          store_lanes<float, st.type, ss>(val[st.node], off[D.store], y);
          offsets_step<Desc, used_epi>(L, 1, off);
        }
      }
    }
  }

  static float visit_load(dtype t, const void* p, std::int64_t o) {
    switch (t) {
      case dtype::f32: return element_to_f32<dtype::f32>(static_cast<const float*>(p) + o);
      case dtype::bf16:
        return element_to_f32<dtype::bf16>(static_cast<const std::uint16_t*>(p) + o);
      case dtype::f16: return element_to_f32<dtype::f16>(static_cast<const std::uint16_t*>(p) + o);
      case dtype::i32: return element_to_f32<dtype::i32>(static_cast<const std::int32_t*>(p) + o);
      case dtype::boolean:
        return element_to_f32<dtype::boolean>(static_cast<const unsigned char*>(p) + o);
      case dtype::i8:
        return element_to_f32<dtype::i8>(static_cast<const std::int8_t*>(p) + o);
      case dtype::u8:
        return element_to_f32<dtype::u8>(static_cast<const std::uint8_t*>(p) + o);
    }
    return 0.0f;
  }

  // Floats of workspace per thread.
  static constexpr std::size_t workspace_floats() {
    return tile_floats() + std::size_t(2 * cols + 16);
  }

  static void run(void* const* val, float* workspace, thread_pool* pool) {
    parallel_for(pool, rows_total, [&](std::ptrdiff_t b, std::ptrdiff_t e, int t) {
      float* tile = workspace + std::size_t(t) * workspace_floats();
      rows(val, b, e, tile, tile + tile_floats());
    });
  }
};

template <class Desc, class Arch>
void run_row(void* const* val, float* workspace, thread_pool* pool) {
  row_kernel<Desc, Arch>::run(val, workspace, pool);
}

}  // namespace fusedsl::cpu::kernels::gen
