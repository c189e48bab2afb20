// expr/scatter.hpp: scatter_add against a plain loop, with repeated ids, ids outside the table
// (dropped), rows of NaN and inf, on the CPU executor and the reference backend; the [N, M, ...]
// selects fuse into the reduction.
#include "fusedsl/expr/scatter.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../common/compare.hpp"
#include "../common/test_util.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "fusedsl/compile.hpp"

namespace {

constexpr std::int64_t N = 6, M = 9, D = 5;  // D: not a multiple of any SIMD width
constexpr auto table = fd::input<"table", float, N, D>();
constexpr auto ids = fd::input<"ids", std::int32_t, M>();
constexpr auto rows = fd::input<"rows", float, M, D>();
constexpr auto program = fd::compile(fd::scatter_add(table, ids, rows* fd::lit<2.0>));

}  // namespace

TEST_CASE(
    "scatter_add adds each row at its id; repeated ids add up, ids out of range add nothing") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> t(std::size_t(N * D)), r(std::size_t(M * D));
  for (float& f : t) f = u(rng);
  for (float& f : r) f = u(rng);
  std::vector<std::int32_t> id = {2, 0, 2, -1, 5, 6, 2, 1000, 0};
  r[std::size_t(4 * D + 1)] = std::numeric_limits<float>::quiet_NaN();  // into row 5
  r[std::size_t(8 * D + 2)] = std::numeric_limits<float>::infinity();   // into row 0
  r[std::size_t(5 * D)] = std::numeric_limits<float>::quiet_NaN();      // id 6: dropped
  std::vector<float> want = t;
  for (std::int64_t m = 0; m < M; ++m) {
    const std::int32_t n = id[std::size_t(m)];
    if (n < 0 || n >= N) continue;
    for (std::int64_t d = 0; d < D; ++d)
      want[std::size_t(n * D + d)] += 2.0f * r[std::size_t(m * D + d)];
  }
  const auto bind = [&](auto& e) {
    e.bind("table", fd::tensor_ref{t.data(), fd::dtype::f32, fd::make_dims(N, D)});
    e.bind("ids", fd::tensor_ref{id.data(), fd::dtype::i32, fd::make_dims(M)});
    e.bind("rows", fd::tensor_ref{r.data(), fd::dtype::f32, fd::make_dims(M, D)});
  };
  fd::cpu::executor ex(program);
  bind(ex);
  std::vector<float> got(std::size_t(N * D));
  ex.bind_output(0, fd::tensor_ref{got.data(), fd::dtype::f32, fd::make_dims(N, D)});
  ex.run();
  CHECK(ex.stats().interpreted_groups == 0);
  CHECK(program.arena_bytes() < N * M * D * 4);  // no [N, M, D] buffer
  CHECK(ft::compare(got, want, ft::allclose(1e-6, 1e-6), ft::nans::expected));
  CHECK(std::isnan(got[std::size_t(5 * D + 1)]));
  CHECK(std::isinf(got[std::size_t(2)]));
  fd::reference::evaluator ref{fd::graph::graph_view(program.graph)};
  bind(ref);
  CHECK(ft::compare(test::values(ref.run().at(0)), want, ft::allclose(1e-6, 1e-6),
                    ft::nans::expected));
}
