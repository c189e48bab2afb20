// The parts of the CUDA backend that need no device, so they run on every machine with nvcc:
// tile choices, flop counts, the epilogue arithmetic, the device math policy of the op table and
// the dtype conversions of the generated kernels (all __host__ __device__), and the graph
// runner's refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fusedsl/backend/cuda/attention.cuh>
#include <fusedsl/backend/cuda/device_math.cuh>
#include <fusedsl/backend/cuda/gemm.cuh>
#include <fusedsl/backend/cuda/graph_runner.hpp>
#include <stdexcept>

#include "../common/compare.hpp"
#include "reference.hpp"

namespace fc = fusedsl::cuda;
using fusedsl::graph::op_kind;
namespace ref = fusedsl::cuda::reference;
namespace tc = fusedsl::test;

TEST_CASE(
    "the mma.sync tile is 128x128 when it yields a wave of blocks, 64x64 for mid sizes, 32x32 for "
    "small ones") {
  CHECK(fc::default_mma_tile<8192, 8192>::BM == 128);
  CHECK(fc::default_mma_tile<2048, 1024>::BN == 128);  // 128 blocks
  CHECK(fc::default_mma_tile<512, 640>::BM == 64);     // 80 blocks of 64x64, 20 of 128x128
  CHECK(fc::default_mma_tile<128, 128>::BM == 32);     // the seed model: 16 blocks
  CHECK(fc::default_mma_tile<128, 512>::BN == 32);
  CHECK(fc::default_mma_tile<2048, 1024>::threads == 128);
}

TEST_CASE("16-bit operands default to the mma.sync path, f32 to exact CUDA-core FMAs") {
  CHECK(fc::default_gemm_math<fc::bf16> == fc::gemm_math::tensor_core);
  CHECK(fc::default_gemm_math<fc::f16> == fc::gemm_math::tensor_core);
  CHECK(fc::default_gemm_math<float> == fc::gemm_math::cuda_core);
}

TEST_CASE("attention flops count 4 * b * h * sq * sk * d, half of it when causal") {
  CHECK(tc::compare(fc::attention_flops(1, 1, 2, 3, 4, false), 96.0, tc::exact()));
  CHECK(tc::compare(fc::attention_flops(2, 16, 2048, 2048, 64, true),
                    2.0 * 16 * 2048.0 * 2048 * 64 * 2, tc::rel_tol(1e-12)));
}

TEST_CASE("the epilogue computes act(scale * acc + bias) + residual in that order") {
  const float bias[3] = {0.5f, -1.0f, 2.0f};
  const float residual[6] = {1, 2, 3, 4, 5, 6};
  fc::epilogue<float, fc::op<op_kind::relu>, true, true> e;
  e.scale = 2.0f, e.bias = bias, e.residual = residual;
  CHECK(tc::compare(e.apply(1.0f, 1, 1, 3), std::max(0.0, 2.0 - 1.0) + 5.0, tc::rel_tol(1e-6)));
  // relu(-6 + 2) = 0, then + residual
  CHECK(tc::compare(e.apply(-3.0f, 0, 2, 3), 0.0 + 3.0, tc::rel_tol(1e-6)));
}

TEST_CASE("the op table's activations on the device policy match their definitions") {
  for (float x : {-3.0f, -0.5f, 0.0f, 0.7f, 4.0f}) {
    CHECK(tc::compare(fc::apply_op<op_kind::gelu_erf>(x), ref::gelu(x), tc::rel_tol(1e-6)));
    CHECK(tc::compare(fc::apply_op<op_kind::silu>(x), ref::silu(x), tc::rel_tol(1e-6)));
    CHECK(tc::compare(fc::apply_op<op_kind::relu>(x), ref::relu(x), tc::exact()));
  }
  // Relative accuracy where gelu is tiny (-7.2e-6 at -5, -5e-15 at -8), which 1 + erf would lose.
  for (float x : {-8.0f, -5.0f, -3.0f})
    CHECK(tc::compare(fc::apply_op<op_kind::gelu_erf>(x), ref::gelu(x), tc::rel_tol(1e-5, 0.0)));
}

TEST_CASE("the device policy's maximum and minimum propagate NaN; comparisons are false on NaN") {
  const float nan = std::nanf("");
  CHECK(std::isnan(fc::apply_op<op_kind::max>(nan, 1.0f)));
  CHECK(std::isnan(fc::apply_op<op_kind::min>(1.0f, nan)));
  CHECK(fc::apply_op<op_kind::max>(-INFINITY, 2.0f) == 2.0f);
  CHECK(fc::apply_op<op_kind::lt>(nan, 1.0f) == 0.0f);
  CHECK(fc::apply_op<op_kind::ne>(nan, nan) == 1.0f);
  CHECK(fc::apply_op<op_kind::select>(0.0f, 1.0f, 2.0f) == 2.0f);
  CHECK(std::isnan(fc::apply_op<op_kind::relu>(nan)));  // relu keeps NaN
}

TEST_CASE("generated kernels round bf16/f16 to nearest even, truncate i32 and saturate its store") {
  CHECK(fc::to_dtype<fusedsl::dtype::bf16>(1.0f + 1.0f / 256.0f) == 1.0f);  // tie to even
  CHECK(fc::to_dtype<fusedsl::dtype::bf16>(1.0f + 3.0f / 256.0f) == 1.0f + 1.0f / 64.0f);
  CHECK(fc::to_dtype<fusedsl::dtype::f16>(1.0f + 1.0f / 4096.0f) == 1.0f);
  CHECK(fc::to_dtype<fusedsl::dtype::i32>(-2.7f) == -2.0f);
  CHECK(fc::to_dtype<fusedsl::dtype::boolean>(0.5f) == 1.0f);
  CHECK(std::isnan(fc::to_dtype<fusedsl::dtype::bf16>(std::nanf(""))));
  std::int32_t i = 0;
  fc::store_f32<fusedsl::dtype::i32>(&i, 0, 3e10f);
  CHECK(i == 2147483647);
  fc::store_f32<fusedsl::dtype::i32>(&i, 0, std::nanf(""));
  CHECK(i == 0);
  const std::uint16_t b = fc::f32_to_bf16(-1.5f);
  CHECK(fc::load_f32<fusedsl::dtype::bf16>(&b, 0) == -1.5f);
}

TEST_CASE("bf16 and f16 conversions round to nearest and keep exactly representable values") {
  CHECK(fc::to_f32(fc::from_f32<fc::bf16>(1.5f)) == 1.5f);
  CHECK(fc::to_f32(fc::from_f32<fc::f16>(-0.25f)) == -0.25f);
  CHECK(fc::to_f32(fc::from_f32<fc::bf16>(1.0f + 1.0f / 256.0f)) == 1.0f);  // tie rounds to even
}

TEST_CASE("the graph runner refuses an empty step, an empty capture and a replay before capture") {
  fc::graph_runner run(nullptr);
  CHECK_THROWS_AS(run.add("nothing", {}), std::invalid_argument);
  CHECK_THROWS_AS(run.capture(), std::logic_error);
  CHECK_THROWS_AS(run.replay(), std::logic_error);
  run.add("noop", [](cudaStream_t) {});
  CHECK(run.size() == 1);
  CHECK_FALSE(run.captured());
}
