#include "fusedsl/backend/cpu/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;
using fusedsl_test::random_floats;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

// Q, K, V, O in [seq][heads][head_dim] layout plus an optional mask, and the plain reference.
struct case_data {
  k::attention_shape s;
  std::vector<float> q, kk, v, o, mask;
  k::attention_args a;

  case_data(std::ptrdiff_t sq, std::ptrdiff_t skv, std::ptrdiff_t h, std::ptrdiff_t hkv,
            std::ptrdiff_t d, bool causal, bool with_mask)
      : s{sq, skv, h, hkv, d} {
    q = random_floats(std::size_t(sq * h * d), 21, -2, 2);
    kk = random_floats(std::size_t(skv * hkv * d), 22, -2, 2);
    v = random_floats(std::size_t(skv * hkv * d), 23);
    o.assign(std::size_t(sq * h * d), 99.0f);
    a = k::attention_args_by_rows(s, q.data(), kk.data(), v.data(), o.data(), h * d, hkv * d);
    a.causal = causal;
    if (with_mask) {
      mask = random_floats(std::size_t(sq * skv), 24, -3, 1);
      for (std::ptrdiff_t j = 0; j < skv; j += 3) mask[std::size_t(j)] = -inf;  // some -inf
      if (sq > 1)
        for (std::ptrdiff_t j = 0; j < skv; ++j) mask[std::size_t(skv + j)] = -inf;  // row 1 all
      a.mask = mask.data(), a.mask_row_stride = skv;
    }
  }

  // The plain reference, every output element in [seq][heads][head_dim] order: each query and
  // head's scores and softmax once, then its weighted sum of V for every x.
  std::vector<double> reference() const {
    const std::ptrdiff_t d = s.head_dim;
    std::vector<double> out(std::size_t(s.seq_q * s.num_heads * d), 0.0);
    std::vector<double> sc(static_cast<std::size_t>(s.seq_kv)), num(static_cast<std::size_t>(d));
    for (std::ptrdiff_t i = 0; i < s.seq_q; ++i)
      for (std::ptrdiff_t h = 0; h < s.num_heads; ++h) {
        const std::ptrdiff_t g = h / (s.num_heads / s.num_kv_heads);
        double m = -inf;
        for (std::ptrdiff_t j = 0; j < s.seq_kv; ++j) {
          double dot = 0;
          for (std::ptrdiff_t t = 0; t < d; ++t)
            dot += double(q[std::size_t(i * a.q_row_stride + h * d + t)]) *
                   kk[std::size_t(j * a.k_row_stride + g * d + t)];
          double val = dot * a.scale + (a.mask ? double(a.mask[i * a.mask_row_stride + j]) : 0.0);
          if (a.causal && j > i + s.seq_kv - s.seq_q) val = -inf;
          sc[std::size_t(j)] = val;
          m = std::max(m, val);
        }
        if (m == -inf) continue;  // nothing seen: zeros
        double den = 0;
        std::fill(num.begin(), num.end(), 0.0);
        for (std::ptrdiff_t j = 0; j < s.seq_kv; ++j) {
          const double p = std::exp(sc[std::size_t(j)] - m);
          den += p;
          for (std::ptrdiff_t x = 0; x < d; ++x)
            num[std::size_t(x)] += p * v[std::size_t(j * a.v_row_stride + g * d + x)];
        }
        for (std::ptrdiff_t x = 0; x < d; ++x)
          out[std::size_t((i * s.num_heads + h) * d + x)] = num[std::size_t(x)] / den;
      }
    return out;
  }
};

template <class Arch>
std::vector<float> run(case_data& c, k::thread_pool* pool = nullptr,
                       k::attention_path path = k::attention_path::automatic) {
  std::fill(c.o.begin(), c.o.end(), 99.0f);
  std::vector<float> ws(k::attention_workspace_floats<Arch>(c.s.head_dim, pool ? pool->size() : 1));
  k::flash_attention<Arch>(c.s, c.a, ws.data(), pool, path);
  return c.o;
}

// The paths that apply to a case: flash always, whole_rows for short key sequences, decode for a
// few queries.
std::vector<k::attention_path> paths_for(const case_data& c) {
  std::vector<k::attention_path> paths{k::attention_path::flash};
  if (c.s.seq_kv <= k::whole_rows_max_kv) paths.push_back(k::attention_path::whole_rows);
  if (c.s.seq_q <= k::decode_max_queries) paths.push_back(k::attention_path::decode);
  return paths;
}

// O within 1e-5 absolute of the reference (|V| <= 1, so O is too: a relative-to-range bound), on
// every path that applies.
template <class Arch>
void check(case_data& c) {
  const std::vector<double> want = c.reference();
  for (const k::attention_path path : paths_for(c)) {
    CAPTURE(int(path));
    const auto o = run<Arch>(c, nullptr, path);
    std::vector<double> got;
    for (std::ptrdiff_t i = 0; i < c.s.seq_q; ++i)
      for (std::ptrdiff_t h = 0; h < c.s.num_heads; ++h)
        for (std::ptrdiff_t x = 0; x < c.s.head_dim; ++x)
          got.push_back(o[std::size_t(i * c.a.o_row_stride + h * c.s.head_dim + x)]);
    CHECK(ft::compare(got, want, ft::abs_tol(1e-5)));
  }
}

}  // namespace

TEST_CASE_TEMPLATE("flash attention matches softmax(QK^T)V on odd sizes, causal or not", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t sq : {1, 17, 100, 200})
    for (std::ptrdiff_t skv : {1, 33, 130})  // both paths
      for (std::ptrdiff_t d : {8, 17, 64})
        for (bool causal : {false, true}) {
          CAPTURE(sq);
          CAPTURE(skv);
          CAPTURE(d);
          CAPTURE(causal);
          case_data c(sq, skv, 2, 2, d, causal, false);
          check<Arch>(c);
        }
}

TEST_CASE_TEMPLATE("flash attention with grouped and multi-query heads", Arch, FUSEDSL_CPU_ARCHS) {
  for (const std::pair<int, int>& heads : {std::pair{4, 2}, std::pair{4, 1}, std::pair{3, 3}}) {
    const int h = heads.first, hkv = heads.second;  // not a structured binding: clang 14 can't
                                                    // capture one in CAPTURE's lambda
    CAPTURE(h);
    CAPTURE(hkv);
    case_data c(70, 90, h, hkv, 32, true, false);
    check<Arch>(c);
  }
}

TEST_CASE_TEMPLATE("flash attention adds the mask; a fully masked query row gives zeros", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (bool causal : {false, true}) {
    case_data c(50, 150, 2, 1, 16, causal, true);
    check<Arch>(c);
    for (const k::attention_path path : paths_for(c)) {
      const auto o = run<Arch>(c, nullptr, path);
      for (std::ptrdiff_t x = 0; x < 2 * 16; ++x) CHECK(o[std::size_t(1 * 2 * 16 + x)] == 0.0f);
    }
  }
}

TEST_CASE_TEMPLATE("a mask of -FLT_MAX weights a fully masked row uniformly, as the reference does",
                   Arch, FUSEDSL_CPU_ARCHS) {
  // Frameworks often mask with the lowest finite value rather than -inf; softmax(s + mask) then
  // sees equal scores in a fully masked row and averages its V rows. The kernels add the mask in
  // base 2 (times log2(e)), which must not overflow it to -inf (that would give zeros).
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    case_data c(30, 70, 2, 1, 16, causal, true);
    const float lowest = std::numeric_limits<float>::lowest();
    for (float& m : c.mask) m = m == -inf ? lowest : m;  // row 1 all, every third key elsewhere
    for (std::ptrdiff_t j = 0; j < c.s.seq_kv; ++j) c.mask[std::size_t(2 * c.s.seq_kv + j)] = 3e38f;
    check<Arch>(c);
    for (const k::attention_path path : paths_for(c)) {
      const auto o = run<Arch>(c, nullptr, path);
      CHECK(o[std::size_t(1 * c.a.o_row_stride)] != 0.0f);  // row 1: the mean of V's rows seen
    }
  }
}

TEST_CASE_TEMPLATE("a NaN in a query gives that query a NaN row, on both paths", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (bool with_mask : {false, true}) {
    case_data c(24, 40, 2, 2, 32, false, with_mask);
    c.q[std::size_t(3 * c.a.q_row_stride + 5)] = std::numeric_limits<float>::quiet_NaN();
    for (const k::attention_path path : paths_for(c)) {
      const auto o = run<Arch>(c, nullptr, path);
      for (std::ptrdiff_t x = 0; x < 32; ++x) {
        CHECK(std::isnan(o[std::size_t(3 * c.a.o_row_stride + x)]));          // head 0 of query 3
        CHECK(std::isfinite(o[std::size_t(3 * c.a.o_row_stride + 32 + x)]));  // head 1
        CHECK(std::isfinite(o[std::size_t(4 * c.a.o_row_stride + x)]));
      }
    }
  }
}

TEST_CASE_TEMPLATE("causal attention with more queries than keys: early queries see nothing", Arch,
                   FUSEDSL_CPU_ARCHS) {
  case_data c(40, 25, 1, 1, 16, true, false);
  check<Arch>(c);
  for (const k::attention_path path : paths_for(c)) {
    const auto o = run<Arch>(c, nullptr, path);
    for (std::ptrdiff_t x = 0; x < 16; ++x) CHECK(o[std::size_t(x)] == 0.0f);  // query 0
  }
}

TEST_CASE_TEMPLATE("flash attention results are bitwise identical for 1, 2 and 3 threads", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t l : {300, 200}) {  // flash; whole_rows
    CAPTURE(l);
    case_data c(l, l, 3, 1, 64, true, false);
    const auto one = run<Arch>(c);
    for (int t : {2, 3}) {
      k::thread_pool pool(t);
      const auto many = run<Arch>(c, &pool);
      CHECK(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE_TEMPLATE("attention at the whole_rows limit (512 keys) and at the seed's shape", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    case_data at_limit(13, k::whole_rows_max_kv, 2, 1, 32, causal, true);
    check<Arch>(at_limit);
    case_data seed(128, 128, 4, 4, 32, causal, false);
    check<Arch>(seed);
  }
}

TEST_CASE_TEMPLATE("decode attention (a few queries) over chunks and splits of the keys", Arch,
                   FUSEDSL_CPU_ARCHS) {
  // 256 keys a chunk, 512 a split: lengths on either side of both, heads of odd sizes, grouped.
  for (std::ptrdiff_t sq : {1, 2, 4})
    for (std::ptrdiff_t skv : {1, 5, 255, 256, 257, 600, 1023, 2100})
      for (std::ptrdiff_t d : {17, 64, 80})
        for (bool causal : {false, true}) {
          CAPTURE(sq);
          CAPTURE(skv);
          CAPTURE(d);
          CAPTURE(causal);
          case_data c(sq, skv, 4, 2, d, causal, skv % 2 == 1);
          check<Arch>(c);
        }
}

TEST_CASE_TEMPLATE("decode attention: masked rows, -FLT_MAX masks and NaN across splits", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    case_data c(3, 1100, 2, 1, 16, causal, true);  // query 1's keys all masked (-inf)
    check<Arch>(c);
    auto o = run<Arch>(c, nullptr, k::attention_path::decode);
    for (std::ptrdiff_t x = 0; x < 2 * 16; ++x) CHECK(o[std::size_t(c.a.o_row_stride + x)] == 0.0f);
    const float lowest = std::numeric_limits<float>::lowest();
    for (float& m : c.mask) m = m == -inf ? lowest : m;
    check<Arch>(c);
    o = run<Arch>(c, nullptr, k::attention_path::decode);
    CHECK(o[std::size_t(c.a.o_row_stride)] != 0.0f);  // the mean of the V rows it sees
    // A NaN key in the second split: every query that sees it gets NaN, in every head reading it.
    c.kk[std::size_t(700 * c.a.k_row_stride + 3)] = std::numeric_limits<float>::quiet_NaN();
    o = run<Arch>(c, nullptr, k::attention_path::decode);
    for (std::ptrdiff_t x = 0; x < 16; ++x) {
      CHECK(std::isnan(o[std::size_t(x)]));
      CHECK(std::isnan(o[std::size_t(2 * c.a.o_row_stride + 16 + x)]));
    }
  }
}

TEST_CASE_TEMPLATE("decode attention is bitwise identical for 1, 2 and 3 threads", Arch,
                   FUSEDSL_CPU_ARCHS) {
  for (std::ptrdiff_t l : {1500, 300}) {  // four splits; one
    CAPTURE(l);
    case_data c(1, l, 3, 1, 64, true, false);
    const auto one = run<Arch>(c);
    for (int t : {2, 3}) {
      k::thread_pool pool(t);
      const auto many = run<Arch>(c, &pool);
      CHECK(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE_TEMPLATE("decode attention reads bf16 K and V in place: the f32 path's bits on them",
                   Arch, FUSEDSL_CPU_ARCHS) {
  // A bf16 KV cache: K and V read as bf16 and widened as loaded give exactly what the f32 path
  // gives on the same values widened first, on every chunk and split and for odd head sizes;
  // inf and NaN in K and V included.
  for (std::ptrdiff_t sq : {1, 3})
    for (std::ptrdiff_t skv : {1, 257, 1100})
      for (std::ptrdiff_t d : {17, 64})
        for (bool causal : {false, true}) {
          CAPTURE(sq);
          CAPTURE(skv);
          CAPTURE(d);
          CAPTURE(causal);
          case_data c(sq, skv, 4, 2, d, causal, skv % 2 == 1);
          if (skv > 300) {
            c.kk[std::size_t(290 * c.a.k_row_stride + 1)] = std::numeric_limits<float>::quiet_NaN();
            c.v[std::size_t(3 * c.a.v_row_stride + d + 2)] = inf;  // kv head 1
          }
          std::vector<k::bf16_bits> k16(c.kk.size()), v16(c.v.size());
          for (std::size_t i = 0; i < c.kk.size(); ++i)
            k16[i] = k::to_bf16(c.kk[i]), c.kk[i] = k::from_bf16(k16[i]);
          for (std::size_t i = 0; i < c.v.size(); ++i)
            v16[i] = k::to_bf16(c.v[i]), c.v[i] = k::from_bf16(v16[i]);
          const auto widened = run<Arch>(c);
          c.a.k = nullptr, c.a.v = nullptr, c.a.k_bf16 = k16.data(), c.a.v_bf16 = v16.data();
          const auto in_place = run<Arch>(c, nullptr, k::attention_path::decode);
          CHECK(std::memcmp(widened.data(), in_place.data(), widened.size() * sizeof(float)) == 0);
        }
}

TEST_CASE("bf16 K and V: both or neither, and only on the decode path") {
  case_data c(2, 8, 1, 1, 8, false, false);
  std::vector<k::bf16_bits> k16(c.kk.size()), v16(c.v.size());
  std::vector<float> ws(k::attention_workspace_floats(8));
  c.a.k_bf16 = k16.data();
  CHECK_THROWS_WITH_AS(k::flash_attention(c.s, c.a, ws.data()),
                       doctest::Contains("give k and v as f32 or both as bf16"),
                       std::invalid_argument);
  c.a.k = nullptr, c.a.v = nullptr, c.a.v_bf16 = v16.data();
  CHECK_NOTHROW(k::flash_attention(c.s, c.a, ws.data()));
  CHECK_THROWS_WITH_AS(k::flash_attention(c.s, c.a, ws.data(), nullptr, k::attention_path::flash),
                       doctest::Contains("decode path only"), std::invalid_argument);
  c.s.seq_q = k::decode_max_queries + 1;
  c.q.resize(std::size_t(c.s.seq_q * 8)), c.o.resize(c.q.size());
  c.a.q = c.q.data(), c.a.o = c.o.data();
  CHECK_THROWS_WITH_AS(k::flash_attention(c.s, c.a, ws.data()),
                       doctest::Contains("read by the decode path only (seq_q <= 4, got 5)"),
                       std::invalid_argument);
}

TEST_CASE("the decode attention path refuses more queries than it takes") {
  case_data c(k::decode_max_queries + 1, 8, 1, 1, 8, false, false);
  std::vector<float> ws(k::attention_workspace_floats(8));
  CHECK_THROWS_WITH_AS(k::flash_attention(c.s, c.a, ws.data(), nullptr, k::attention_path::decode),
                       doctest::Contains("decode path takes seq_q <= 4, got 5"),
                       std::invalid_argument);
}

TEST_CASE("the whole_rows attention path refuses more keys than it holds") {
  case_data c(4, k::whole_rows_max_kv + 1, 1, 1, 8, false, false);
  std::vector<float> ws(k::attention_workspace_floats(8));
  CHECK_THROWS_WITH_AS(
      k::flash_attention(c.s, c.a, ws.data(), nullptr, k::attention_path::whole_rows),
      doctest::Contains("whole_rows path takes seq_kv <= 512"), std::invalid_argument);
  CHECK_NOTHROW(k::flash_attention(c.s, c.a, ws.data(), nullptr, k::attention_path::automatic));
}

TEST_CASE("an instantiation with the paths its shapes take gives the full one's bits") {
  // attention_paths_for: a few queries take decode alone; more take whole_rows, and flash only
  // past whole_rows_max_kv keys.
  static_assert(k::attention_paths_for(k::decode_max_queries, 4096).decode);
  static_assert(!k::attention_paths_for(k::decode_max_queries, 4096).flash);
  static_assert(!k::attention_paths_for(k::decode_max_queries + 1, 64).decode);
  static_assert(!k::attention_paths_for(k::decode_max_queries + 1, k::whole_rows_max_kv).flash);
  static_assert(k::attention_paths_for(k::decode_max_queries + 1, k::whole_rows_max_kv + 1).flash);
  using Arch = k::native_arch;
  const auto same_bits = [](case_data& c, auto restricted) {
    const std::vector<float> full = run<Arch>(c);
    std::fill(c.o.begin(), c.o.end(), 99.0f);
    std::vector<float> ws(k::attention_workspace_floats<Arch>(c.s.head_dim));
    restricted(ws.data());
    CHECK(std::memcmp(full.data(), c.o.data(), full.size() * sizeof(float)) == 0);
  };
  case_data decode(3, 700, 2, 1, 24, true, true), rows(9, 77, 2, 2, 16, true, true),
      flash(9, 600, 2, 1, 16, false, true);
  constexpr k::attention_paths decode_only = k::attention_paths_for(3, 700),
                               rows_only = k::attention_paths_for(9, 77),
                               rows_flash = k::attention_paths_for(9, 600);
  same_bits(decode, [&](float* ws) {
    k::flash_attention<Arch, k::no_score_mod, decode_only>(decode.s, decode.a, ws);
  });
  same_bits(rows, [&](float* ws) {
    k::flash_attention<Arch, k::no_score_mod, rows_only>(rows.s, rows.a, ws);
  });
  same_bits(flash, [&](float* ws) {
    k::flash_attention<Arch, k::no_score_mod, rows_flash>(flash.s, flash.a, ws);
  });
  // A call that needs a path the instantiation left out says so.
  std::vector<float> ws(k::attention_workspace_floats<Arch>(16));
  CHECK_THROWS_WITH_AS(
      (k::flash_attention<Arch, k::no_score_mod, rows_only>(flash.s, flash.a, ws.data())),
      doctest::Contains("leaves out the flash path"), std::logic_error);
  CHECK_THROWS_WITH_AS(
      (k::flash_attention<Arch, k::no_score_mod, decode_only>(rows.s, rows.a, ws.data())),
      doctest::Contains("leaves out the whole_rows path"), std::logic_error);
  CHECK_THROWS_WITH_AS(
      (k::flash_attention<Arch, k::no_score_mod, rows_only>(decode.s, decode.a, ws.data())),
      doctest::Contains("leaves out the decode path"), std::logic_error);
}

TEST_CASE("flash attention rejects bad head counts, sizes and a null workspace") {
  case_data c(4, 4, 3, 2, 8, false, false);
  std::vector<float> ws(k::attention_workspace_floats(8));
  CHECK_THROWS_WITH_AS(k::flash_attention(c.s, c.a, ws.data()),
                       doctest::Contains("not a multiple of num_kv_heads"), std::invalid_argument);
  c.s.num_kv_heads = 3;
  CHECK_THROWS_AS(k::flash_attention(c.s, c.a, nullptr), std::invalid_argument);
  c.s.head_dim = 0;
  CHECK_THROWS_AS(k::flash_attention(c.s, c.a, ws.data()), std::invalid_argument);
}

TEST_CASE("K^T packing (whole 16 x 16 blocks transposed, the rest gathered) is exact") {
  // Every element lands at its panel position times the scale, padded keys are zero, for shapes
  // with and without whole 16-key groups and 16-dim blocks, NaN and infinities included.
  using Arch = k::native_arch;
  constexpr int NR = k::gemm_tile<Arch>::nr;
  const float scale = 0.3f;
  for (std::ptrdiff_t d : {1, 8, 16, 17, 32, 33, 64})
    for (std::ptrdiff_t n : {1, 15, 16, 17, 31, 32, 33, 130}) {
      CAPTURE(d);
      CAPTURE(n);
      const std::ptrdiff_t ld = d + 5;
      auto kk = random_floats(std::size_t(n * ld), unsigned(d * 1000 + n), -2.0f, 2.0f);
      kk[0] = std::nanf("");
      kk[std::size_t((n - 1) * ld + d - 1)] = inf;
      if (n > 1) kk[std::size_t(ld)] = -inf;
      const std::ptrdiff_t panels = (n + NR - 1) / NR;
      std::vector<float> kt(std::size_t(panels * d * NR), 7.0f);
      k::detail::pack_scaled_kt<Arch>(d, n, kk.data(), ld, scale, kt.data());
      int wrong = 0;
      for (std::ptrdiff_t j = 0; j < panels * NR; ++j)
        for (std::ptrdiff_t p = 0; p < d; ++p) {
          const float got = kt[std::size_t((j / NR) * d * NR + p * NR + j % NR)];
          const float want = j < n ? kk[std::size_t(j * ld + p)] * scale : 0.0f;
          const bool same = std::isnan(want) ? std::isnan(got) : got == want;
          wrong += !same;
        }
      CHECK(wrong == 0);
    }
}
