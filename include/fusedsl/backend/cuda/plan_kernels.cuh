#pragma once
// Device pieces the executor needs beyond the kernel library: the graph's elementwise ops on f32
// (the reference backend's formulas), a GEMM epilogue whose activation is any graph activation,
// and the loop-program kernel that runs a general fused elementwise group (executor_plan.hpp).

#include <cuda_runtime_api.h>

#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/executor_plan.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>

namespace fusedsl::cuda {

// f32 value rounded to the storage of `t` and back (the reference rounds every node to its dtype).
__device__ inline float round_to(dtype t, float x) {
  if (t == dtype::bf16) return to_f32(from_f32<bf16>(x));
  if (t == dtype::f16) return to_f32(from_f32<f16>(x));
  return x;
}

__device__ inline float nan_max(float x, float y) {
  return (x != x || y != y) ? x + y : (x > y ? x : y);
}
__device__ inline float nan_min(float x, float y) {
  return (x != x || y != y) ? x + y : (x < y ? x : y);
}

// One elementwise op of the graph on f32 values (comparisons give 1 or 0, select reads a as the
// predicate). Formulas as in backend/reference/kernels.hpp.
__device__ inline float apply_op(op_kind k, float a, float b, float c) {
  switch (k) {
    case op_kind::neg:
      return -a;
    case op_kind::abs:
      return fabsf(a);
    case op_kind::exp:
      return expf(a);
    case op_kind::log:
      return logf(a);
    case op_kind::sqrt:
      return sqrtf(a);
    case op_kind::rsqrt:
      return 1.0f / sqrtf(a);
    case op_kind::tanh:
      return tanhf(a);
    case op_kind::erf:
      return erff(a);
    case op_kind::sigmoid:
      return 1.0f / (1.0f + expf(-a));
    case op_kind::relu:
      return a < 0.0f ? 0.0f : a;
    // The GELUs in graph/scalar.hpp's forms, which do not cancel for negative a.
    case op_kind::gelu_erf:
      return 0.5f * a * erfcf(a * -0.70710678118654752f);
    case op_kind::gelu_tanh:
      return a / (1.0f + expf(-2.0f * 0.79788456080286536f * (a + 0.044715f * a * a * a)));
    case op_kind::silu:
      return a / (1.0f + expf(-a));
    case op_kind::add:
      return a + b;
    case op_kind::sub:
      return a - b;
    case op_kind::mul:
      return a * b;
    case op_kind::div:
      return a / b;
    case op_kind::max:
      return nan_max(a, b);
    case op_kind::min:
      return nan_min(a, b);
    case op_kind::pow:
      return powf(a, b);
    case op_kind::eq:
      return a == b ? 1.0f : 0.0f;
    case op_kind::ne:
      return a != b ? 1.0f : 0.0f;
    case op_kind::lt:
      return a < b ? 1.0f : 0.0f;
    case op_kind::le:
      return a <= b ? 1.0f : 0.0f;
    case op_kind::gt:
      return a > b ? 1.0f : 0.0f;
    case op_kind::ge:
      return a >= b ? 1.0f : 0.0f;
    case op_kind::select:
      return a != 0.0f ? b : c;
    case op_kind::cast:
      return a;  // the rounding to the target dtype follows in the caller
    default:
      return __int_as_float(0x7fc00000);  // unreachable: executor_plan maps only these
  }
}

// GEMM epilogue out = cast<Out>(act(scale * acc + bias[col]) + residual[row, col]), where act is
// any graph activation (gelu_tanh and sigmoid included), as the fusion plan wrote it.
template <storage_type Out, bool HasAct, op_kind Act, bool Bias, bool Residual>
struct plan_epilogue {
  using out_type = Out;
  float scale = 1.0f;
  const Out* bias = nullptr;
  const Out* residual = nullptr;

  __device__ float apply(float acc, int row, int col, int ld) const {
    float v = scale * acc;
    if constexpr (Bias) v += to_f32(bias[col]);
    if constexpr (HasAct) v = apply_op(Act, v, 0.0f, 0.0f);
    if constexpr (Residual) v += to_f32(residual[static_cast<long>(row) * ld + col]);
    return v;
  }
};

// Device addresses of a loop program's loads and outputs.
struct loop_pointers {
  const void* in[max_loop_loads] = {};
  void* out[plan::max_roots] = {};
};

__device__ inline float load_as_f32(dtype t, const void* p, long i) {
  if (t == dtype::bf16) return to_f32(static_cast<const bf16*>(p)[i]);
  if (t == dtype::f16) return to_f32(static_cast<const f16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
__device__ inline void store_from_f32(dtype t, void* p, long i, float v) {
  if (t == dtype::bf16)
    static_cast<bf16*>(p)[i] = from_f32<bf16>(v);
  else if (t == dtype::f16)
    static_cast<f16*>(p)[i] = from_f32<f16>(v);
  else
    static_cast<float*>(p)[i] = v;
}

// Element i of the iteration space: every instruction in order, registers in local memory.
// The program stays in parameter memory (__grid_constant__: no per-thread copy).
// One instantiation serves every loop group (the program is data), so it costs nvcc nothing per
// group; the price is an interpreted inner loop, acceptable for the groups no fused kernel takes.
// (A template only so that the header can be included by several translation units.)
template <int = 0>
__global__ void __launch_bounds__(256) loop_program_kernel(const __grid_constant__ loop_launch lp,
                                                           const loop_pointers ptr, long count) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    long idx[max_rank] = {};
    long rest = i;
    for (int d = lp.shape.rank - 1; d >= 0; --d) {
      idx[d] = rest % lp.shape.d[d];
      rest /= lp.shape.d[d];
    }
    float r[max_loop_instructions];
    for (int s = 0; s < lp.n_instructions; ++s) {
      const loop_instruction& in = lp.code[s];
      switch (in.code) {
        case loop_code::load: {
          const loop_load& ld = lp.loads[in.load];
          long off = ld.offset;
          for (int d = 0; d < lp.shape.rank; ++d) off += idx[d] * ld.stride[d];
          r[s] = load_as_f32(ld.type, ptr.in[in.load], off);
          break;
        }
        case loop_code::constant:
          r[s] = in.value;
          break;
        case loop_code::iota:
          r[s] = static_cast<float>(idx[in.axis]);
          break;
        case loop_code::apply:
          r[s] = round_to(in.type, apply_op(in.op, r[in.a], in.b >= 0 ? r[in.b] : 0.0f,
                                            in.c >= 0 ? r[in.c] : 0.0f));
          break;
      }
    }
    for (int o = 0; o < lp.n_outputs; ++o)
      store_from_f32(lp.out_type[o], ptr.out[o], i, r[lp.out_register[o]]);
  }
}

inline void launch_loop_program(cudaStream_t stream, const loop_launch& lp,
                                const loop_pointers& ptr) {
  const long count = lp.shape.size();
  const long blocks = (count + 255) / 256;
  loop_program_kernel<>
      <<<static_cast<unsigned>(blocks < 4 * 65535 ? blocks : 4 * 65535), 256, 0, stream>>>(lp, ptr,
                                                                                           count);
  check_launch("loop_program_kernel");
}

}  // namespace fusedsl::cuda
