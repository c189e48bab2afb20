// gemm_amx (bf16 operands, f32 accumulation, fused epilogue) against Eigen in double on the
// bf16-rounded operands, and against kernels::gemm on the same bf16-rounded operands.
//
// Tolerances (u = 2^-24, the f32 unit roundoff; mag = |scale| * sum_p |A(i,p) B(p,j)| on the
// bf16-rounded operands):
//   linear part, f32 C       |got - want| <= 1e-6 * mag: the products of bf16 values are exact in
//                            f32, so the only error is the f32 accumulation (worst case (k-1) u
//                            mag, typically sqrt(k) u mag; measured below 1e-7 mag up to k = 600)
//   with an activation        + 4e-7 * (|want| + 1): the epilogue's functions (vmath.hpp, <= 3 ulp)
//   bf16 C                    + 2^-8 * |want|: one more rounding, to 8 significant bits
//   against the exact f32 product (operands not rounded): <= 2^-7 * mag, the bf16 rounding of
//                            both operands (8 significant bits: up to 2^-8 relative each, so each
//                            product is off by at most ~2^-7); the measured figure is printed
//                            (MESSAGE).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "amx_problem.hpp"

namespace k = fusedsl::cpu::kernels;
using fusedsl_test::random_floats;
using fusedsl_test::amx::bf16_round;
using fusedsl_test::amx::matd;
using fusedsl_test::amx::problem;
using fusedsl_test::amx::run;

namespace {

float as_float(float x) {
  return x;
}
float as_float(k::bf16_bits x) {
  return k::from_bf16(x);
}

// C against the reference within the tolerances above; the largest |got - want| / mag (for ep
// without activation); whether the columns past n kept their 7.
struct checked {
  ft::comparison within;
  double worst_linear = 0;
  bool rest_untouched = true;
};

template <class OutT>
checked check_c(const problem& pr, const std::vector<OutT>& c, const k::gemm_epilogue& ep) {
  checked r;
  const double lin = 1e-6, act = !ep.act ? 0.0 : 4e-7;
  const double out = std::is_same_v<OutT, float> ? 0.0 : 1.0 / 256;
  std::vector<double> got, want, allowed, mag;
  for (std::ptrdiff_t i = 0; i < pr.m; ++i) {
    for (std::ptrdiff_t j = 0; j < pr.n; ++j) {
      const double w = pr.want(i, j, ep), m = std::fabs(ep.scale) * pr.magnitude(i, j);
      got.push_back(as_float(c[std::size_t(i * pr.ldc + j)]));
      want.push_back(w);
      mag.push_back(m);
      allowed.push_back(lin * m + act * (std::fabs(w) + 1) + out * std::fabs(w));
    }
    for (std::ptrdiff_t j = pr.n; j < pr.ldc; ++j)
      r.rest_untouched &= c[std::size_t(i * pr.ldc + j)] == OutT(7);
  }
  r.within = ft::compare_scaled(got, want, allowed, 1.0);
  r.worst_linear = ft::compare_scaled(got, want, mag, 1.0).max_ratio;
  return r;
}

const char* mode_name(k::amx_mode mode) {
  return mode == k::amx_mode::automatic ? (k::amx_available() ? "amx tiles" : "portable (no AMX)")
                                        : "portable";
}

constexpr k::amx_mode both_modes[] = {k::amx_mode::automatic, k::amx_mode::portable};

}  // namespace

TEST_CASE("amx_available gives one cached answer, and the test says which path it checks") {
  const bool first = k::amx_available();
  CHECK(k::amx_available() == first);
  if (first)
    MESSAGE(
        "AMX-BF16 is available: gemm_amx runs on the tiles (and the portable path is "
        "checked too)");
  else
    MESSAGE(
        "AMX-BF16 is NOT available (build without -mamx-bf16, CPU or kernel without it): "
        "only the portable path of gemm_amx is checked");
}

TEST_CASE("gemm_amx equals the double product of the bf16-rounded operands on odd shapes") {
  struct shape {
    std::ptrdiff_t m, n, kk;
  };
  double worst[2] = {0, 0};
  for (const shape s :
       {shape{1, 1, 1}, shape{17, 33, 65}, shape{128, 128, 128}, shape{128, 512, 128},
        shape{130, 70, 300}, shape{16, 16, 32}, shape{33, 17, 31}, shape{48, 48, 512},
        shape{70, 1100, 600}})  // B over 1 MiB: two blocks of B panels
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (const auto mode : both_modes) {
          CAPTURE(s.m);
          CAPTURE(s.n);
          CAPTURE(s.kk);
          CAPTURE(ta);
          CAPTURE(tb);
          CAPTURE(mode_name(mode));
          const problem pr(s.m, s.n, s.kk, ta, tb);
          const auto r = check_c(pr, run<float>(pr, {}, mode), {});
          CHECK(r.within);
          CHECK(r.rest_untouched);
          CHECK(r.worst_linear < 2e-7);
          double& w = worst[mode == k::amx_mode::automatic ? 0 : 1];
          w = std::max(w, r.worst_linear);
        }
  MESSAGE("largest error over sum |products| on these shapes: "
          << std::string(mode_name(both_modes[0])) << " " << worst[0] << ", portable " << worst[1]);
}

TEST_CASE("gemm_amx applies every activation with bias, scale and residual, to f32 and bf16 C") {
  const problem pr(130, 70, 300, false, false, 21);
  for (const auto act : fusedsl_test::all_activations)
    for (const bool with_bias : {false, true})
      for (const bool with_res : {false, true})
        for (const auto mode : both_modes) {
          k::gemm_epilogue ep;
          ep.scale = 0.375f;
          ep.act = act;
          ep.bias = with_bias ? pr.bias.data() : nullptr;
          ep.residual = with_res ? pr.res.data() : nullptr;
          ep.ld_residual = pr.ldc;
          CAPTURE(fusedsl_test::name_of(act));
          CAPTURE(with_bias);
          CAPTURE(with_res);
          CAPTURE(mode_name(mode));
          const auto f = check_c(pr, run<float>(pr, ep, mode), ep);
          CHECK(f.within);
          CHECK(f.rest_untouched);
          const auto h = check_c(pr, run<k::bf16_bits>(pr, ep, mode), ep);
          CHECK(h.within);
          CHECK(h.rest_untouched);
        }
}

TEST_CASE("gemm_amx writes bf16 C as the f32 result rounded once") {
  const problem pr(40, 50, 70);
  k::gemm_epilogue ep;
  ep.bias = pr.bias.data();
  ep.act = fusedsl::graph::op_kind::gelu_tanh;
  const auto f = run<float>(pr, ep, k::amx_mode::automatic);
  const auto h = run<k::bf16_bits>(pr, ep, k::amx_mode::automatic);
  int differ = 0;
  for (std::ptrdiff_t i = 0; i < pr.m; ++i)
    for (std::ptrdiff_t j = 0; j < pr.n; ++j)
      differ += k::to_bf16(f[std::size_t(i * pr.ldc + j)]) != h[std::size_t(i * pr.ldc + j)];
  CHECK(differ == 0);
}

TEST_CASE("gemm_amx results are bitwise identical for 1 and 2 threads") {
  k::thread_pool two(2);
  for (const auto mode : both_modes)
    for (const auto& size : {std::array<std::ptrdiff_t, 3>{130, 70, 300}, {70, 1100, 600}}) {
      CAPTURE(mode_name(mode));
      CAPTURE(size[0]);  // no structured binding: clang 14 cannot capture one in CAPTURE
      const problem pr(size[0], size[1], size[2]);
      k::gemm_epilogue ep;
      ep.act = fusedsl::graph::op_kind::silu;
      ep.bias = pr.bias.data();
      const auto one = run<float>(pr, ep, mode), pair = run<float>(pr, ep, mode, &two);
      CHECK(std::memcmp(one.data(), pair.data(), one.size() * sizeof(float)) == 0);
      const auto again = run<float>(pr, ep, mode);
      CHECK(std::memcmp(one.data(), again.data(), one.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("gemm_amx error against the exact f32 product is bounded by the bf16 rounding") {
  const problem pr(128, 512, 128);
  const auto c = run<float>(pr, {}, k::amx_mode::automatic);
  const matd a = pr.a_matrix(false), b = pr.b_matrix(false);
  const matd exact = a * b, mag = a.cwiseAbs() * b.cwiseAbs();
  std::vector<double> got, want, scale;
  for (std::ptrdiff_t i = 0; i < pr.m; ++i)
    for (std::ptrdiff_t j = 0; j < pr.n; ++j) {
      got.push_back(c[std::size_t(i * pr.ldc + j)]);
      want.push_back(exact(i, j));
      scale.push_back(mag(i, j));
    }
  const auto within = ft::compare_scaled(got, want, scale, 1.0 / 128);
  MESSAGE("against the unrounded operands (uniform in [-1, 1], 128x512x128): largest error "
          << within.max_ratio / 128 << " of sum |products|, norm-wise relative L2 error "
          << ft::compare_rel_l2(got, want, 1.0).max_error);
  CHECK(within);
}

TEST_CASE("gemm_amx propagates inf and NaN in A like kernels::gemm on bf16-rounded operands") {
  problem pr(37, 45, 70);
  const float inf = std::numeric_limits<float>::infinity();
  pr.a[std::size_t(3 * pr.lda + 5)] = inf;
  pr.a[std::size_t(20 * pr.lda + 69)] = -inf;
  pr.a[std::size_t(36 * pr.lda + 0)] = std::numeric_limits<float>::quiet_NaN();
  pr.a[std::size_t(10 * pr.lda + 33)] = 3.4e38f;  // rounds to +inf in bf16
  for (std::size_t p = 0; p < std::size_t(pr.kk); ++p) pr.b[p * std::size_t(pr.ldb) + 7] = 0.0f;
  // The f32 kernel on the same bf16-rounded operands.
  std::vector<float> a_r(pr.a.size()), b_r(pr.b.size());
  for (std::size_t i = 0; i < a_r.size(); ++i) a_r[i] = bf16_round(pr.a[i]);
  for (std::size_t i = 0; i < b_r.size(); ++i) b_r[i] = bf16_round(pr.b[i]);
  std::vector<float> packed(k::packed_b_floats(pr.kk, pr.n));
  const auto pb = k::pack_b(pr.kk, pr.n, b_r.data(), pr.ldb, false, packed.data());
  std::vector<float> ws(k::gemm_workspace_floats(pr.kk)), want(std::size_t(pr.m * pr.ldc));
  for (const auto act :
       {std::optional<fusedsl::graph::op_kind>{}, std::optional{fusedsl::graph::op_kind::relu},
        std::optional{fusedsl::graph::op_kind::gelu_tanh},
        std::optional{fusedsl::graph::op_kind::sigmoid}})
    for (const auto mode : both_modes) {
      CAPTURE(fusedsl_test::name_of(act));
      CAPTURE(mode_name(mode));
      k::gemm_epilogue ep;
      ep.act = act;
      ep.bias = pr.bias.data();
      k::gemm(pr.m, pr.n, pr.kk, a_r.data(), pr.lda, false, pb, want.data(), pr.ldc, ep, ws.data());
      const auto got = run<float>(pr, ep, mode);
      std::vector<float> g, w;
      for (std::ptrdiff_t i = 0; i < pr.m; ++i)
        for (std::ptrdiff_t j = 0; j < pr.n; ++j) {
          g.push_back(got[std::size_t(i * pr.ldc + j)]);
          w.push_back(want[std::size_t(i * pr.ldc + j)]);
        }
      CHECK(std::count_if(w.begin(), w.end(), [](float x) { return !std::isfinite(x); }) >
            0);  // the edge values reach the output
      CHECK(ft::compare(g, w, ft::allclose(1e-5, 1e-5), ft::nans::expected));
    }
}

TEST_CASE("pack_b_bf16 from bf16 weights equals packing the same values from f32") {
  const std::ptrdiff_t kk = 45, n = 37;
  auto b = random_floats(std::size_t(kk * n), 5);
  std::vector<k::bf16_bits> bh(b.size());
  k::to_bf16(b.data(), bh.data(), b.size());
  std::vector<k::bf16_bits> p1(k::packed_b_bf16_elements(kk, n)), p2(p1.size()), p3(p1.size());
  const auto v1 = k::pack_b_bf16(kk, n, b.data(), n, false, p1.data());
  const auto v2 = k::pack_b_bf16(kk, n, bh.data(), n, false, p2.data());
  std::vector<float> bt(b.size());  // B^T, n x k
  for (std::ptrdiff_t p = 0; p < kk; ++p)
    for (std::ptrdiff_t j = 0; j < n; ++j) bt[std::size_t(j * kk + p)] = b[std::size_t(p * n + j)];
  const auto v3 = k::pack_b_bf16(kk, n, bt.data(), kk, true, p3.data());
  const std::size_t used = k::packed_b_bf16_elements(kk, n) - k::amx_alignment_slack;
  CHECK(std::equal(v1.data, v1.data + used, v2.data));
  CHECK(std::equal(v1.data, v1.data + used, v3.data));
  CHECK(reinterpret_cast<std::uintptr_t>(v1.data) % 64 == 0);  // aligned inside the buffer
  // The layout: (p, j) at panel j/32, pair row p/2, column j%32, half p%2; zero padding.
  const std::ptrdiff_t kp = 64;
  const k::bf16_bits* q = v1.data;
  CHECK(q[1 * kp * 32 + (7 / 2) * 64 + (33 % 32) * 2 + 7 % 2] == bh[std::size_t(7 * n + 33)]);
  CHECK(q[1 * kp * 32 + (50 / 2) * 64 + 0] == 0);  // p = 50 >= k
  CHECK(q[1 * kp * 32 + 0 * 64 + 10 * 2] == 0);    // j = 42 >= n
}

TEST_CASE("gemm_amx with k = 0 gives the epilogue of zero") {
  const std::ptrdiff_t m = 3, n = 5;
  std::vector<float> bias = random_floats(std::size_t(n), 3), c(std::size_t(m * n), 7.0f);
  const k::packed_b_bf16 pb{nullptr, 0, n};
  k::gemm_epilogue ep;
  ep.bias = bias.data();
  ep.act = fusedsl::graph::op_kind::relu;
  k::gemm_amx(m, n, 0, static_cast<const float*>(nullptr), 0, false, pb, c.data(), n, ep,
              static_cast<k::bf16_bits*>(nullptr));
  for (std::ptrdiff_t i = 0; i < m; ++i)
    for (std::ptrdiff_t j = 0; j < n; ++j)
      CHECK(c[std::size_t(i * n + j)] == std::max(0.0f, bias[std::size_t(j)]));
}

TEST_CASE("gemm_amx rejects bad sizes, a mismatched packed B and null pointers by name") {
  std::vector<float> a(8, 1.0f), b(12, 1.0f), c(6);
  std::vector<k::bf16_bits> packed(k::packed_b_bf16_elements(4, 3)),
      ws(k::gemm_amx_workspace_elements(2, 4));
  const auto pb = k::pack_b_bf16(4, 3, b.data(), 3, false, packed.data());
  CHECK_THROWS_WITH_AS(k::gemm_amx(-1, 3, 4, a.data(), 4, false, pb, c.data(), 3, {}, ws.data()),
                       "gemm_amx: m must be >= 0, got -1", std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::gemm_amx(2, 3, 5, a.data(), 5, false, pb, c.data(), 3, {}, ws.data()),
                       "gemm_amx: packed B is 4x3, the product needs 5x3", std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::gemm_amx(2, 3, 4, static_cast<const float*>(nullptr), 4, false, pb,
                                   c.data(), 3, {}, ws.data()),
                       "gemm_amx: A is null", std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      k::gemm_amx(2, 3, 4, a.data(), 4, false, pb, static_cast<float*>(nullptr), 3, {}, ws.data()),
      "gemm_amx: C is null", std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::gemm_amx(2, 3, 4, a.data(), 4, false, pb, c.data(), 3, {},
                                   static_cast<k::bf16_bits*>(nullptr)),
                       "gemm_amx: workspace is null", std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::gemm_amx(2, 3, 4, a.data(), 4, false, pb, c.data(), 2, {}, ws.data()),
                       "gemm_amx: ldc 2 is less than n = 3", std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::gemm_amx(2, 3, 4, a.data(), 3, false, pb, c.data(), 3, {}, ws.data()),
                       "gemm_amx: lda 3 is less than k = 4", std::invalid_argument);
  k::gemm_epilogue ep;
  ep.residual = c.data();
  ep.ld_residual = 1;
  CHECK_THROWS_WITH_AS(k::gemm_amx(2, 3, 4, a.data(), 4, false, pb, c.data(), 3, ep, ws.data()),
                       "gemm_amx: residual leading dimension 1 is less than n = 3",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::pack_b_bf16(4, -2, b.data(), 3, false, packed.data()),
                       "pack_b_bf16: n must be >= 0, got -2", std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      k::pack_b_bf16(4, 3, static_cast<const float*>(nullptr), 3, false, packed.data()),
      "pack_b_bf16: B is null", std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      k::pack_b_bf16(4, 3, b.data(), 3, false, static_cast<k::bf16_bits*>(nullptr)),
      "pack_b_bf16: destination is null", std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::pack_b_bf16(4, 3, b.data(), 2, false, packed.data()),
                       "pack_b_bf16: ldb 2 is less than n = 3", std::invalid_argument);
}
