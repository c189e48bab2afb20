// expr/sort.hpp: top_k, sort, argsort and top_k_mask against std::stable_sort on rows with ties,
// NaN, infinities and signed zeros, on the CPU executor and the reference backend, along the last
// axis and an outer one; the counting fuses into reductions (no [n, n] buffer).
#include "fusedsl/expr/sort.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "../common/compare.hpp"
#include "../common/test_util.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/compile.hpp"

namespace {

constexpr std::int64_t T = 7, N = 13;  // N: not a multiple of any SIMD width
constexpr auto x = fd::input<"x", float, T, N>();
constexpr float nan = std::numeric_limits<float>::quiet_NaN();
constexpr float inf = std::numeric_limits<float>::infinity();

// Rows with many equal values, NaN, +-inf and both zeros.
std::vector<float> data() {
  const float pool[] = {-2.0f, -1.0f, -0.0f, 0.0f, 0.5f, 1.0f, 1.0f, 3.0f, nan, inf, -inf};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pick(0, 10);
  std::vector<float> v(std::size_t(T * N));
  for (float& f : v) f = pool[pick(rng)];
  for (std::int64_t j = 0; j < N; ++j) v[std::size_t(j)] = float(j % 4);  // row 0: no NaN
  return v;
}

// NaN is the largest; -0 == +0; equal elements keep their index order.
bool comes_before(float a, float b, bool descending) {
  if (std::isnan(a) || std::isnan(b))
    return descending ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
  return descending ? a > b : a < b;
}

// The order of each row (along the last axis) or each column (axis 0) of a [T, N] matrix.
std::vector<std::int64_t> order(const std::vector<float>& v, std::int64_t line, int axis,
                                bool descending) {
  const std::int64_t n = axis == 1 ? N : T;
  const auto at = [&](std::int64_t i) {
    return v[std::size_t(axis == 1 ? line * N + i : i * N + line)];
  };
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
    return comes_before(at(a), at(b), descending);
  });
  return idx;
}

fd::tensor_ref view(std::vector<float>& v, fd::dims s) {
  return fd::tensor_ref{v.data(), fd::dtype::f32, s};
}

template <class Program>
std::vector<std::vector<float>> run_cpu(const Program& p, std::vector<float>& xv) {
  fd::cpu::executor ex(p);
  ex.bind("x", view(xv, fd::make_dims(T, N)));
  std::vector<std::vector<float>> outs;
  std::vector<fd::dynamic_tensor> mem;
  for (int o = 0; o < p.graph.n_outputs; ++o) {
    const auto& n = p.graph[p.graph.outputs[std::size_t(o)]];
    mem.emplace_back(n.type, n.shape);
  }
  for (int o = 0; o < p.graph.n_outputs; ++o) ex.bind_output(o, mem[std::size_t(o)].ref());
  ex.run();
  CHECK(ex.stats().interpreted_groups == 0);
  // the counting is fused: no buffer of one row's n x n comparisons per row
  CHECK(p.arena_bytes() < T * N * N * 4);
  for (auto& m : mem) outs.push_back(test::values(m));
  return outs;
}

template <class Program>
std::vector<std::vector<float>> run_reference(const Program& p, std::vector<float>& xv) {
  fd::reference::evaluator ref{fd::graph::graph_view(p.graph)};
  ref.bind("x", view(xv, fd::make_dims(T, N)));
  auto res = ref.run();
  std::vector<std::vector<float>> outs;
  for (auto& r : res) outs.push_back(test::values(r));
  return outs;
}

// Values equal bit for bit in meaning: NaN where NaN, the same infinity, the same signed zero.
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

void check_values(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += same(got[i], want[i]) ? 0 : 1;
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("top_k: the k largest along the last axis, NaN first, ties by the lower index") {
  constexpr auto t = fd::top_k<4>(x);
  static_assert(decltype(t.values)::shape == fd::make_dims(T, 4));
  static_assert(decltype(t.indices)::type == fd::dtype::i32);
  constexpr auto p = fd::compile(t.values, t.indices);
  auto xv = data();
  std::vector<float> want_v, want_i;
  for (std::int64_t r = 0; r < T; ++r) {
    const auto o = order(xv, r, 1, true);
    for (int k = 0; k < 4; ++k) {
      want_i.push_back(float(o[std::size_t(k)]));
      want_v.push_back(xv[std::size_t(r * N + o[std::size_t(k)])]);
    }
  }
  for (const auto& got : {run_cpu(p, xv), run_reference(p, xv)}) {
    check_values(got[0], want_v);
    CHECK(ft::compare(got[1], want_i, ft::exact()));
  }
  CHECK(want_i[0] == 3.0f);  // row 0 is 0 1 2 3 0 1 2 3 ...: the first 3 first
  CHECK(want_i[1] == 7.0f);
}

TEST_CASE("sort and argsort: ascending, stable, NaN last, signed zeros kept") {
  constexpr auto p = fd::compile(fd::sort(x), fd::argsort(x));
  auto xv = data();
  std::vector<float> want_v, want_i;
  for (std::int64_t r = 0; r < T; ++r)
    for (std::int64_t i : order(xv, r, 1, false)) {
      want_i.push_back(float(i));
      want_v.push_back(xv[std::size_t(r * N + i)]);
    }
  for (const auto& got : {run_cpu(p, xv), run_reference(p, xv)}) {
    check_values(got[0], want_v);
    CHECK(ft::compare(got[1], want_i, ft::exact()));
  }
}

TEST_CASE("along an outer axis, and the mask of the top k") {
  constexpr auto t = fd::top_k<2, 0>(x);
  static_assert(decltype(t.indices)::shape == fd::make_dims(2, N));
  constexpr auto p = fd::compile(t.values, t.indices, fd::top_k_mask<3>(x));
  auto xv = data();
  std::vector<float> want_v(std::size_t(2 * N)), want_i(std::size_t(2 * N));
  for (std::int64_t c = 0; c < N; ++c) {
    const auto o = order(xv, c, 0, true);
    for (int k = 0; k < 2; ++k) {
      want_i[std::size_t(k * N + c)] = float(o[std::size_t(k)]);
      want_v[std::size_t(k * N + c)] = xv[std::size_t(o[std::size_t(k)] * N + c)];
    }
  }
  std::vector<float> want_m(std::size_t(T * N), 0.0f);
  for (std::int64_t r = 0; r < T; ++r) {
    const auto o = order(xv, r, 1, true);
    for (int k = 0; k < 3; ++k) want_m[std::size_t(r * N + o[std::size_t(k)])] = 1.0f;
  }
  for (const auto& got : {run_cpu(p, xv), run_reference(p, xv)}) {
    check_values(got[0], want_v);
    CHECK(ft::compare(got[1], want_i, ft::exact()));
    CHECK(ft::compare(got[2], want_m, ft::exact()));
  }
}

TEST_CASE("random rows without ties: top_k is the sorted rows' tail, reversed") {
  auto xv = test::random_tensor<float, T, N>(3);
  std::vector<float> v(xv.data(), xv.data() + T * N);
  constexpr auto t = fd::top_k<N>(x);
  constexpr auto p = fd::compile(t.values, fd::sort(x));
  const auto got = run_cpu(p, v);
  for (std::int64_t r = 0; r < T; ++r)
    for (std::int64_t k = 0; k < N; ++k)
      CHECK(got[0][std::size_t(r * N + k)] == got[1][std::size_t(r * N + N - 1 - k)]);
}
