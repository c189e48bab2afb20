// The executor's AMX opt-in (cpu::amx_bf16): matmuls whose weights are bf16 params run on AMX
// tiles, activations rounded to bf16 at each call; attention runs on the tiles too (bf16 Q, K, V
// and probabilities) unless amx_bf16{.attention = false}. Compared with the reference backend on
// the same bf16 weights (the reference computes in f32 from them, so the difference is the
// activations' bf16 rounding) and with the executor's own f32 path.
#include <cstring>

#include "allocation_counter.hpp"
#include "check.hpp"
#include "fusedsl/models/bf16_weights.hpp"

namespace fd = fusedsl;

namespace {

// y = act(x W + b) with bf16 W, through the executor with and without the opt-in.
constexpr auto x1 = fd::input<"x", float, 33, 40>();
constexpr auto w1 = fd::param<"w", fd::bf16, 40, 17>();
constexpr auto b1 = fd::param<"b", float, 17>();
constexpr auto one_matmul = fd::compile(fd::gelu(fd::matmul(x1, fd::cast<float>(w1)) + b1));

// Two residual FFN layers with bf16 weights (4 matmuls, one transposed weight).
constexpr auto x2 = fd::input<"x", float, 70, 48>();
constexpr auto ffn_stack = fd::compile(fd::nn::stack<"layers", 2>(
    fd::nn::block([](auto v) {
      const auto up = fd::param<"up", fd::bf16, 48, 96>();
      const auto down_t = fd::param<"down_t", fd::bf16, 48, 96>();  // stored [out, in]
      const auto h = fd::silu(fd::matmul(v, fd::cast<float>(up)) + fd::param<"up_b", float, 96>());
      return v + fd::matmul<false, true>(h, fd::cast<float>(down_t));
    }),
    x2));

// Tall and narrow: A (1024 x 64) rounded to bf16 needs more workspace than the group's own values
// and B's packing, which is what the executor's scratch is otherwise sized by.
constexpr auto x4 = fd::input<"x", float, 1024, 64>();
constexpr auto w4 = fd::param<"w", fd::bf16, 64, 16>();
constexpr auto tall = fd::compile(fd::matmul(x4, fd::cast<float>(w4)));

// Large enough for the executor to use its pool (the threshold is in multiply-adds).
constexpr auto x3 = fd::input<"x", float, 256, 384>();
constexpr auto w3 = fd::param<"w", fd::bf16, 384, 384>();
static_assert(256.0 * 384 * 384 >= FUSEDSL_CPU_PARALLEL_MACS,
              "the two-thread case must reach the pool");
constexpr auto wide = fd::compile(fd::silu(fd::matmul(x3, fd::cast<float>(w3))));

// Norm-wise relative L2 difference of output 0 of two executors bound to the same values.
template <class Program>
fd::test::comparison relative_l2(fd::cpu::executor<Program>& a, fd::cpu::executor<Program>& b) {
  using fd::dynamic_tensor;
  const auto& shape = Program::graph[Program::graph.outputs[0]].shape;
  dynamic_tensor oa(fd::dtype::f32, shape), ob(fd::dtype::f32, shape);
  a.bind_output(0, oa.ref());
  b.bind_output(0, ob.ref());
  a.run();
  b.run();
  const std::size_t n = std::size_t(shape.size());
  return fd::test::compare_rel_l2(std::span<const float>(oa.data<float>(), n),
                                  std::span<const float>(ob.data<float>(), n), 1e-2);
}

template <class Program>
void check_program(const Program& p, int matmuls, int attention, unsigned seed, const char* what,
                   double max_error = 2e-2, fd::cpu::amx_bf16 opt = {}) {
  fd::cpu::executor<Program> amx(p, fd::cpu::threads{1}, opt);
  fd::cpu::executor<Program> f32(p);
  const auto bound = fd::test::bind_random(amx, seed);
  const auto bound_f32 = fd::test::bind_random(f32, seed);  // the same values (same seed)
  const auto err = fd::test::compare_with_reference(amx, bound, fd::test::rel_tol(max_error));
  const auto l2 = relative_l2(amx, f32);
  MESSAGE(std::string(what) << ": "
                            << std::string(fd::cpu::kernels::amx_available() ? "AMX tiles"
                                                                             : "no AMX, f32 path")
                            << "; largest error against the reference " << err.max_ratio
                            << ", norm-wise relative L2 difference from the f32 path "
                            << l2.max_error);
  CHECK(amx.stats().amx_matmuls == (fd::cpu::kernels::amx_available() ? matmuls : 0));
  CHECK(amx.stats().amx_attention == (fd::cpu::kernels::amx_available() ? attention : 0));
  CHECK(f32.stats().amx_matmuls == 0);
  CHECK(f32.stats().amx_attention == 0);
  CHECK(amx.stats().interpreted_groups == 0);
  // bf16 activations: 8 significant bits, so ~2^-9 per product before cancellation.
  CHECK(err);
  CHECK(l2);
}

}  // namespace

TEST_CASE("bf16 weights opted into AMX match the reference within the activations' bf16 rounding") {
  if (!fd::cpu::kernels::amx_available())
    MESSAGE("AMX-BF16 is NOT available: the opt-in is checked to change nothing (f32 path)");
  check_program(one_matmul, 1, 0, 3, "gelu(x W + b), 33x40x17");
  check_program(ffn_stack, 4, 0, 4, "2 FFN layers, 70x48 -> 96 -> 48");
  check_program(tall, 1, 0, 5, "x W, 1024x64x16 (A's bf16 copy outgrows the rest of the scratch)");
}

// Runs `p` twice with the AMX opt-in: the second call must allocate nothing and give the same
// bits as the first. Returns the executor's stats.
template <class Program>
fd::cpu::executor_stats check_repeats_without_allocating(const Program& p, unsigned seed) {
  fd::cpu::executor<Program> ex(p, fd::cpu::threads{1}, fd::cpu::amx_bf16{});
  const auto bound = fd::test::bind_random(ex, seed);
  const auto& shape = Program::graph[Program::graph.outputs[0]].shape;
  fd::dynamic_tensor first(fd::dtype::f32, shape), again(fd::dtype::f32, shape);
  ex.bind_output(0, first.ref());
  ex.run();
  ex.bind_output(0, again.ref());
  const long before = fd::test::allocations.load();
  ex.run();
  CHECK(fd::test::allocations.load() - before == 0);
  CHECK(std::memcmp(first.data<float>(), again.data<float>(),
                    std::size_t(shape.size()) * sizeof(float)) == 0);
  return ex.stats();
}

TEST_CASE("the AMX path allocates nothing per call and repeats its results bitwise") {
  check_repeats_without_allocating(ffn_stack, 9);
}

TEST_CASE("the AMX path gives the same bits on one and two threads (pool workers use the tiles)") {
  using P = decltype(wide);
  fd::cpu::executor<P> one(wide, fd::cpu::threads{1}, fd::cpu::amx_bf16{});
  fd::cpu::executor<P> two(wide, fd::cpu::threads{2}, fd::cpu::amx_bf16{});
  const auto b1 = fd::test::bind_random(one, 12), b2 = fd::test::bind_random(two, 12);
  const auto& shape = P::graph[P::graph.outputs[0]].shape;
  fd::dynamic_tensor o1(fd::dtype::f32, shape), o2(fd::dtype::f32, shape);
  one.bind_output(0, o1.ref());
  two.bind_output(0, o2.ref());
  one.run();
  two.run();
  CHECK(two.stats().amx_matmuls == (fd::cpu::kernels::amx_available() ? 1 : 0));
  CHECK(std::memcmp(o1.data<float>(), o2.data<float>(),
                    std::size_t(shape.size()) * sizeof(float)) == 0);
  CHECK(fd::test::compare_with_reference(two, b2, fd::test::rel_tol(2e-2)));
}

TEST_CASE(
    "the seed transformer with bf16 weights on AMX matches the reference within bf16 rounding") {
  using M = fd::models::seed_bf16_weights;
  // Layernormed outputs of size ~3 after 12 GEMMs on bf16 activations: the largest error is 0.017
  // of max(1, |ref|); the norm-wise L2 difference (bound 1e-2, as for bf16 on the GPU) is 3.3e-3.
  // Attention on the tiles as well (one attention group per layer) adds its bf16 rounding of Q,
  // K, V and the probabilities.
  check_program(M::program, 12, 1, 13,
                "seed transformer, bf16 weights and attention on AMX (2 layers, 6 matmuls each)",
                5e-2);
  check_program(M::program, 12, 0, 13,
                "seed transformer, bf16 weights on AMX, attention in f32 (amx_bf16{.attention = "
                "false})",
                5e-2, fd::cpu::amx_bf16{.attention = false});
}

TEST_CASE("attention on AMX allocates nothing per call and repeats its results bitwise") {
  const auto stats = check_repeats_without_allocating(fd::models::seed_bf16_weights::program, 21);
  CHECK(stats.amx_attention == (fd::cpu::kernels::amx_available() ? 1 : 0));
}
