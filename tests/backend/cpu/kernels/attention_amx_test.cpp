// flash_attention_amx (Q, K, V and P rounded to bf16, f32 accumulation, f32 softmax) against a
// double-precision reference, on the tiles where the build and machine have them (the test says
// which path it checked) and on the portable loops.
//
// Tolerances, per output element (i, h, x), with p_j the exact softmax weights of row i:
//   against softmax(bf16(scale log2(e) Q) bf16(K)^T / log2(e) + mask) bf16(V) in double (P not
//   rounded; the kernel's scores are in base 2, so log2(e) goes into Q before its rounding):
//     |got - want| <= 2^-8 * sum_j p_j |V(j, x)| + 1e-6: P is rounded to bf16 (8 significant
//     bits: up to 2^-8 relative each); the f32 scores and sums move p by ~1e-6 relative more
//   against the f32 attention (nothing rounded): <= 2^-5 * max_j |V(j, x)|, the effect of the
//     bf16 rounding of Q and K on the scores; the measured figure is printed (MESSAGE).
#include "fusedsl/backend/cpu/kernels/attention_amx.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;
using fusedsl_test::random_floats;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

float bf16_round(float x) {
  return k::from_bf16(k::to_bf16(x));
}

// Q, K, V, O in [seq][heads][head_dim] layout (rows padded by 3 floats), an optional mask.
struct case_data {
  k::attention_shape s;
  std::vector<float> q, kk, v, o, mask;
  k::attention_args a;

  case_data(std::ptrdiff_t sq, std::ptrdiff_t skv, std::ptrdiff_t h, std::ptrdiff_t hkv,
            std::ptrdiff_t d, bool causal, bool with_mask, unsigned seed = 31)
      : s{sq, skv, h, hkv, d} {
    const std::ptrdiff_t qs = h * d + 3, ks = hkv * d + 3;
    q = random_floats(std::size_t(sq * qs), seed, -2, 2);
    kk = random_floats(std::size_t(skv * ks), seed + 1, -2, 2);
    v = random_floats(std::size_t(skv * ks), seed + 2);
    o.assign(std::size_t(sq * qs), 99.0f);
    a = k::attention_args_by_rows(s, q.data(), kk.data(), v.data(), o.data(), qs, ks);
    a.causal = causal;
    if (with_mask) {
      mask = random_floats(std::size_t(sq * skv), seed + 3, -3, 1);
      for (std::ptrdiff_t j = 0; j < skv; j += 3) mask[std::size_t(j)] = -inf;  // some -inf
      if (sq > 1)
        for (std::ptrdiff_t j = 0; j < skv; ++j) mask[std::size_t(skv + j)] = -inf;  // row 1 all
      a.mask = mask.data(), a.mask_row_stride = skv;
    }
  }

  // Output (i, h, x) in double, from bf16-rounded operands (`rounded`) or the f32 ones; also the
  // error scale sum_j p_j |V(j, x)| and max_j |V(j, x)| over the keys the row sees.
  struct ref {
    double value = 0, weighted = 0, vmax = 0;
  };
  ref reference(std::ptrdiff_t i, std::ptrdiff_t h, std::ptrdiff_t x, bool rounded) const {
    const std::ptrdiff_t d = s.head_dim, g = h / (s.num_heads / s.num_kv_heads);
    auto r = [&](float f) { return double(rounded ? bf16_round(f) : f); };
    const float scale2 = float(double(a.scale) * k::log2e);  // the kernel's scale of Q
    std::vector<double> sc(std::size_t(s.seq_kv));
    double m = -inf;
    for (std::ptrdiff_t j = 0; j < s.seq_kv; ++j) {
      double dot = 0;
      for (std::ptrdiff_t t = 0; t < d; ++t) {
        const float qv = q[std::size_t(i * a.q_row_stride + h * d + t)];
        dot += (rounded ? double(bf16_round(scale2 * qv)) / k::log2e : double(a.scale) * qv) *
               r(kk[std::size_t(j * a.k_row_stride + g * d + t)]);
      }
      double val = dot + (a.mask ? double(a.mask[i * a.mask_row_stride + j]) : 0.0);
      if (a.causal && j > i + s.seq_kv - s.seq_q) val = -inf;
      sc[std::size_t(j)] = val;
      m = std::max(m, val);
    }
    ref out;
    if (m == -inf) return out;
    double den = 0;
    for (std::ptrdiff_t j = 0; j < s.seq_kv; ++j) den += std::exp(sc[std::size_t(j)] - m);
    for (std::ptrdiff_t j = 0; j < s.seq_kv; ++j) {
      const double p = std::exp(sc[std::size_t(j)] - m) / den;
      const double vj = r(v[std::size_t(j * a.v_row_stride + g * d + x)]);
      out.value += p * vj;
      out.weighted += p * std::fabs(vj);
      if (p > 0) out.vmax = std::max(out.vmax, std::fabs(vj));
    }
    return out;
  }
};

std::vector<float> run(case_data& c, k::amx_mode mode, k::thread_pool* pool = nullptr) {
  std::fill(c.o.begin(), c.o.end(), 99.0f);
  std::vector<k::bf16_bits> ws(
      k::attention_amx_workspace_elements(c.s.head_dim, c.s.seq_kv, pool ? pool->size() : 1));
  k::flash_attention_amx(c.s, c.a, ws.data(), pool, mode);
  return c.o;
}

std::string path_name(k::amx_mode mode) {
  return mode == k::amx_mode::automatic && k::amx_available() ? "AMX tiles" : "portable loops";
}

// Every output element within the bounds in the header comment; the largest errors are printed.
void check(case_data& c, k::amx_mode mode) {
  const std::vector<float> got = run(c, mode);
  // Elements in (query, head, dim) order.
  std::vector<double> o, want, weighted, allowed, exact, vmax, allowed_f32;
  for (std::ptrdiff_t i = 0; i < c.s.seq_q; ++i)
    for (std::ptrdiff_t h = 0; h < c.s.num_heads; ++h)
      for (std::ptrdiff_t x = 0; x < c.s.head_dim; ++x) {
        o.push_back(got[std::size_t(i * c.a.o_row_stride + h * c.s.head_dim + x)]);
        const auto r = c.reference(i, h, x, true), e = c.reference(i, h, x, false);
        want.push_back(r.value), weighted.push_back(r.weighted);
        allowed.push_back(0x1p-8 * r.weighted + 1e-6);
        exact.push_back(e.value), vmax.push_back(e.vmax);
        allowed_f32.push_back(0x1p-5 * e.vmax + 1e-6);
      }
  CHECK(ft::compare_scaled(o, want, allowed, 1.0));
  CHECK(ft::compare_scaled(o, exact, allowed_f32, 1.0));
  const double worst_rounded = ft::compare_scaled(o, want, weighted, 1.0).max_ratio;
  const double worst_f32 = ft::compare_scaled(o, exact, vmax, 1.0).max_ratio;
  // Nothing written past head_dim: the padding floats of each row keep their 99.
  for (std::ptrdiff_t i = 0; i < c.s.seq_q; ++i)
    for (std::ptrdiff_t x = c.s.num_heads * c.s.head_dim; x < c.a.o_row_stride; ++x)
      REQUIRE(got[std::size_t(i * c.a.o_row_stride + x)] == 99.0f);
  MESSAGE(path_name(mode) << ", " << c.s.seq_q << "x" << c.s.seq_kv << " heads " << c.s.num_heads
                          << "/" << c.s.num_kv_heads << " d " << c.s.head_dim
                          << std::string(c.a.causal ? " causal" : "")
                          << std::string(c.a.mask ? " masked" : "")
                          << ": largest error " << worst_rounded
                          << " of sum p|v| (rounded operands), " << worst_f32
                          << " of max|v| (f32 attention)");
}

const k::amx_mode modes[] = {k::amx_mode::automatic, k::amx_mode::portable};

}  // namespace

TEST_CASE("AMX attention matches softmax(QK^T)V on odd sizes and head dims, causal or not") {
  struct shape {
    std::ptrdiff_t sq, skv, h, hkv, d;
  };
  const shape shapes[] = {{1, 1, 1, 1, 32},   {17, 33, 2, 2, 32},  {128, 128, 4, 4, 32},
                          {33, 70, 2, 2, 64}, {40, 45, 1, 1, 40},  {5, 300, 1, 1, 16},
                          {31, 17, 3, 3, 7},  {70, 130, 2, 2, 96}};
  for (const auto mode : modes)
    for (const shape& sh : shapes)
      for (const bool causal : {false, true}) {
        case_data c(sh.sq, sh.skv, sh.h, sh.hkv, sh.d, causal, false);
        check(c, mode);
      }
}

TEST_CASE("AMX attention with grouped and multi-query heads") {
  for (const auto mode : modes) {
    case_data grouped(45, 60, 8, 2, 32, false, false);
    check(grouped, mode);
    case_data mqa(20, 50, 4, 1, 64, true, false);
    check(mqa, mode);
  }
}

TEST_CASE("AMX attention adds the mask; a fully masked query row gives zeros") {
  for (const auto mode : modes) {
    case_data c(20, 37, 2, 1, 32, false, true);
    check(c, mode);
    const std::vector<float> got = run(c, mode);
    for (std::ptrdiff_t x = 0; x < 2 * 32; ++x)  // row 1: every key masked
      CHECK(got[std::size_t(c.a.o_row_stride + x)] == 0.0f);
  }
}

TEST_CASE("AMX attention: a mask of -FLT_MAX weights a fully masked row uniformly") {
  // As softmax(s + mask) does; the base-2 softmax must not overflow the mask to -inf (zeros).
  for (const auto mode : modes) {
    case_data c(20, 37, 2, 1, 32, false, true);
    for (float& m : c.mask) m = m == -inf ? std::numeric_limits<float>::lowest() : m;
    check(c, mode);
    const std::vector<float> got = run(c, mode);
    CHECK(got[std::size_t(c.a.o_row_stride)] != 0.0f);  // row 1: the mean of V's rows
  }
}

TEST_CASE("causal AMX attention with more queries than keys: early queries see nothing") {
  for (const auto mode : modes) {
    case_data c(40, 10, 2, 2, 32, true, false);
    check(c, mode);
    const std::vector<float> got = run(c, mode);
    for (std::ptrdiff_t i = 0; i < 30; ++i)  // query i sees keys j <= i - 30
      for (std::ptrdiff_t x = 0; x < 2 * 32; ++x)
        REQUIRE(got[std::size_t(i * c.a.o_row_stride + x)] == 0.0f);
  }
}

TEST_CASE("AMX attention: a NaN in a query gives a NaN row, an infinite mask value is a mask") {
  for (const auto mode : modes) {
    case_data c(24, 40, 1, 1, 32, false, true);
    c.q[std::size_t(3 * c.a.q_row_stride + 5)] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> got = run(c, mode);
    for (std::ptrdiff_t x = 0; x < 32; ++x) {
      CHECK(std::isnan(got[std::size_t(3 * c.a.o_row_stride + x)]));
      CHECK(std::isfinite(got[std::size_t(4 * c.a.o_row_stride + x)]));
    }
  }
}

TEST_CASE("AMX attention over no keys gives zeros") {
  for (const auto mode : modes) {
    std::vector<float> q(3 * 32, 1.0f), kv(32, 1.0f), o(3 * 32, 99.0f);
    const k::attention_shape s{3, 0, 1, 1, 32};
    k::attention_args a;
    a.q = q.data(), a.q_row_stride = 32, a.k = kv.data(), a.k_row_stride = 32;
    a.v = kv.data(), a.v_row_stride = 32, a.o = o.data(), a.o_row_stride = 32;
    std::vector<k::bf16_bits> ws(k::attention_amx_workspace_elements(32, 0));
    k::flash_attention_amx(s, a, ws.data(), nullptr, mode);
    CHECK(std::all_of(o.begin(), o.end(), [](float x) { return x == 0.0f; }));
  }
}

TEST_CASE("AMX attention results are bitwise identical for 1, 2 and 3 threads") {
  for (const auto mode : modes) {
    case_data c(100, 90, 4, 2, 64, true, true);
    const std::vector<float> one = run(c, mode);
    for (int t : {2, 3}) {
      k::thread_pool pool(t);
      CHECK(run(c, mode, &pool) == one);
    }
  }
}

TEST_CASE("AMX attention rejects bad head counts and a null workspace") {
  case_data c(4, 4, 3, 2, 32, false, false);
  std::vector<k::bf16_bits> ws(k::attention_amx_workspace_elements(32, 4));
  CHECK_THROWS_WITH_AS(k::flash_attention_amx(c.s, c.a, ws.data()),
                       doctest::Contains("num_heads 3 is not a multiple of num_kv_heads 2"),
                       std::invalid_argument);
  case_data ok(4, 4, 2, 2, 32, false, false);
  CHECK_THROWS_WITH_AS(k::flash_attention_amx(ok.s, ok.a, nullptr),
                       doctest::Contains("workspace is null"), std::invalid_argument);
}
