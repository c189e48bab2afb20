// GEMM pairs (plan::gemm_part::pair): SwiGLU's silu(gate) * up computed by one GEMM over both
// weights. The lowering records the pair only where it is exact; the executor runs it as one
// GEMM (stats().paired_gemms), bitwise equal on any thread count, equal to the reference and to
// the two GEMMs it replaces (the same sums; the epilogue may take the vector or the one-lane path
// for other columns, as the pair's panels hold half as many), at shapes that are not multiples of
// the register tile, with f32 and bf16 weights, one row (bf16 panels) and rows folded from a
// batch.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "check.hpp"
#include "fusedsl/models/llama.hpp"
#include "fusedsl/plan/report.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;

namespace {

struct pair_count {
  int parts = 0;        // parts with a pair
  int paired_into = 0;  // groups computed as a pair
};

template <class Program>
pair_count pairs_of() {
  pair_count c;
  const auto& lp = fd::cpu::executor<Program>::kernels_plan();
  for (int gi = 0; gi < Program::fusion.n_groups; ++gi) {
    const fd::plan::kernel_desc& d = lp.desc[std::size_t(gi)];
    c.paired_into += d.paired_into >= 0;
    if (d.kind == fd::plan::kernel_kind::gemm)
      for (int q = 0; q < d.n_gemm; ++q) c.parts += d.gemm[std::size_t(q)].pair >= 0;
  }
  return c;
}

// The program's output 0 as f32 values, after one run.
template <class Program>
std::vector<float> run_output(fd::cpu::executor<Program>& ex) {
  const fd::graph::node& n = Program::graph[Program::graph.outputs[0]];
  fd::dynamic_tensor out(n.type, n.shape);
  ex.bind_output(0, out.ref());
  ex.run();
  std::vector<float> r(std::size_t(n.shape.size()));
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = float(ft::element(out, std::int64_t(i)));
  return r;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Equal but for the last bits of an epilogue op evaluated by the vector or the one-lane code.
bool nearly_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (!(std::fabs(x - y) <= 1e-6 * std::fmax(1.0, std::fabs(y)))) return false;  // NaN: fails
  }
  return true;
}

// Runs p paired (on one thread and on two polling threads) and as two GEMMs: every group
// generated, the pair run `expect_pairs` times per call, the paired results bitwise equal to
// each other and nearly to the two GEMMs', and within tol of the reference. `split`: the two
// threads must share the work.
template <class Program>
void check_pair(const Program&, unsigned seed, int expect_pairs, double tol = 2e-5,
                bool split = false) {
  INFO(fd::plan::print_plan(Program::graph, Program::fusion, Program::memory));
  fd::cpu::executor<Program> paired{Program{}};
  fd::cpu::executor<Program> two_threads{Program{},
                                         fd::cpu::threads{2, std::chrono::microseconds(50)}};
  fd::cpu::executor<Program> unpaired{Program{}, fd::cpu::threads{1}, fd::cpu::gemm_pairs{false}};
  const auto b = ft::bind_random(paired, seed);
  const auto b2 = ft::bind_random(two_threads, seed);  // kept: the executors read them
  const auto b3 = ft::bind_random(unpaired, seed);
  CHECK(ft::compare_with_reference(paired, b, ft::rel_tol(tol)));
  CHECK(paired.stats().interpreted_groups == 0);
  CHECK(paired.stats().paired_gemms == expect_pairs);
  CHECK(unpaired.stats().paired_gemms == 0);
  const std::vector<float> one = run_output(paired), two = run_output(two_threads),
                           apart = run_output(unpaired);
  CHECK(two_threads.stats().paired_gemms == expect_pairs);
  if (split) CHECK(two_threads.stats().parallel_groups > 0);
  CHECK(bitwise_equal(one, two));
  CHECK(nearly_equal(one, apart));
  for (float v : one) REQUIRE(std::isfinite(v));
}

using fd::nn::linear;
using bf16_weights = fd::bf16;

}  // namespace

TEST_CASE("SwiGLU's gate and up are one GEMM pair, at shapes off the register tile") {
  // 13 rows (a full tile and a tail), 40 -> 100 (six half-panels of 16 and an edge of 4 on
  // AVX-512; other widths cut it elsewhere)
  constexpr auto x = fd::input<"x", float, 13, 40>();
  constexpr auto p =
      fd::compile(fd::silu(linear<"gate", 100, false>(x)) * linear<"up", 100, false>(x));
  CHECK(pairs_of<decltype(p)>().parts == 1);
  CHECK(pairs_of<decltype(p)>().paired_into == 1);
  check_pair(p, 1, 1);
  // a further epilogue op after the product
  constexpr auto q = fd::compile(
      (fd::silu(linear<"gate", 100, false>(x)) * linear<"up", 100, false>(x)) * fd::lit<0.5>);
  CHECK(pairs_of<decltype(q)>().parts == 1);
  check_pair(q, 2, 1);
  // up written first: up's epilogue stops before the product, which gate's group takes
  constexpr auto r = fd::compile(linear<"up", 100, false>(x) *
                                 fd::silu(linear<"gate", 100, false>(x)));
  CHECK(pairs_of<decltype(r)>().parts == 1);
  check_pair(r, 13, 1);
  // neither has an activation (a bilinear GLU): the first matmul's epilogue takes the product
  constexpr auto b = fd::compile(linear<"w", 100, false>(x) * linear<"v", 100, false>(x));
  CHECK(pairs_of<decltype(b)>().parts == 1);
  check_pair(b, 15, 1);
}

TEST_CASE("a GEMM pair split across two threads gives the same bits as one thread") {
  constexpr auto x = fd::input<"x", float, 100, 256>();  // 15 M multiply-adds: split
  constexpr auto p =
      fd::compile(fd::silu(linear<"gate", 300, false>(x)) * linear<"up", 300, false>(x));
  check_pair(p, 12, 1, 1e-4, true);
}

TEST_CASE("GEMM pairs with bf16 weights: widened panels, and bf16 panels for one row") {
  constexpr auto x = fd::input<"x", float, 29, 64>();
  constexpr auto p = fd::compile(fd::silu(linear<"gate", 72, false, bf16_weights>(x)) *
                                 linear<"up", 72, false, bf16_weights>(x));
  CHECK(pairs_of<decltype(p)>().parts == 1);
  check_pair(p, 3, 1, 1e-4);
  constexpr auto x1 = fd::input<"x", float, 1, 64>();  // a decode step
  constexpr auto p1 = fd::compile(fd::silu(linear<"gate", 72, false, bf16_weights>(x1)) *
                                  linear<"up", 72, false, bf16_weights>(x1));
  CHECK(pairs_of<decltype(p1)>().parts == 1);
  check_pair(p1, 4, 1, 1e-4);
}

TEST_CASE("a batch folds into the pair's rows") {
  constexpr auto x = fd::input<"x", float, 3, 7, 24>();
  constexpr auto p =
      fd::compile(fd::silu(linear<"gate", 40, false>(x)) * linear<"up", 40, false>(x));
  CHECK(pairs_of<decltype(p)>().parts == 1);
  check_pair(p, 5, 1);
}

TEST_CASE("a long k keeps the pair in the plan but runs two GEMMs (k is cut into blocks)") {
  constexpr auto x = fd::input<"x", float, 16, 600>();
  constexpr auto p =
      fd::compile(fd::silu(linear<"gate", 48, false>(x)) * linear<"up", 48, false>(x));
  CHECK(pairs_of<decltype(p)>().parts == 1);
  check_pair(p, 6, 0, 1e-4);
}

TEST_CASE("no pair where the second product is read elsewhere, has its own epilogue, or reads "
          "another A") {
  // up with a bias, written first: its epilogue keeps the bias and stops before the product
  constexpr auto x0 = fd::input<"x", float, 13, 40>();
  constexpr auto p0 =
      fd::compile(linear<"up", 24, true>(x0) * fd::silu(linear<"gate", 24, false>(x0)));
  CHECK(pairs_of<decltype(p0)>().parts == 0);
  check_pair(p0, 16, 0);
  constexpr auto x = fd::input<"x", float, 13, 40>();
  constexpr auto y = fd::input<"y", float, 13, 40>();
  constexpr auto up = linear<"up", 24, false>(x);
  // up read twice (by the product and by the sum)
  constexpr auto p1 = fd::compile(up + fd::silu(linear<"gate", 24, false>(x)) * up);
  CHECK(pairs_of<decltype(p1)>().parts == 0);
  check_pair(p1, 7, 0);
  // up has a bias (its own epilogue)
  constexpr auto p2 =
      fd::compile(fd::silu(linear<"gate", 24, false>(x)) * linear<"up", 24, true>(x));
  CHECK(pairs_of<decltype(p2)>().parts == 0);
  check_pair(p2, 8, 0);
  // up reads another input
  constexpr auto p3 =
      fd::compile(fd::silu(linear<"gate", 24, false>(x)) * linear<"up", 24, false>(y));
  CHECK(pairs_of<decltype(p3)>().parts == 0);
  check_pair(p3, 9, 0);
  // up is read transposed: not at the element the epilogue writes
  constexpr auto sq = fd::input<"s", float, 24, 24>();
  constexpr auto p4 = fd::compile(fd::silu(linear<"gate", 24, false>(sq)) *
                                  fd::transpose(linear<"up", 24, false>(sq)));
  CHECK(pairs_of<decltype(p4)>().parts == 0);
  check_pair(p4, 10, 0);
}

TEST_CASE("NaN and inf in the gate or the up product reach the output as they do unpaired") {
  constexpr auto x = fd::input<"x", float, 5, 8>();
  constexpr auto p =
      fd::compile(fd::silu(linear<"gate", 20, false>(x)) * linear<"up", 20, false>(x));
  using P = decltype(p);
  fd::cpu::executor<P> paired{P{}};
  fd::cpu::executor<P> unpaired{P{}, fd::cpu::threads{1}, fd::cpu::gemm_pairs{false}};
  fd::tensor<float, 5, 8> xv;
  fd::tensor<float, 8, 20> wg, wu;
  for (std::int64_t i = 0; i < 40; ++i) xv.data()[i] = 0.25f * float(i % 7) - 0.5f;
  for (std::int64_t i = 0; i < 160; ++i) {
    wg.data()[i] = 0.125f * float(i % 5) - 0.25f;
    wu.data()[i] = 0.0625f * float(i % 9) - 0.25f;
  }
  xv.data()[0] = std::numeric_limits<float>::quiet_NaN();  // row 0: NaN everywhere
  xv.data()[8] = std::numeric_limits<float>::infinity();   // row 1: +-inf products
  for (auto* ex : {&paired, &unpaired}) {
    ex->bind("x", xv);
    ex->bind("gate.w", wg);
    ex->bind("up.w", wu);
  }
  const std::vector<float> a = run_output(paired), b = run_output(unpaired);
  CHECK(paired.stats().paired_gemms == 1);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(b[i]))
      CHECK(std::isnan(a[i]));
    else if (std::isinf(b[i]))
      CHECK(a[i] == b[i]);
    else
      CHECK(std::fabs(a[i] - b[i]) <= 1e-6f * std::fmax(1.0f, std::fabs(b[i])));
  }
  CHECK(std::isnan(a[0]));
}

TEST_CASE("a LLaMA-style block runs its SwiGLU as one GEMM pair") {
  constexpr auto x = fd::input<"x", float, 12, 64>();
  constexpr auto cos = fd::input<"cos", float, 12, 8>();
  constexpr auto sin = fd::input<"sin", float, 12, 8>();
  constexpr auto p = fd::compile(fd::models::llama_block<4, 2, 96>(x, cos, sin));
  CHECK(pairs_of<decltype(p)>().parts == 1);
  check_pair(p, 11, 1, 1e-4);
}

TEST_CASE("a stack of SwiGLU layers pairs in every layer, with each layer's own weights") {
  constexpr auto x = fd::input<"x", float, 9, 32>();
  constexpr auto p = fd::compile(fd::nn::stack<"layers", 3>(
      fd::nn::block([](auto v) {
        const auto h = fd::silu(linear<"gate", 40, false>(v)) * linear<"up", 40, false>(v);
        return v + linear<"down", 32, false>(h);
      }),
      x));
  CHECK(pairs_of<decltype(p)>().parts == 1);  // in the body's plan
  check_pair(p, 14, 1, 1e-4);                 // per layer
}
