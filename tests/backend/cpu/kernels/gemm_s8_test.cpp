// The int8 GEMM (kernels/gemm_s8.hpp) against an exact 64-bit integer reference: odd shapes (m, n
// and k not multiples of the 4 x 8 tile or of the 4-byte k groups), both layouts of B, the
// extremes of the types (A all 255 against B all -128 or 127), the dequantizing epilogue with a
// zero point against double arithmetic, threads, and the argument checks; rows quantized to u8, and
// a quantized linear layer within its quantization bound of the f32 one; row quantization giving
// the same bytes on every path, and the one-pass dynamic GEMM (rows quantized as A is packed)
// equal to quantizing first, bit for bit; on this build's instruction set (VNNI, AVX2 or plain
// loops) and on the scalar path.
#include "fusedsl/backend/cpu/kernels/gemm_s8.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "fusedsl/core/quantize.hpp"
#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;

namespace {

struct problem {
  std::ptrdiff_t m, n, kk;
  std::vector<std::uint8_t> a;
  std::vector<std::int8_t> b;  // [k x n]
  problem(std::ptrdiff_t m_, std::ptrdiff_t n_, std::ptrdiff_t k_, unsigned seed)
      : m(m_), n(n_), kk(k_), a(std::size_t(m_ * k_)), b(std::size_t(k_ * n_)) {
    std::mt19937 rng(seed);
    for (auto& x : a) x = std::uint8_t(rng() % 256);
    for (auto& x : b) x = std::int8_t(int(rng() % 256) - 128);
  }
  std::int64_t ref(std::ptrdiff_t i, std::ptrdiff_t j) const {
    std::int64_t s = 0;
    for (std::ptrdiff_t p = 0; p < kk; ++p)
      s += std::int64_t(a[std::size_t(i * kk + p)]) * std::int64_t(b[std::size_t(p * n + j)]);
    return s;
  }
};

struct packed {
  std::vector<std::int8_t> data;
  std::vector<std::int32_t> sums;
  k::packed_b_s8 view;
  packed(const problem& pr, bool trans) {
    data.resize(k::packed_b_s8_bytes(pr.kk, pr.n));
    sums.resize(std::size_t(pr.n));
    std::vector<std::int8_t> bt(pr.b.size());
    if (trans)
      for (std::ptrdiff_t p = 0; p < pr.kk; ++p)
        for (std::ptrdiff_t j = 0; j < pr.n; ++j)
          bt[std::size_t(j * pr.kk + p)] = pr.b[std::size_t(p * pr.n + j)];
    view = k::pack_b_s8(pr.kk, pr.n, trans ? bt.data() : pr.b.data(), trans ? pr.kk : pr.n, trans,
                        data.data(), sums.data());
  }
};

template <class Arch>
void check_exact(const problem& pr, bool trans,
                 fusedsl::cpu::kernels::thread_pool* pool = nullptr) {
  const packed pb(pr, trans);
  std::vector<std::int32_t> c(std::size_t(pr.m * pr.n), -7);
  k::gemm_u8s8_s32<Arch>(pr.m, pr.n, pr.kk, pr.a.data(), pr.kk, pb.view, c.data(), pr.n, pool);
  int wrong = 0;
  for (std::ptrdiff_t i = 0; i < pr.m; ++i)
    for (std::ptrdiff_t j = 0; j < pr.n; ++j)
      wrong += std::int64_t(c[std::size_t(i * pr.n + j)]) != pr.ref(i, j);
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE_TEMPLATE("u8 x s8 GEMM sums exactly on odd shapes, B in either layout", Arch,
                   FUSEDSL_CPU_ARCHS) {
  unsigned seed = 1;
  for (std::ptrdiff_t m : {1, 3, 4, 5, 17})
    for (std::ptrdiff_t n : {1, 7, 8, 9, 33})
      for (std::ptrdiff_t kk : {1, 3, 4, 5, 64, 131}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(kk);
        const problem pr(m, n, kk, seed++);
        check_exact<Arch>(pr, false);
        check_exact<Arch>(pr, seed % 2 == 0);
      }
}

TEST_CASE_TEMPLATE("u8 x s8 GEMM at the types' extremes: 255 * -128 and 255 * 127, no saturation",
                   Arch, FUSEDSL_CPU_ARCHS) {
  for (int bv : {-128, 127}) {
    problem pr(6, 10, 1027, 3);
    for (auto& x : pr.a) x = 255;
    for (auto& x : pr.b) x = std::int8_t(bv);
    const packed pb(pr, false);
    std::vector<std::int32_t> c(std::size_t(pr.m * pr.n));
    k::gemm_u8s8_s32<Arch>(pr.m, pr.n, pr.kk, pr.a.data(), pr.kk, pb.view, c.data(), pr.n);
    for (std::int32_t v : c) CHECK(v == 255 * bv * 1027);
    for (std::int32_t s : pb.sums) CHECK(s == bv * 1027);
  }
}

TEST_CASE_TEMPLATE("the dequantizing epilogue: row and column scales, a zero point, a bias", Arch,
                   FUSEDSL_CPU_ARCHS) {
  const problem pr(13, 21, 75, 9);
  const packed pb(pr, false);
  std::vector<float> a_scale(std::size_t(pr.m)), b_scale(std::size_t(pr.n)),
      bias(std::size_t(pr.n));
  for (std::size_t i = 0; i < a_scale.size(); ++i) a_scale[i] = 0.01f * float(i + 1);
  for (std::size_t j = 0; j < b_scale.size(); ++j) {
    b_scale[j] = 0.002f * float(j + 3);
    bias[j] = 0.5f - 0.1f * float(j);
  }
  for (int zero : {0, 128, 255}) {
    CAPTURE(zero);
    const k::s8_dequant q{a_scale.data(), std::uint8_t(zero), b_scale.data(), bias.data()};
    std::vector<float> c(std::size_t(pr.m * pr.n));
    k::gemm_u8s8_f32<Arch>(pr.m, pr.n, pr.kk, pr.a.data(), pr.kk, pb.view, q, c.data(), pr.n);
    std::vector<double> got, want;
    for (std::ptrdiff_t i = 0; i < pr.m; ++i)
      for (std::ptrdiff_t j = 0; j < pr.n; ++j) {
        std::int64_t s = 0;  // sum over p of (A - zero) * B
        for (std::ptrdiff_t p = 0; p < pr.kk; ++p)
          s += (std::int64_t(pr.a[std::size_t(i * pr.kk + p)]) - zero) *
               std::int64_t(pr.b[std::size_t(p * pr.n + j)]);
        want.push_back(double(a_scale[std::size_t(i)]) * double(b_scale[std::size_t(j)]) *
                           double(s) +
                       double(bias[std::size_t(j)]));
        got.push_back(c[std::size_t(i * pr.n + j)]);
      }
    CHECK(ft::compare(got, want, ft::rel_tol(1e-5)));
  }
}

TEST_CASE("the int8 GEMM on four threads writes what one thread writes") {
  const problem pr(37, 83, 96, 11);
  fusedsl::cpu::kernels::thread_pool pool(4);
  check_exact<k::native_arch>(pr, false, &pool);
}

TEST_CASE("the int8 GEMM names a bad argument") {
  const problem pr(2, 3, 4, 1);
  const packed pb(pr, false);
  std::vector<std::int32_t> c(6);
  CHECK_THROWS_WITH_AS(k::gemm_u8s8_s32(2, 3, 5, pr.a.data(), 5, pb.view, c.data(), 3),
                       "gemm_u8s8_s32: the packed B is 4x3, not k x n = 5x3",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::gemm_u8s8_s32(2, 3, 4, pr.a.data(), 4, pb.view, c.data(), 2),
                       "gemm_u8s8_s32: ldc = 2 < n", std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::gemm_u8s8_s32(2, 3, 4, nullptr, 4, pb.view, c.data(), 3),
                       "gemm_u8s8_s32: A or C is null", std::invalid_argument);
  std::vector<std::int8_t> out(k::packed_b_s8_bytes(4, 3));
  std::vector<std::int32_t> sums(3);
  CHECK_THROWS_WITH_AS(k::pack_b_s8(4, 3, pr.b.data(), 2, false, out.data(), sums.data()),
                       "pack_b_s8: ldb = 2 is less than n = 3", std::invalid_argument);
  CHECK_THROWS_AS(k::pack_b_s8(0, 3, pr.b.data(), 3, false, out.data(), sums.data()),
                  std::invalid_argument);
  const k::s8_dequant none{};
  std::vector<float> cf(6);
  CHECK_THROWS_WITH_AS(k::gemm_u8s8_f32(2, 3, 4, pr.a.data(), 4, pb.view, none, cf.data(), 3),
                       "gemm_u8s8_f32: the row or column scales are null", std::invalid_argument);
}

TEST_CASE("rows quantized to u8 come back within half a step; 0 is exact; inf and NaN saturate") {
  constexpr std::ptrdiff_t m = 5, kk = 37;
  std::vector<float> x(std::size_t(m * kk));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-3.0f, 2.0f);
  for (auto& v : x) v = d(rng);
  for (std::ptrdiff_t p = 0; p < kk; ++p) {
    x[std::size_t(1 * kk + p)] = std::abs(x[std::size_t(1 * kk + p)]);  // row 1: no negatives
    x[std::size_t(2 * kk + p)] = 0.0f;                                  // row 2: zeros
  }
  x[std::size_t(3 * kk + 0)] = 0.0f;
  x[std::size_t(4 * kk + 1)] = std::numeric_limits<float>::infinity();
  x[std::size_t(4 * kk + 2)] = -std::numeric_limits<float>::infinity();
  x[std::size_t(4 * kk + 3)] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::uint8_t> q(x.size()), zero(m);
  std::vector<float> scale(m);
  k::quantize_rows_u8(m, kk, x.data(), kk, q.data(), kk, scale.data(), zero.data());
  CHECK(zero[1] == 0);                       // the range starts at 0
  CHECK(scale[2] == 1.0f);                   // a row of zeros
  CHECK(q[std::size_t(3 * kk)] == zero[3]);  // 0 is exact
  CHECK(q[std::size_t(4 * kk + 1)] == 255);
  CHECK(q[std::size_t(4 * kk + 2)] == 0);
  CHECK(q[std::size_t(4 * kk + 3)] == zero[4]);
  int outside = 0;
  for (std::ptrdiff_t i = 0; i < m; ++i)
    for (std::ptrdiff_t p = 0; p < kk; ++p) {
      const float v = x[std::size_t(i * kk + p)];
      if (!std::isfinite(v)) continue;
      const double back = double(scale[std::size_t(i)]) *
                          (double(q[std::size_t(i * kk + p)]) - double(zero[std::size_t(i)]));
      outside += std::abs(back - double(v)) > 0.5 * double(scale[std::size_t(i)]) * (1 + 1e-5);
    }
  CHECK(outside == 0);
}

TEST_CASE_TEMPLATE("a quantized linear layer is within its quantization bound of the f32 one", Arch,
                   FUSEDSL_CPU_ARCHS) {
  constexpr std::ptrdiff_t m = 13, n = 21, kk = 75;
  std::mt19937 rng(8);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(std::size_t(m * kk)), w(std::size_t(kk * n));
  for (auto& v : x) v = d(rng) + 0.3f;
  for (auto& v : w) v = 0.1f * d(rng);
  // W per output column, symmetric s8
  std::vector<float> b_scale(n);
  std::vector<std::int8_t> w8(w.size());
  for (std::ptrdiff_t j = 0; j < n; ++j) {
    float mx = 0.0f;
    for (std::ptrdiff_t p = 0; p < kk; ++p) mx = std::max(mx, std::abs(w[std::size_t(p * n + j)]));
    b_scale[std::size_t(j)] = mx / 127.0f;
    for (std::ptrdiff_t p = 0; p < kk; ++p)
      w8[std::size_t(p * n + j)] =
          std::int8_t(std::nearbyint(w[std::size_t(p * n + j)] / b_scale[std::size_t(j)]));
  }
  std::vector<std::int8_t> packed(k::packed_b_s8_bytes(kk, n));
  std::vector<std::int32_t> sums(n);
  const auto pb = k::pack_b_s8(kk, n, w8.data(), n, false, packed.data(), sums.data());
  std::vector<std::uint8_t> xq(x.size()), zero(m);
  std::vector<float> a_scale(m), y(std::size_t(m * n));
  k::quantize_rows_u8(m, kk, x.data(), kk, xq.data(), kk, a_scale.data(), zero.data());
  k::s8_dequant dq;
  dq.a_scale = a_scale.data();
  dq.a_zeros = zero.data();
  dq.b_scale = b_scale.data();
  k::gemm_u8s8_f32<Arch>(m, n, kk, xq.data(), kk, pb, dq, y.data(), n);
  int outside = 0;
  for (std::ptrdiff_t i = 0; i < m; ++i)
    for (std::ptrdiff_t j = 0; j < n; ++j) {
      double exact = 0, bound = 0;
      const double sa = a_scale[std::size_t(i)], sb = b_scale[std::size_t(j)];
      for (std::ptrdiff_t p = 0; p < kk; ++p) {
        const double xv = x[std::size_t(i * kk + p)], wv = w[std::size_t(p * n + j)];
        exact += xv * wv;
        bound += std::abs(xv) * sb / 2 + std::abs(wv) * sa / 2 + sa * sb / 4;
      }
      outside += std::abs(double(y[std::size_t(i * n + j)]) - exact) > bound * 1.001 + 1e-5;
    }
  CHECK(outside == 0);
}

namespace {

// Rows of random values with the edge values of quantization mixed in.
std::vector<float> rows_with_edges(std::ptrdiff_t m, std::ptrdiff_t kk, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.5f);
  std::vector<float> x(std::size_t(m * kk));
  for (auto& v : x) v = d(rng);
  const float edges[] = {std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(),
                         -0.0f,
                         std::numeric_limits<float>::denorm_min(),
                         3e38f,
                         -3e38f};
  for (std::size_t e = 0; e < std::size(edges) && std::ptrdiff_t(e) < m * kk; ++e)
    x[std::size_t(rng() % std::size_t(m * kk))] = edges[e];
  if (m > 1)  // a row of zeros, a row without negatives
    for (std::ptrdiff_t p = 0; p < kk; ++p) {
      x[std::size_t(p)] = 0.0f;
      x[std::size_t(kk + p)] = std::abs(d(rng));
    }
  return x;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE_TEMPLATE("rows quantize to the same bytes, scales and zero points on every path", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t kk : {1, 3, 4, 8, 9, 17, 37, 100}) {
    CAPTURE(kk);
    constexpr std::ptrdiff_t m = 9;
    const std::vector<float> x = rows_with_edges(m, kk, unsigned(kk));
    std::vector<std::uint8_t> q(x.size()), q_ref(x.size()), zero(m), zero_ref(m);
    std::vector<float> scale(m), scale_ref(m);
    k::quantize_rows_u8<Arch>(m, kk, x.data(), kk, q.data(), kk, scale.data(), zero.data());
    k::quantize_rows_u8<k::scalar_arch>(m, kk, x.data(), kk, q_ref.data(), kk, scale_ref.data(),
                                        zero_ref.data());
    CHECK(q == q_ref);
    CHECK(zero == zero_ref);
    CHECK(scale == scale_ref);
    // a range wider than FLT_MAX (rows holding 3e38 and -3e38) still has a finite scale
    CHECK(std::all_of(scale.begin(), scale.end(), [](float v) { return std::isfinite(v); }));
  }
}

TEST_CASE_TEMPLATE(
    "the one-pass dynamic GEMM equals quantize_rows_u8 then gemm_u8s8_f32 bit for bit", Arch,
    FUSEDSL_CPU_ARCHS) {
  unsigned seed = 20;
  for (std::ptrdiff_t m : {1, 3, 4, 5, 17})
    for (std::ptrdiff_t n : {1, 7, 9, 33})
      for (std::ptrdiff_t kk : {1, 5, 64, 131}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(kk);
        const problem pr(m, n, kk, seed++);
        const packed pb(pr, seed % 2 == 0);
        const std::vector<float> x = rows_with_edges(m, kk, seed);
        std::vector<float> b_scale(static_cast<std::size_t>(n)), bias(static_cast<std::size_t>(n));
        for (std::ptrdiff_t j = 0; j < n; ++j) {
          b_scale[std::size_t(j)] = 0.001f * float(j + 1);
          bias[std::size_t(j)] = 0.25f * float(j % 5) - 0.5f;
        }
        const float* bias_or_null = seed % 3 == 0 ? nullptr : bias.data();
        std::vector<std::uint8_t> xq(x.size()), zero(static_cast<std::size_t>(m));
        std::vector<float> a_scale(static_cast<std::size_t>(m));
        k::quantize_rows_u8<Arch>(m, kk, x.data(), kk, xq.data(), kk, a_scale.data(), zero.data());
        k::s8_dequant dq;
        dq.a_scale = a_scale.data();
        dq.a_zeros = zero.data();
        dq.b_scale = b_scale.data();
        dq.bias = bias_or_null;
        std::vector<float> want(std::size_t(m * n)),
            got(static_cast<std::size_t>(m * n + 3), -1.0f);
        k::gemm_u8s8_f32<Arch>(m, n, kk, xq.data(), kk, pb.view, dq, want.data(), n);
        k::gemm_dynamic_u8s8_f32<Arch>(m, n, kk, x.data(), kk, pb.view, b_scale.data(), got.data(),
                                       n, k::s8_bias{bias_or_null});
        CHECK(got[std::size_t(m * n)] == -1.0f);  // nothing written past C
        got.resize(std::size_t(m * n));
        CHECK(same_bits(got, want));
      }
}

TEST_CASE(
    "the dynamic GEMM on three threads, with strided A and C, writes what one thread writes") {
  constexpr std::ptrdiff_t m = 37, n = 83, kk = 96, ldx = 101, ldc = 90;
  const problem pr(m, n, kk, 31);
  const packed pb(pr, true);
  std::vector<float> x(static_cast<std::size_t>(m * ldx), std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> dense = rows_with_edges(m, kk, 32);
  for (std::ptrdiff_t i = 0; i < m; ++i)
    for (std::ptrdiff_t p = 0; p < kk; ++p)
      x[std::size_t(i * ldx + p)] = dense[std::size_t(i * kk + p)];
  std::vector<float> b_scale(static_cast<std::size_t>(n), 0.01f);
  std::vector<float> one(static_cast<std::size_t>(m * ldc), 7.0f),
      three(static_cast<std::size_t>(m * ldc), 7.0f);
  k::gemm_dynamic_u8s8_f32(m, n, kk, x.data(), ldx, pb.view, b_scale.data(), one.data(), ldc);
  fusedsl::cpu::kernels::thread_pool pool(3);
  k::gemm_dynamic_u8s8_f32(m, n, kk, x.data(), ldx, pb.view, b_scale.data(), three.data(), ldc,
                           k::s8_bias{}, &pool);
  CHECK(same_bits(one, three));
  int untouched = 0;  // the padding between rows of C stays as it was
  for (std::ptrdiff_t i = 0; i < m; ++i)
    for (std::ptrdiff_t j = n; j < ldc; ++j) untouched += one[std::size_t(i * ldc + j)] == 7.0f;
  CHECK(untouched == m * (ldc - n));
}

TEST_CASE_TEMPLATE("a linear layer with per-channel int8 weights in torch's [out, in] layout", Arch,
                   FUSEDSL_CPU_ARCHS) {
  constexpr std::ptrdiff_t m = 11, n = 19, kk = 67;
  std::mt19937 rng(12);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(std::size_t(m * kk)), w(std::size_t(n * kk)),
      bias(static_cast<std::size_t>(n));
  for (auto& v : x) v = d(rng) - 0.2f;
  for (auto& v : w) v = 0.05f * d(rng);
  for (auto& v : bias) v = d(rng);
  const fusedsl::s8_weight w8 = fusedsl::quantize_s8_per_channel(w, n, kk, 0, "linear.weight");
  std::vector<std::int8_t> packed_w(k::packed_b_s8_bytes(kk, n));
  std::vector<std::int32_t> sums(static_cast<std::size_t>(n));
  const auto pb = k::pack_b_s8(kk, n, w8.values.data(), kk, true, packed_w.data(), sums.data());
  std::vector<float> y(std::size_t(m * n));
  k::gemm_dynamic_u8s8_f32<Arch>(m, n, kk, x.data(), kk, pb, w8.scales.data(), y.data(), n,
                                 k::s8_bias{bias.data()});
  std::vector<std::uint8_t> xq(x.size()), zero(static_cast<std::size_t>(m));
  std::vector<float> a_scale(static_cast<std::size_t>(m));
  k::quantize_rows_u8(m, kk, x.data(), kk, xq.data(), kk, a_scale.data(), zero.data());
  int outside = 0;
  for (std::ptrdiff_t i = 0; i < m; ++i)
    for (std::ptrdiff_t j = 0; j < n; ++j) {
      double exact = bias[std::size_t(j)], bound = 0;
      const double sa = a_scale[std::size_t(i)], sb = w8.scales[std::size_t(j)];
      for (std::ptrdiff_t p = 0; p < kk; ++p) {
        const double xv = x[std::size_t(i * kk + p)], wv = w[std::size_t(j * kk + p)];
        exact += xv * wv;
        bound += std::abs(xv) * sb / 2 + std::abs(wv) * sa / 2 + sa * sb / 4;
      }
      outside += !(std::abs(double(y[std::size_t(i * n + j)]) - exact) <= bound * 1.001 + 1e-5);
    }
  CHECK(outside == 0);
}

namespace {

// An f32 epilogue that shows what it was given: 2x + a residual, plus 1000 i + j.
struct marking_epilogue {
  const float* residual;
  std::ptrdiff_t ld;
  template <class V>
  V operator()(const V& x, std::ptrdiff_t i, std::ptrdiff_t j) const {
    if constexpr (std::is_same_v<V, float>) {
      return 2.0f * x + residual[i * ld + j] + float(1000 * i + j);
    } else {
      alignas(64) float at[V::size];
      for (std::size_t l = 0; l < V::size; ++l) at[l] = float(1000 * i + j + std::ptrdiff_t(l));
      return V(2.0f) * x + V::load_unaligned(residual + i * ld + j) + V::load_aligned(at);
    }
  }
};

}  // namespace

TEST_CASE_TEMPLATE(
    "the dynamic GEMM's epilogue sees each dequantized value with its row and column", Arch,
    FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t n : {5, 8, 19}) {
    CAPTURE(n);
    constexpr std::ptrdiff_t m = 7, kk = 23;
    const problem pr(m, n, kk, unsigned(40 + n));
    const packed pb(pr, false);
    const std::vector<float> x = rows_with_edges(m, kk, unsigned(50 + n));
    std::vector<float> b_scale(static_cast<std::size_t>(n), 0.003f), residual(std::size_t(m * n));
    for (std::size_t i = 0; i < residual.size(); ++i) residual[i] = 0.125f * float(i % 9);
    std::vector<float> plain(std::size_t(m * n)), marked(std::size_t(m * n));
    k::gemm_dynamic_u8s8_f32<Arch>(m, n, kk, x.data(), kk, pb.view, b_scale.data(), plain.data(),
                                   n);
    k::gemm_dynamic_u8s8_f32<Arch>(m, n, kk, x.data(), kk, pb.view, b_scale.data(), marked.data(),
                                   n, marking_epilogue{residual.data(), n});
    int wrong = 0;
    for (std::ptrdiff_t i = 0; i < m; ++i)
      for (std::ptrdiff_t j = 0; j < n; ++j) {
        const std::size_t e = std::size_t(i * n + j);
        wrong += !(marked[e] == 2.0f * plain[e] + residual[e] + float(1000 * i + j));
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("the dynamic GEMM names a bad argument") {
  const problem pr(2, 3, 4, 1);
  const packed pb(pr, false);
  std::vector<float> x(8), c(6), s(3, 1.0f);
  CHECK_THROWS_WITH_AS(
      k::gemm_dynamic_u8s8_f32(2, 3, 4, x.data(), 4, pb.view, nullptr, c.data(), 3),
      "gemm_dynamic_u8s8_f32: the column scales are null", std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      k::gemm_dynamic_u8s8_f32(2, 3, 4, x.data(), 3, pb.view, s.data(), c.data(), 3),
      "gemm_dynamic_u8s8_f32: ldx = 3 < k", std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      k::gemm_dynamic_u8s8_f32(2, 3, 4, nullptr, 4, pb.view, s.data(), c.data(), 3),
      "gemm_dynamic_u8s8_f32: A or C is null", std::invalid_argument);
}
