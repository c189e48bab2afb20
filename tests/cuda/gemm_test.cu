// GEMM with fused epilogue: every path (bf16/f16 tensor cores, TF32, exact f32) against CPU loops.
#include <doctest/doctest.h>

#include <fusedsl/backend/cuda/gemm.cuh>

#include "cuda_test_util.hpp"
#include "reference.hpp"

namespace fc = fusedsl::cuda;
using fusedsl::graph::op_kind;
namespace ft = fusedsl::cuda::testing;
namespace ref = fusedsl::cuda::reference;

namespace {

// Runs one GEMM configuration on fresh random data and returns ||out - ref|| / ||ref||.
template <int M, int N, int K, class In, class Epi, fc::gemm_math Math,
          class Tile = fc::default_tile_for<M, N, Math, In>, class RefAct>
double run_case(float scale, RefAct ref_act) {
  using Out = typename Epi::out_type;
  std::vector<float> a_f, b_f, bias_f, res_f;
  auto a = ft::random_values<In>(static_cast<std::size_t>(M) * K, a_f);
  auto b = ft::random_values<In>(static_cast<std::size_t>(K) * N, b_f);
  auto bias = ft::random_values<Out>(N, bias_f);
  auto res = ft::random_values<Out>(static_cast<std::size_t>(M) * N, res_f);
  ft::device_buffer<In> da(a), db(b);
  ft::device_buffer<Out> dbias(bias), dres(res), dc(static_cast<std::size_t>(M) * N);
  dc.poison();
  Epi epi;
  epi.scale = scale;
  if constexpr (Epi::has_bias) epi.bias = dbias.get();
  if constexpr (Epi::has_residual) epi.residual = dres.get();
  fc::gemm<M, N, K, In, Epi, Math, Tile>(nullptr, da.get(), db.get(), dc.get(), epi);
  const auto out = ft::widen(dc.download());
  const auto expect =
      ref::gemm(a_f, b_f, M, N, K, scale, Epi::has_bias ? bias_f : std::vector<float>{},
                Epi::has_residual ? res_f : std::vector<float>{}, ref_act);
  return ft::rel_l2(out, expect);
}

}  // namespace

TEST_CASE("bf16 tensor-core gemm fuses bias, gelu and residual into a bf16 output within 1e-2") {
  using epi = fc::epilogue<fc::bf16, fc::op<op_kind::gelu_erf>, true, true>;
  const double err =
      run_case<256, 384, 512, fc::bf16, epi, fc::gemm_math::tensor_core>(1.0f, ref::gelu);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("f16 tensor-core gemm applies scale and relu and casts to an f32 output") {
  using epi = fc::epilogue<float, fc::op<op_kind::relu>>;
  // f16 operands, so the bound is the 16-bit one even though the output is f32.
  const double err =
      run_case<128, 128, 128, fc::f16, epi, fc::gemm_math::tensor_core>(0.125f, ref::relu);
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE(
    "bf16 gemm on the 128x128 block tile, 12 block-rows in groups of 8, with silu and bias "
    "matches") {
  using epi = fc::epilogue<fc::bf16, fc::op<op_kind::silu>, true, false>;
  static_assert(fc::default_mma_tile<1536, 1024>::BM == 128, "this case must use the large tile");
  const double err = run_case<1536, 1024, 256, fc::bf16, epi, fc::gemm_math::mma>(1.0f, ref::silu);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE(
    "f16 gemm on the 64x64 block tile with K = 96 (fewer k-tiles than pipeline stages) adds bias "
    "and residual") {
  using epi = fc::epilogue<fc::f16, void, true, true>;
  static_assert(fc::default_mma_tile<512, 640>::BM == 64, "this case must use the mid tile");
  const double err =
      run_case<512, 640, 96, fc::f16, epi, fc::gemm_math::mma>(1.0f, [](double x) { return x; });
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::f16>);
}

// Hopper's wgmma + TMA path (gemm_sm90.cuh). On other devices, or in a build without an sm_90a
// cubin, these cases say so and check nothing (the binary's other cases still run).
namespace {
bool wgmma_available() {
  if (fc::sm90::device_has_wgmma()) return true;
  MESSAGE("skipped: wgmma needs a compute-capability 9.0 device and an sm_90a build");
  return false;
}
}  // namespace

TEST_CASE("wgmma: bf16 with bias, gelu and residual, 8 k-tiles through a 4-stage ring") {
  if (!wgmma_available()) return;
  using epi = fc::epilogue<fc::bf16, fc::op<op_kind::gelu_erf>, true, true>;
  const double err = run_case<256, 384, 512, fc::bf16, epi, fc::gemm_math::wgmma>(1.0f, ref::gelu);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("wgmma: f16, one block and one k-tile, scale and relu into an f32 output") {
  if (!wgmma_available()) return;
  using epi = fc::epilogue<float, fc::op<op_kind::relu>>;
  const double err = run_case<128, 128, 64, fc::f16, epi, fc::gemm_math::wgmma>(0.125f, ref::relu);
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("wgmma: 128x256 blocks (four B boxes per stage), K = 320, silu and bias") {
  if (!wgmma_available()) return;
  using epi = fc::epilogue<fc::bf16, fc::op<op_kind::silu>, true, false>;
  const double err =
      run_case<256, 512, 320, fc::bf16, epi, fc::gemm_math::wgmma, fc::sm90::wgmma_tile<256, 4>>(
          1.0f, ref::silu);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("the default bf16 gemm takes wgmma on Hopper for a chip-filling shape and matches") {
  if (!wgmma_available()) return;
  using epi = fc::epilogue<fc::bf16, void, true, true>;
  static_assert(fc::sm90::fits<1024, 1024, 1024>, "this case must take the wgmma path");
  const double err = run_case<1024, 1024, 1024, fc::bf16, epi, fc::gemm_math::tensor_core>(
      1.0f, [](double x) { return x; });
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("the default bf16 gemm takes 128x256 wgmma blocks from two waves of them on") {
  if (!wgmma_available()) return;
  using epi = fc::epilogue<fc::bf16, fc::op<op_kind::gelu_erf>, true, false>;
  static_assert(fc::sm90::wide_blocks<2048, 4096>, "this case must take the wide blocks");
  const double err =
      run_case<2048, 4096, 64, fc::bf16, epi, fc::gemm_math::tensor_core>(1.0f, ref::gelu);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("the WMMA path for bf16 fuses bias, gelu and residual like the mma.sync path") {
  using epi = fc::epilogue<fc::bf16, fc::op<op_kind::gelu_erf>, true, true>;
  const double err = run_case<256, 384, 512, fc::bf16, epi, fc::gemm_math::wmma>(1.0f, ref::gelu);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("WMMA on the large 128x128 tile matches the CPU loop") {
  using epi = fc::epilogue<fc::bf16, fc::op<op_kind::silu>, true, false>;
  static_assert(fc::default_gemm_tile<fc::bf16, 2048, 1024>::BM == 128,
                "this case must use the large tile");
  const double err = run_case<2048, 1024, 256, fc::bf16, epi, fc::gemm_math::wmma>(1.0f, ref::silu);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("f32 gemm as TF32 on tensor cores stays within TF32 rounding (2e-3)") {
  using epi = fc::epilogue<float, void, true, false>;
  const double err =
      run_case<256, 256, 256, float, epi, fc::gemm_math::tf32>(1.0f, [](double x) { return x; });
  INFO("relative error " << err);
  CHECK(err < 2e-3);
}

TEST_CASE("exact f32 gemm handles a shape that is no multiple of any tile, within 1e-5") {
  using epi = fc::epilogue<float, fc::op<op_kind::relu>, true, true>;
  const double err = run_case<100, 70, 33, float, epi, fc::gemm_math::cuda_core>(1.0f, ref::relu);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<float>);
}

TEST_CASE("exact f32 gemm at K = 512 stays within 1e-5") {
  using epi = fc::epilogue<float>;
  const double err = run_case<256, 192, 512, float, epi, fc::gemm_math::cuda_core>(
      1.0f, [](double x) { return x; });
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<float>);
}

namespace {
template <int M, int N, int K, class T, class Out>
double run_layernorm_case() {
  using epi_t = fc::epilogue<Out, void, true, true>;
  std::vector<float> a_f, b_f, bias_f, res_f, g_f, be_f;
  auto a = ft::random_values<T>(static_cast<std::size_t>(M) * K, a_f);
  auto b = ft::random_values<T>(static_cast<std::size_t>(K) * N, b_f);
  auto bias = ft::random_values<Out>(N, bias_f);
  auto res = ft::random_values<Out>(static_cast<std::size_t>(M) * N, res_f);
  auto gamma = ft::random_values<Out>(N, g_f, 0.5f, 1.5f);
  auto beta = ft::random_values<Out>(N, be_f);
  ft::device_buffer<T> da(a), db(b);
  ft::device_buffer<Out> dbias(bias), dres(res), dg(gamma), dbe(beta),
      dc(static_cast<std::size_t>(M) * N);
  dc.poison();
  epi_t epi;
  epi.bias = dbias.get(), epi.residual = dres.get();
  fc::gemm_layernorm<M, N, K, T>(nullptr, da.get(), db.get(), dc.get(), epi, dg.get(), dbe.get(),
                                 1e-5f);
  const auto out = ft::widen(dc.download());
  const auto pre = ref::gemm(a_f, b_f, M, N, K, 1.0, bias_f, res_f, [](double x) { return x; });
  const auto expect =
      ref::norm_rows(std::vector<float>(pre.begin(), pre.end()), M, N, g_f, be_f, 1e-5, true);
  return ft::rel_l2(out, expect);
}
}  // namespace

TEST_CASE(
    "gemm_layernorm fuses bias, residual and a row layernorm into one bf16 launch (seed FFN2 "
    "shape)") {
  const double err = run_layernorm_case<128, 128, 512, fc::bf16, fc::bf16>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("gemm_layernorm over rows of 256 reads f16 and writes f32") {
  const double err = run_layernorm_case<64, 256, 64, fc::f16, float>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("gemm_layernorm without gamma or beta is refused before launch") {
  ft::device_buffer<fc::bf16> m(64 * 64);
  CHECK_THROWS_WITH_AS(
      (fc::gemm_layernorm<64, 64, 64, fc::bf16>(nullptr, m.get(), m.get(), m.get(),
                                                fc::epilogue<fc::bf16>{}, nullptr, m.get())),
      "gemm_layernorm: gamma and beta must be set", std::invalid_argument);
}
