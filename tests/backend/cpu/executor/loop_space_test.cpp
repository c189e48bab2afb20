// Loop kernels over the iteration spaces programs write: axes of extent 1 (a slice to one
// element of a pair), extent 2 (pairs split with reshape), interleaved stride-2 access (GPT-J's
// rotary embedding on the first part of each head), and operands contiguous along an outer axis.
// Each program is run by the generated kernels and compared with the reference on odd shapes;
// the plan checks say which space the kernels iterate over (plan/loop_space.hpp).
#include "fusedsl/plan/loop_space.hpp"

#include "check.hpp"
#include "fusedsl/plan/report.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;

namespace {

// Runs p on random data (seeded) and compares with the reference; every group generated.
template <class Program>
void check_program(const Program&, unsigned seed) {
  fd::cpu::executor<Program> ex{Program{}};
  auto b = ft::bind_random(ex, seed);
  INFO(fd::plan::print_plan(Program::graph, Program::fusion, Program::memory));
  CHECK(ft::compare_with_reference(ex, b, ft::rel_tol(2e-6)));
  CHECK(ex.stats().interpreted_groups == 0);
}

// Over every segment of every loop group, simplified for 8 lanes: f(simplified desc, segment).
template <class Program, class F>
void for_each_loop_segment(F f) {
  const auto& lp = fd::cpu::executor<Program>::kernels_plan();
  for (int gi = 0; gi < Program::fusion.n_groups; ++gi) {
    const fd::plan::kernel_desc& d = lp.desc[std::size_t(gi)];
    if (d.kind != fd::plan::kernel_kind::loop) continue;
    for (int s = 0; s < d.n_seg; ++s) f(fd::plan::simplify_loop_segment(d, s, 8), s);
  }
}

// The stride along the innermost axis of the loads (node >= 0) a segment reads.
std::vector<std::int64_t> inner_load_strides(const fd::plan::kernel_desc& d, int s) {
  std::vector<std::int64_t> r;
  const auto used =
      fd::plan::accesses_used(d, d.seg[std::size_t(s)].begin, d.seg[std::size_t(s)].end);
  for (int a = 0; a < d.c.n_access; ++a)
    if (used[std::size_t(a)] && a != d.store && d.c.acc[std::size_t(a)].node >= 0)
      r.push_back(d.rank > 0 ? d.c.acc[std::size_t(a)].at.coef[std::size_t(d.rank - 1)] : 0);
  return r;
}

// GPT-J's rotary embedding: the first R of each head's Dh dims rotated as interleaved pairs
// (x0, x1), (x2, x3), ... by angles cos, sin [L, R / 2]; the other dims passed through.
template <std::int64_t L, std::int64_t H, std::int64_t Dh, std::int64_t R>
constexpr auto gptj_rotary() {
  constexpr auto x = fd::input<"x", float, L, H, Dh>();
  constexpr auto cos = fd::reshape<L, 1, R / 2, 1>(fd::input<"cos", float, L, R / 2>());
  constexpr auto sin = fd::reshape<L, 1, R / 2, 1>(fd::input<"sin", float, L, R / 2>());
  constexpr auto pairs = fd::reshape<L, H, R / 2, 2>(fd::slice<2, 0, R>(x));
  constexpr auto even = fd::slice<3, 0, 1>(pairs);
  constexpr auto odd = fd::slice<3, 1, 2>(pairs);
  constexpr auto rotated = fd::concat<3>(even * cos - odd * sin, odd * cos + even * sin);
  return fd::compile(fd::concat<2>(fd::reshape<L, H, R>(rotated), fd::slice<2, R, Dh>(x)));
}

}  // namespace

TEST_CASE("GPT-J's interleaved rotary: no axis of extent 1 left, pairs read at stride 2") {
  // 20 pairs per head (two vectors of 8 and a tail), and 6 (a tail only)
  constexpr auto p = gptj_rotary<13, 3, 64, 40>();
  using P = decltype(p);
  int strided = 0;
  for_each_loop_segment<P>([&](const fd::plan::kernel_desc& d, int s) {
    for (int t = 0; t < d.rank; ++t) CHECK(d.seg[std::size_t(s)].hi[std::size_t(t)] > 1);
    for (std::int64_t c : inner_load_strides(d, s)) {
      CHECK(c >= 0);
      CHECK(c <= 2);
      strided += c == 2;
    }
  });
  CHECK(strided > 0);
  check_program(p, 1);
  check_program(gptj_rotary<7, 2, 20, 12>(), 2);
}

TEST_CASE("a slice to one column and a transposed copy run along their contiguous axis") {
  constexpr std::int64_t A = 11, B = 37;
  constexpr auto x = fd::input<"x", float, A, B, 1>();
  constexpr auto y = fd::input<"y", float, B, A>();
  // [A, B, 1] + y^T: x's last axis has extent 1; y is contiguous along the output's first axis
  constexpr auto p = fd::compile(fd::reshape<A, B>(x) * fd::lit<2.0> + fd::transpose(y));
  using P = decltype(p);
  for_each_loop_segment<P>([&](const fd::plan::kernel_desc& d, int s) {
    for (int t = 0; t < d.rank; ++t) CHECK(d.seg[std::size_t(s)].hi[std::size_t(t)] > 1);
  });
  check_program(p, 3);
  // a column of a matrix, and pieces of one: segments whose boxes do not start at 0
  constexpr auto m = fd::input<"m", float, 9, 5, 3>();
  check_program(fd::compile(fd::concat<2>(fd::slice<2, 2, 3>(m) * fd::lit<3.0>,
                                          fd::slice<2, 0, 2>(m) + fd::lit<1.0>)),
                4);
}

TEST_CASE(
    "reductions over axes of extent 1: lanes along the reduced axis, argmax's positions kept") {
  constexpr auto x = fd::input<"x", float, 6, 1, 37, 1>();
  constexpr auto y = fd::input<"y", float, 19, 1, 5, 3>();
  constexpr auto p = fd::compile(fd::sum<2, true>(x) * fd::lit<0.5>,  // [6, 1, 1, 1]
                                 fd::argmax<0>(y),                    // [1, 5, 3] i32
                                 fd::mean<2>(fd::max<3>(y)));         // [19, 1]
  using P = decltype(p);
  const auto& lp = fd::cpu::executor<P>::kernels_plan();
  int reduces = 0;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi) {
    const fd::plan::kernel_desc& d = lp.desc[std::size_t(gi)];
    if (d.kind != fd::plan::kernel_kind::reduce) continue;
    ++reduces;
    const fd::plan::kernel_desc r = fd::plan::simplify_reduce(d);
    CHECK(r.reduce_count >= 1);
    CHECK(r.reduce_first + r.reduce_count <= r.rank);
    for (int t = 0; t < r.rank; ++t) CHECK(r.extent[std::size_t(t)] > 1);
  }
  CHECK(reduces >= 3);
  check_program(p, 5);
}
