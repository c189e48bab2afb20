#include "fusedsl/backend/cpu/kernels/gemm.hpp"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "reference_activation.hpp"
#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;
using fusedsl_test::random_floats;

namespace {

// A GEMM problem in the kernel's terms, with its double-precision reference.
struct problem {
  std::ptrdiff_t m, n, kk;
  bool trans_a = false, trans_b = false;
  std::ptrdiff_t lda, ldb, ldc;
  std::vector<float> a, b, bias, res;

  problem(std::ptrdiff_t m_, std::ptrdiff_t n_, std::ptrdiff_t k_, bool ta, bool tb,
          std::ptrdiff_t pad = 3)
      : m(m_), n(n_), kk(k_), trans_a(ta), trans_b(tb) {
    lda = (ta ? m : kk) + pad;
    ldb = (tb ? kk : n) + pad;
    ldc = n + pad;
    a = random_floats(std::size_t((ta ? kk : m) * lda), 11);
    b = random_floats(std::size_t((tb ? n : kk) * ldb), 12);
    bias = random_floats(std::size_t(n), 13);
    res = random_floats(std::size_t(m * ldc), 14);
  }
  float A(std::ptrdiff_t i, std::ptrdiff_t p) const {
    return trans_a ? a[std::size_t(p * lda + i)] : a[std::size_t(i * lda + p)];
  }
  float B(std::ptrdiff_t p, std::ptrdiff_t j) const {
    return trans_b ? b[std::size_t(j * ldb + p)] : b[std::size_t(p * ldb + j)];
  }
  // Reference value and an error scale (sum of |terms| through the epilogue).
  std::pair<double, double> want(std::ptrdiff_t i, std::ptrdiff_t j,
                                 const k::gemm_epilogue& ep) const {
    double s = 0, mag = 0;
    for (std::ptrdiff_t p = 0; p < kk; ++p) {
      s += double(A(i, p)) * double(B(p, j));
      mag += std::fabs(double(A(i, p)) * double(B(p, j)));
    }
    double x = ep.scale * s + (ep.bias ? ep.bias[j] : 0.0);
    x = fusedsl_test::reference_activation(ep.act, x);
    if (ep.residual) x += ep.residual[i * ep.ld_residual + j];
    return {x, mag * std::fabs(ep.scale) + 1.0};
  }
};

template <class Arch, class OutT>
std::vector<OutT> run(const problem& pr, const k::gemm_epilogue& ep, k::thread_pool* pool = nullptr,
                      bool* rest_untouched = nullptr) {
  std::vector<float> packed(k::packed_b_floats<Arch>(pr.kk, pr.n) + 1);
  const auto pb = k::pack_b<Arch>(pr.kk, pr.n, pr.b.data(), pr.ldb, pr.trans_b, packed.data());
  std::vector<float> ws(k::gemm_workspace_floats<Arch>(pr.kk, pool ? pool->size() : 1));
  std::vector<OutT> c(std::size_t(pr.m * pr.ldc), OutT(7));
  k::gemm<Arch>(pr.m, pr.n, pr.kk, pr.a.data(), pr.lda, pr.trans_a, pb, c.data(), pr.ldc, ep,
                ws.data(), pool);
  if (rest_untouched) {
    *rest_untouched = true;
    for (std::ptrdiff_t i = 0; i < pr.m; ++i)
      for (std::ptrdiff_t j = pr.n; j < pr.ldc; ++j)
        *rest_untouched &= c[std::size_t(i * pr.ldc + j)] == OutT(7);
  }
  return c;
}

// f32 C within 1e-5 of the reference, relative to the sum of |terms| (+1).
template <class Arch>
void check_f32(const problem& pr, const k::gemm_epilogue& ep) {
  bool untouched = false;
  const auto c = run<Arch, float>(pr, ep, nullptr, &untouched);
  CHECK(untouched);
  std::vector<double> got, want, scale;
  for (std::ptrdiff_t i = 0; i < pr.m; ++i)
    for (std::ptrdiff_t j = 0; j < pr.n; ++j) {
      const auto [w, mag] = pr.want(i, j, ep);
      got.push_back(c[std::size_t(i * pr.ldc + j)]);
      want.push_back(w);
      scale.push_back(mag);
    }
  CHECK(ft::compare_scaled(got, want, scale, 1e-5));
}

}  // namespace

TEST_CASE_TEMPLATE("gemm matches the reference on odd shapes with every transpose", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t m : {1, 7, 13, 33})
    for (std::ptrdiff_t n : {1, 17, 33, 65})
      for (std::ptrdiff_t kk : {1, 7, 64, 127})
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            CAPTURE(m);
            CAPTURE(n);
            CAPTURE(kk);
            CAPTURE(ta);
            CAPTURE(tb);
            check_f32<Arch>(problem(m, n, kk, ta, tb), k::gemm_epilogue{});
          }
}

TEST_CASE_TEMPLATE("gemm applies every epilogue combination", Arch, FUSEDSL_CPU_ARCHS) {
  const problem pr(29, 70, 19, false, true);
  for (auto act : fusedsl_test::all_activations)
    for (bool bias : {false, true})
      for (bool res : {false, true})
        for (float scale : {1.0f, 0.125f}) {
          CAPTURE(fusedsl_test::name_of(act));
          CAPTURE(bias);
          CAPTURE(res);
          CAPTURE(scale);
          k::gemm_epilogue ep;
          ep.act = act, ep.scale = scale;
          if (bias) ep.bias = pr.bias.data();
          if (res) ep.residual = pr.res.data(), ep.ld_residual = pr.ldc;
          check_f32<Arch>(pr, ep);
        }
}

TEST_CASE_TEMPLATE("gemm writes bf16 C rounded from the f32 result", Arch, FUSEDSL_CPU_ARCHS) {
  const problem pr(21, 77, 40, true, false);
  k::gemm_epilogue ep;
  ep.bias = pr.bias.data(), ep.act = fusedsl::graph::op_kind::gelu_tanh;
  const auto c16 = run<Arch, k::bf16_bits>(pr, ep);
  const auto c32 = run<Arch, float>(pr, ep);
  int bad = 0;
  for (std::ptrdiff_t i = 0; i < pr.m; ++i)
    for (std::ptrdiff_t j = 0; j < pr.n; ++j)
      bad += c16[std::size_t(i * pr.ldc + j)] != k::to_bf16(c32[std::size_t(i * pr.ldc + j)]);
  CHECK(bad == 0);
}

TEST_CASE_TEMPLATE("gemm with bf16 weights equals gemm with the same weights widened", Arch,
                   FUSEDSL_CPU_ARCHS) {
  problem pr(13, 40, 33, false, false);
  std::vector<k::bf16_bits> b16(pr.b.size());
  for (std::size_t i = 0; i < pr.b.size(); ++i) {
    b16[i] = k::to_bf16(pr.b[i]);
    pr.b[i] = k::from_bf16(b16[i]);
  }
  std::vector<float> p16(k::packed_b_floats<Arch>(pr.kk, pr.n)), p32(p16.size());
  const auto b_16 = k::pack_b<Arch>(pr.kk, pr.n, b16.data(), pr.ldb, false, p16.data());
  k::pack_b<Arch>(pr.kk, pr.n, pr.b.data(), pr.ldb, false, p32.data());
  CHECK(std::memcmp(p16.data(), p32.data(), p16.size() * sizeof(float)) == 0);
  std::vector<float> ws(k::gemm_workspace_floats<Arch>(pr.kk)), c(std::size_t(pr.m * pr.ldc));
  k::gemm<Arch>(pr.m, pr.n, pr.kk, pr.a.data(), pr.lda, false, b_16, c.data(), pr.ldc, {},
                ws.data());
  const auto want = run<Arch, float>(pr, {});
  for (std::ptrdiff_t i = 0; i < pr.m; ++i)
    for (std::ptrdiff_t j = 0; j < pr.n; ++j)
      CHECK(c[std::size_t(i * pr.ldc + j)] == want[std::size_t(i * pr.ldc + j)]);
}

// The few-row products of a decode step: one row, a tile's worth, 33 rows, a long k (blocked
// through C), an odd n, B read in place or transposed (f(m, k, n, trans_b)).
template <class F>
void for_each_decode_shape(F&& f) {
  for (std::ptrdiff_t m : {1, 5, 12, 33})
    for (std::ptrdiff_t kk : {1, 70, 768})
      for (std::ptrdiff_t n : {77, 200})
        for (bool tb : {false, true}) {
          if (n == 200 && kk != 768) continue;
          CAPTURE(m);
          CAPTURE(kk);
          CAPTURE(n);
          CAPTURE(tb);
          f(m, kk, n, tb);
        }
}

// gemm over B's panels `pb` (any element type) with an epilogue, on one thread and two, gives the
// bits of gemm over f32 panels of pr.b.
template <class Arch, class TB>
void check_same_bits(const problem& pr, const k::packed_b<Arch, TB>& pb) {
  k::gemm_epilogue ep;
  ep.bias = pr.bias.data(), ep.act = fusedsl::graph::op_kind::gelu_tanh;
  ep.residual = pr.res.data(), ep.ld_residual = pr.ldc;
  const auto want = run<Arch, float>(pr, ep);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    k::thread_pool pool(threads);
    std::vector<float> ws(k::gemm_workspace_floats<Arch>(pr.kk, threads));
    std::vector<float> c(std::size_t(pr.m * pr.ldc), 7.0f);
    k::gemm<Arch>(pr.m, pr.n, pr.kk, pr.a.data(), pr.lda, false, pb, c.data(), pr.ldc, ep,
                  ws.data(), &pool);
    CHECK(std::memcmp(c.data(), want.data(), c.size() * sizeof(float)) == 0);
  }
}

TEST_CASE_TEMPLATE("gemm on bf16 panels (widened as loaded) equals gemm on f32 panels, bitwise",
                   Arch, FUSEDSL_CPU_ARCHS) {
  // n = 200 at k = 768 makes f32 panels of B over 512 KiB and bf16 panels under it (both take the
  // streaming order, which the f32 panels' size decides).
  for_each_decode_shape([](std::ptrdiff_t m, std::ptrdiff_t kk, std::ptrdiff_t n, bool tb) {
    problem pr(m, n, kk, false, tb);
    std::vector<k::bf16_bits> b16(pr.b.size());
    for (std::size_t i = 0; i < pr.b.size(); ++i) {
      b16[i] = k::to_bf16(pr.b[i]);
      pr.b[i] = k::from_bf16(b16[i]);
    }
    std::vector<k::bf16_bits> panels(k::packed_b_floats<Arch>(pr.kk, pr.n));
    const auto pb = k::pack_b_bf16_panels<Arch>(pr.kk, pr.n, b16.data(), tb ? 1 : pr.ldb,
                                                tb ? pr.ldb : 1, panels.data());
    check_same_bits<Arch>(pr, pb);
  });
  std::vector<k::bf16_bits> none;
  CHECK_THROWS_AS(k::pack_b_bf16_panels<Arch>(4, 4, nullptr, 4, 1, none.data()),
                  std::invalid_argument);
}

TEST_CASE_TEMPLATE("gemm on int8 panels (widened as loaded) equals gemm on f32 panels, bitwise",
                   Arch, FUSEDSL_CPU_ARCHS) {
  // An int8 weight's values at the types' extremes and in between, read in place or transposed;
  // its f32 panels (pack_b widens once) and its int8 panels give the same bits, and both the
  // product of the widened values.
  for_each_decode_shape([](std::ptrdiff_t m, std::ptrdiff_t kk, std::ptrdiff_t n, bool tb) {
    problem pr(m, n, kk, false, tb);
    std::vector<std::int8_t> b8(pr.b.size());
    for (std::size_t i = 0; i < pr.b.size(); ++i) {
      const int v = i % 11 == 0 ? -128 : i % 13 == 0 ? 127 : int(pr.b[i] * 127.0f);
      b8[i] = std::int8_t(v);
      pr.b[i] = float(v);
    }
    std::vector<std::int8_t> panels(k::packed_b_floats<Arch>(pr.kk, pr.n));
    const auto pb = k::pack_b_s8_panels<Arch>(pr.kk, pr.n, b8.data(), tb ? 1 : pr.ldb,
                                              tb ? pr.ldb : 1, panels.data());
    std::vector<float> widened(k::packed_b_floats<Arch>(pr.kk, pr.n));
    const auto pw = k::pack_b<Arch>(pr.kk, pr.n, b8.data(), pr.ldb, tb, widened.data());
    check_same_bits<Arch>(pr, pb);
    check_same_bits<Arch>(pr, pw);
  });
  std::vector<std::int8_t> none;
  CHECK_THROWS_AS(k::pack_b_s8_panels<Arch>(4, 4, nullptr, 4, 1, none.data()),
                  std::invalid_argument);
}

TEST_CASE_TEMPLATE("gemm with long k sums k blocks through C and applies the epilogue once", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (bool ta : {false, true}) {
    const problem pr(37, 45, 1100, ta, !ta);  // k > 512: three k blocks of 367
    k::gemm_epilogue ep;
    ep.act = fusedsl::graph::op_kind::gelu_tanh, ep.scale = 0.5f, ep.bias = pr.bias.data();
    ep.residual = pr.res.data(), ep.ld_residual = pr.ldc;
    CAPTURE(ta);
    check_f32<Arch>(pr, ep);
    check_f32<Arch>(pr, {});
    k::thread_pool pool(2);
    const auto one = run<Arch, float>(pr, ep), two = run<Arch, float>(pr, ep, &pool);
    CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  }
}

TEST_CASE_TEMPLATE("gemm packs A whose rows are 4 KiB apart and still matches", Arch,
                   FUSEDSL_CPU_ARCHS) {
  problem pr(27, 45, 30, false, false, 1024 - 30);  // lda = 1024 floats
  CHECK(pr.lda == 1024);
  check_f32<Arch>(pr, {});
}

TEST_CASE_TEMPLATE("gemm propagates NaN and infinity", Arch, FUSEDSL_CPU_ARCHS) {
  problem pr(5, 20, 8, false, false);
  pr.a[std::size_t(2 * pr.lda + 3)] = std::numeric_limits<float>::quiet_NaN();  // row 2
  for (auto& x : pr.b) x = std::fabs(x) + 0.5f;
  for (std::ptrdiff_t p = 0; p < pr.kk; ++p) pr.a[std::size_t(4 * pr.lda + p)] = 1.0f;
  pr.a[std::size_t(4 * pr.lda)] = std::numeric_limits<float>::infinity();  // row 4
  k::gemm_epilogue ep;
  ep.act = fusedsl::graph::op_kind::relu;
  const auto c = run<Arch, float>(pr, ep);
  for (std::ptrdiff_t j = 0; j < pr.n; ++j) {
    CHECK(std::isnan(c[std::size_t(2 * pr.ldc + j)]));
    CHECK(c[std::size_t(4 * pr.ldc + j)] == std::numeric_limits<float>::infinity());
    CHECK(std::isfinite(c[std::size_t(1 * pr.ldc + j)]));
  }
}

TEST_CASE_TEMPLATE("gemm results are bitwise identical for 1, 2 and 3 threads", Arch,
                   FUSEDSL_CPU_ARCHS) {
  // Threads take equal ranges of rows, so their panels are cut differently from one thread's
  // (100 rows: 50 + 50 on two threads). k = 50: the B panel stays in L1 (b-outer sweep);
  // k = 300: B panels stream from L2 blocks.
  for (std::ptrdiff_t kk : {std::ptrdiff_t(50), std::ptrdiff_t(300)}) {
    const problem pr(100, 90, kk, false, false);
    k::gemm_epilogue ep;
    ep.act = fusedsl::graph::op_kind::silu, ep.bias = pr.bias.data();
    const auto one = run<Arch, float>(pr, ep);
    for (int t : {2, 3}) {
      k::thread_pool pool(t);
      CAPTURE(kk);
      CAPTURE(t);
      const auto many = run<Arch, float>(pr, ep, &pool);
      CHECK(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(one.data(), run<Arch, float>(pr, ep, &pool).data(),
                        one.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE_TEMPLATE("gemm streams a large B past few rows: it matches, bitwise on any thread count",
                   Arch, FUSEDSL_CPU_ARCHS) {
  // B of 512 KiB or more past at most 12 tiles of rows runs in the streaming order (panels split
  // across threads, the next panel prefetched by the tiles of this one, k never blocked): one row,
  // a tile's worth, tails, 144 rows (12 AVX-512 tiles), A in place or transposed, a long k, an
  // epilogue with every part.
  struct shape {
    std::ptrdiff_t m, n, kk;
  };
  for (const shape sh : {shape{1, 600, 300}, shape{5, 600, 300}, shape{13, 600, 300},
                         shape{32, 600, 300}, shape{144, 600, 300}, shape{20, 200, 700}})
    for (bool ta : {false, true}) {
      CAPTURE(sh.m);
      CAPTURE(sh.n);
      CAPTURE(sh.kk);
      CAPTURE(ta);
      const problem pr(sh.m, sh.n, sh.kk, ta, false);
      REQUIRE(k::packed_b_floats<Arch>(pr.kk, pr.n) * sizeof(float) >= (std::size_t(1) << 19));
      k::gemm_epilogue ep;
      ep.act = fusedsl::graph::op_kind::gelu_tanh, ep.scale = 0.5f, ep.bias = pr.bias.data();
      ep.residual = pr.res.data(), ep.ld_residual = pr.ldc;
      check_f32<Arch>(pr, ep);
      const auto one = run<Arch, float>(pr, ep);
      for (int t : {2, 3}) {
        CAPTURE(t);
        k::thread_pool pool(t);
        bool untouched = false;
        const auto many = run<Arch, float>(pr, ep, &pool, &untouched);
        CHECK(untouched);
        CHECK(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
      }
    }
}

TEST_CASE("gemm with k = 0 gives the epilogue of zero") {
  const float bias[3] = {1, -2, 3};
  std::vector<float> packed(1), ws(k::gemm_workspace_floats(0)), c(6, 9.0f);
  const auto pb = k::pack_b(0, 3, static_cast<const float*>(nullptr), 3, false, packed.data());
  k::gemm_epilogue ep;
  ep.bias = bias, ep.act = fusedsl::graph::op_kind::relu;
  k::gemm(2, 3, 0, static_cast<const float*>(nullptr), 0, false, pb, c.data(), 3, ep, ws.data());
  CHECK(c == std::vector<float>{1, 0, 3, 1, 0, 3});
}

TEST_CASE("gemm rejects a packed B of the wrong shape, a null A or workspace and a short ldc") {
  std::vector<float> b(12), packed(k::packed_b_floats(4, 3)), a(8), c(6), ws(64);
  const auto pb = k::pack_b(4, 3, b.data(), 3, false, packed.data());
  CHECK_THROWS_WITH_AS(k::gemm(2, 3, 5, a.data(), 5, false, pb, c.data(), 3, {}, ws.data()),
                       doctest::Contains("packed B is 4x3"), std::invalid_argument);
  CHECK_THROWS_AS(k::gemm(2, 3, 4, a.data(), 4, false, pb, c.data(), 3, {}, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(k::gemm(2, 3, 4, a.data(), 4, false, pb, c.data(), 2, {}, ws.data()),
                  std::invalid_argument);
  CHECK_THROWS_AS(k::pack_b(-1, 3, b.data(), 3, false, packed.data()), std::invalid_argument);
  CHECK_THROWS_WITH_AS(k::gemm(2, 3, 4, nullptr, 4, false, pb, c.data(), 3, {}, ws.data()),
                       doctest::Contains("A is null"), std::invalid_argument);
}

TEST_CASE("the GEMM's activations are the op table's activation rows; another op is refused") {
  CHECK(k::gemm_activation_names() == "tanh, sigmoid, relu, gelu_erf, gelu_tanh, silu");
  CHECK(fusedsl_test::all_activations.size() == 7);  // none and the six
  std::vector<float> b(12), packed(k::packed_b_floats(4, 3)), a(8), c(6), ws(64);
  const auto pb = k::pack_b(4, 3, b.data(), 3, false, packed.data());
  k::gemm_epilogue ep;
  ep.act = fusedsl::graph::op_kind::exp;  // an elementwise op, but no standard activation
  CHECK_THROWS_WITH_AS(k::gemm(2, 3, 4, a.data(), 4, false, pb, c.data(), 3, ep, ws.data()),
                       "gemm: activation exp is not one of tanh, sigmoid, relu, gelu_erf, "
                       "gelu_tanh, silu",
                       std::invalid_argument);
}

namespace {

// A pair epilogue: the two products' sums multiplied (Heavy: staged in L1 first, as a
// transcendental epilogue would be).
template <bool Heavy>
struct product_pair {
  static constexpr bool heavy = Heavy, paired = true;
  template <class V>
  V operator()(const V& g, const V& u, std::ptrdiff_t, std::ptrdiff_t) const {
    return g * u;
  }
};

}  // namespace

TEST_CASE_TEMPLATE("gemm_pair_with equals two gemms and the epilogue on their results, bitwise",
                   Arch, FUSEDSL_CPU_ARCHS) {
  // Odd shapes (a tile's rows and a tail; half-panels and an edge), B in place or transposed,
  // f32 and bf16 panels, f32 and bf16 C, one thread or two, a staged (heavy) epilogue.
  for (std::ptrdiff_t m : {1, 7, 13, 33})
    for (std::ptrdiff_t n : {1, 17, 33, 65})
      for (std::ptrdiff_t kk : {1, 64, 127, 300})
        for (bool tb : {false, true}) {
          CAPTURE(m);
          CAPTURE(n);
          CAPTURE(kk);
          CAPTURE(tb);
          problem gate(m, n, kk, false, tb), up(m, n, kk, false, tb);
          up.b = random_floats(up.b.size(), 21);
          std::vector<k::bf16_bits> g16(gate.b.size()), u16(up.b.size());
          for (std::size_t i = 0; i < g16.size(); ++i) {
            g16[i] = k::to_bf16(gate.b[i]), gate.b[i] = k::from_bf16(g16[i]);
            u16[i] = k::to_bf16(up.b[i]), up.b[i] = k::from_bf16(u16[i]);
          }
          const auto g = run<Arch, float>(gate, {}), u = run<Arch, float>(up, {});
          const std::ptrdiff_t sk = tb ? 1 : gate.ldb, sn = tb ? gate.ldb : 1;
          std::vector<float> p32(k::packed_b_floats<Arch>(kk, 2 * n));
          std::vector<k::bf16_bits> p16(p32.size());
          k::pack_b_pair_half<Arch>(kk, n, gate.b.data(), sk, sn, 0, p32.data());
          k::pack_b_pair_half<Arch>(kk, n, up.b.data(), sk, sn, 1, p32.data());
          k::pack_b_pair_half<Arch>(kk, n, g16.data(), sk, sn, 0, p16.data());
          k::pack_b_pair_half<Arch>(kk, n, u16.data(), sk, sn, 1, p16.data());
          const k::packed_b<Arch> b32{p32.data(), kk, 2 * n};
          const k::packed_b<Arch, k::bf16_bits> b16{p16.data(), kk, 2 * n};
          for (int threads : {1, 2}) {
            CAPTURE(threads);
            k::thread_pool pool(threads);
            std::vector<float> ws(k::gemm_workspace_floats<Arch>(kk, threads));
            std::vector<float> c(std::size_t(m * gate.ldc), 7.0f), c16(c.size(), 7.0f);
            std::vector<k::bf16_bits> cb(c.size(), 7);
            k::gemm_pair_with<Arch>(m, n, kk, gate.a.data(), gate.lda, false, b32, c.data(),
                                    gate.ldc, product_pair<false>{}, ws.data(), &pool);
            k::gemm_pair_with<Arch>(m, n, kk, gate.a.data(), gate.lda, false, b16, c16.data(),
                                    gate.ldc, product_pair<true>{}, ws.data(), &pool);
            k::gemm_pair_with<Arch>(m, n, kk, gate.a.data(), gate.lda, false, b32, cb.data(),
                                    gate.ldc, product_pair<true>{}, ws.data(), &pool);
            int bad = 0;
            for (std::ptrdiff_t i = 0; i < m; ++i)
              for (std::ptrdiff_t j = 0; j < gate.ldc; ++j) {
                const std::size_t at = std::size_t(i * gate.ldc + j);
                if (j >= n) {  // past n: untouched
                  bad += c[at] != 7.0f || c16[at] != 7.0f || cb[at] != 7;
                  continue;
                }
                const float want = g[at] * u[at];
                bad += std::memcmp(&c[at], &want, sizeof(float)) != 0;
                bad += std::memcmp(&c16[at], &want, sizeof(float)) != 0;
                bad += cb[at] != k::to_bf16(want);
              }
            CHECK(bad == 0);
          }
        }
}

TEST_CASE_TEMPLATE("gemm_pair_with over a large B (the streaming order) equals two gemms, bitwise",
                   Arch, FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t m : {1, 32}) {
    CAPTURE(m);
    // Gate and up of 550 columns each over the same rows: panels of 1.3 MB.
    const std::ptrdiff_t n = 550;
    problem gate(m, n, 300, false, false), up(m, n, 300, false, false);
    up.b = random_floats(up.b.size(), 22);
    const auto g = run<Arch, float>(gate, {}), u = run<Arch, float>(up, {});
    std::vector<float> p32(k::packed_b_floats<Arch>(300, 2 * n));
    k::pack_b_pair_half<Arch>(300, n, gate.b.data(), gate.ldb, 1, 0, p32.data());
    k::pack_b_pair_half<Arch>(300, n, up.b.data(), up.ldb, 1, 1, p32.data());
    const k::packed_b<Arch> b32{p32.data(), 300, 2 * n};
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      k::thread_pool pool(threads);
      std::vector<float> ws(k::gemm_workspace_floats<Arch>(300, threads));
      std::vector<float> c(std::size_t(m * gate.ldc), 7.0f);
      k::gemm_pair_with<Arch>(m, n, 300, gate.a.data(), gate.lda, false, b32, c.data(), gate.ldc,
                              product_pair<true>{}, ws.data(), &pool);
      int bad = 0;
      for (std::ptrdiff_t i = 0; i < m; ++i)
        for (std::ptrdiff_t j = 0; j < n; ++j) {
          const std::size_t at = std::size_t(i * gate.ldc + j);
          const float want_ij = g[at] * u[at];
          bad += std::memcmp(&c[at], &want_ij, sizeof(float)) != 0;
        }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("gemm_pair_with propagates NaN and infinity from either product") {
  const std::ptrdiff_t m = 3, n = 5, kk = 4;
  std::vector<float> a(std::size_t(m * kk), 1.0f), bg(std::size_t(kk * n), 0.5f),
      bu(std::size_t(kk * n), 0.25f);
  a[0] = std::numeric_limits<float>::quiet_NaN();  // row 0: NaN in both products
  bg[1] = std::numeric_limits<float>::infinity();  // column 1 of gate: +inf in rows 1, 2
  bu[2] = -std::numeric_limits<float>::infinity();  // column 2 of up: -inf
  std::vector<float> packed(k::packed_b_floats(kk, 2 * n)), ws(k::gemm_workspace_floats(kk)),
      c(std::size_t(m * n));
  k::pack_b_pair_half(kk, n, bg.data(), n, 1, 0, packed.data());
  k::pack_b_pair_half(kk, n, bu.data(), n, 1, 1, packed.data());
  k::gemm_pair_with(m, n, kk, a.data(), kk, false, k::packed_b<>{packed.data(), kk, 2 * n},
                    c.data(), n, product_pair<false>{}, ws.data());
  for (std::ptrdiff_t j = 0; j < n; ++j) CHECK(std::isnan(c[std::size_t(j)]));
  CHECK(c[std::size_t(n + 1)] == std::numeric_limits<float>::infinity());   // +inf * 1
  CHECK(c[std::size_t(n + 2)] == -std::numeric_limits<float>::infinity());  // 2 * -inf
  CHECK(c[std::size_t(n + 0)] == 2.0f);                                     // 2 * 1
}

TEST_CASE("gemm_pair_with rejects panels of the wrong shape, and pack_b_pair_half a bad half") {
  std::vector<float> b(12), packed(k::packed_b_floats(4, 6)), a(8), c(6), ws(64);
  k::pack_b_pair_half(4, 3, b.data(), 3, 1, 0, packed.data());
  CHECK_THROWS_WITH_AS(k::pack_b_pair_half(4, 3, b.data(), 3, 1, 2, packed.data()),
                       doctest::Contains("half must be 0 or 1"), std::invalid_argument);
  CHECK_THROWS_AS(k::pack_b_pair_half(4, 3, static_cast<const float*>(nullptr), 3, 1, 0,
                                      packed.data()),
                  std::invalid_argument);
  const k::packed_b<> one_weight{packed.data(), 4, 3};  // a plain B, not a pair's panels
  CHECK_THROWS_WITH_AS(k::gemm_pair_with(2, 3, 4, a.data(), 4, false, one_weight, c.data(), 3,
                                         product_pair<false>{}, ws.data()),
                       doctest::Contains("the pair needs 4x6"), std::invalid_argument);
  const k::packed_b<> pair{packed.data(), 4, 6};
  CHECK_THROWS_AS(k::gemm_pair_with(2, 3, 4, a.data(), 4, false, pair, c.data(), 2,
                                    product_pair<false>{}, ws.data()),
                  std::invalid_argument);
}
