// The shapes a pattern matcher can get wrong, each run by the generated kernels (no interpreter)
// and compared with the reference: attention written with every variation of its score chain
// (mask fill values, scale placement, operand order of `where`, boolean and additive masks,
// batches, grouped heads, Lq != Lk, extra consumers), GEMM epilogues of any elementwise shape,
// row kernels with prologues and epilogues, and the data-movement ops (gather, dynamic slices).
#include <limits>

#include "check.hpp"
#include "fusedsl/models/llama.hpp"
#include "fusedsl/plan/report.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;
using fd::lit;

namespace {

template <class Program>
int groups_of_kind(fd::plan::kernel_kind k) {
  int n = 0;
  const auto& lp = fd::cpu::executor<Program>::kernels_plan();
  for (int gi = 0; gi < Program::fusion.n_groups; ++gi) n += lp.desc[std::size_t(gi)].kind == k;
  return n;
}

// The descriptor of the program's attention group (there must be one).
template <class Program>
const fd::plan::kernel_desc& attention_of() {
  const auto& lp = fd::cpu::executor<Program>::kernels_plan();
  for (int gi = 0; gi < Program::fusion.n_groups; ++gi)
    if (lp.desc[std::size_t(gi)].kind == fd::plan::kernel_kind::attention)
      return lp.desc[std::size_t(gi)];
  FAIL("no attention group");
  return lp.desc[0];
}

// Runs p on random data (seeded) and compares with the reference; every group generated.
template <class Program>
void check_program(const Program&, unsigned seed, double tol = 2e-5) {
  fd::cpu::executor<Program> ex{Program{}};
  auto b = ft::bind_random(ex, seed);
  INFO(fd::plan::print_plan(Program::graph, Program::fusion, Program::memory));
  CHECK(ft::compare_with_reference(ex, b, ft::rel_tol(tol)));
  CHECK(ex.stats().interpreted_groups == 0);
}

constexpr std::int64_t H = 4, L = 24, D = 16;
constexpr auto q = fd::input<"q", float, H, L, D>();
constexpr auto k = fd::input<"k", float, H, L, D>();
constexpr auto v = fd::input<"v", float, H, L, D>();
constexpr auto s = fd::matmul<false, true>(q, k);  // [H, L, L]
constexpr auto rows = fd::iota<std::int32_t, 0, L, L>();
constexpr auto cols = fd::iota<std::int32_t, 1, L, L>();
constexpr auto causal = rows >= cols;

}  // namespace

TEST_CASE("a causal where with a finite fill is that fill, not a -inf mask") {
  constexpr auto p =
      fd::compile(fd::matmul(fd::softmax(fd::where(causal, s * lit<0.25>, lit<0.0>)), v));
  CHECK(groups_of_kind<decltype(p)>(fd::plan::kernel_kind::attention) == 1);
  check_program(p, 1);
}

TEST_CASE("a causal where with -1e9, with -inf, and with the operands of where swapped") {
  check_program(
      fd::compile(fd::matmul(fd::softmax(fd::where(causal, s * lit<0.25>, lit<-1e9>)), v)), 2);
  constexpr auto p =
      fd::compile(fd::matmul(fd::softmax(fd::where(causal, s * lit<0.25>, fd::neg_inf)), v));
  CHECK(groups_of_kind<decltype(p)>(fd::plan::kernel_kind::attention) == 1);
  CHECK(attention_of<decltype(p)>().att.causal);  // the kernel skips the masked blocks
  check_program(p, 3);
  // where(not causal, -inf, s): the scores in the third operand
  check_program(
      fd::compile(fd::matmul(fd::softmax(fd::where(rows < cols, fd::neg_inf, s * lit<0.25>)), v)),
      4);
}

TEST_CASE("the scale before or after the mask, as a division, and on the left") {
  check_program(
      fd::compile(fd::matmul(fd::softmax(fd::where(causal, s, fd::neg_inf) * lit<0.25>), v)), 5);
  check_program(fd::compile(fd::matmul(fd::softmax(s / lit<4.0>), v)), 6);
  check_program(fd::compile(fd::matmul(fd::softmax(lit<0.25> * s), v)), 7);
}

TEST_CASE("additive and boolean masks of several shapes") {
  constexpr auto m2 = fd::input<"m", float, L, L>();
  check_program(fd::compile(fd::matmul(fd::softmax(s * lit<0.25> + m2), v)), 8);
  constexpr auto m3 = fd::input<"m", float, H, 1, L>();  // per head, every query
  check_program(fd::compile(fd::matmul(fd::softmax(m3 + s * lit<0.25>), v)), 9);
  constexpr auto keep = fd::input<"keep", bool, 1, L>();  // key padding
  constexpr auto p =
      fd::compile(fd::matmul(fd::softmax(fd::where(keep, s * lit<0.25>, fd::neg_inf)), v));
  CHECK(groups_of_kind<decltype(p)>(fd::plan::kernel_kind::attention) == 1);
  check_program(p, 10);
}

TEST_CASE("soft-capped and ALiBi-biased scores stay in one attention kernel") {
  constexpr auto capped = fd::tanh(s * lit<0.02>) * lit<50.0>;
  constexpr auto p1 = fd::compile(fd::matmul(fd::softmax(capped), v));
  CHECK(groups_of_kind<decltype(p1)>(fd::plan::kernel_kind::attention) == 1);
  check_program(p1, 11);
  constexpr auto dist = fd::cast<float>(rows) - fd::cast<float>(cols);
  check_program(fd::compile(fd::matmul(fd::softmax(s * lit<0.25> - fd::abs(dist) * lit<0.5>), v)),
                12);
}

TEST_CASE("scores with a second consumer are no attention kernel but still right") {
  constexpr auto sc = s * lit<0.25>;
  constexpr auto p = fd::compile(fd::matmul(fd::softmax(sc), v), fd::sum<2>(sc));
  CHECK(groups_of_kind<decltype(p)>(fd::plan::kernel_kind::attention) == 0);
  check_program(p, 13);
}

TEST_CASE("batched masked attention, grouped heads and Lq != Lk causal through the composites") {
  constexpr auto x = fd::input<"x", float, 3, 20, 32>();
  constexpr auto keep = fd::input<"keep", bool, 3, 20>();
  constexpr auto p = fd::compile(fd::nn::attention<"a", 4, 2, true>(x, keep));
  CHECK(groups_of_kind<decltype(p)>(fd::plan::kernel_kind::attention) == 1);
  check_program(p, 14);
  constexpr auto addm = fd::input<"m", float, 3, 20>();
  check_program(fd::compile(fd::nn::attention<"a", 4>(x, addm)), 15);
  // 4 new queries against a cache of 20 keys: query i sees keys j <= i + 16
  constexpr auto qd = fd::input<"q", float, 2, 4, 16>();
  constexpr auto kd = fd::input<"k", float, 2, 20, 16>();
  constexpr auto vd = fd::input<"v", float, 2, 20, 16>();
  constexpr auto r4 = fd::iota<std::int32_t, 0, 4, 20>() + fd::constant<16.0>();
  constexpr auto c4 = fd::iota<std::int32_t, 1, 4, 20>();
  constexpr auto pd = fd::compile(fd::matmul(
      fd::softmax(fd::where(r4 >= c4, fd::matmul<false, true>(qd, kd), fd::neg_inf)), vd));
  CHECK(attention_of<decltype(pd)>().att.causal);
  check_program(pd, 16);
}

// nn::attention_options through the planner: each an attention kernel whose scores never reach
// memory (the arena holds no [heads, Lq, Lk] buffer), against the reference.
TEST_CASE(
    "attention options: cross-attention, biases, no scale and windows stay one flash kernel") {
  constexpr std::int64_t B = 2, Lq = 20, Lk = 28, Dm = 32, Dc = 24;
  constexpr auto x = fd::input<"x", float, B, Lq, Dm>();
  constexpr auto enc = fd::input<"enc", float, B, Lk, Dc>();
  constexpr auto rel = fd::input<"rel", float, 4, Lq, Lk>();
  constexpr auto alibi = fd::input<"alibi", float, 4, 1, Lq>();
  constexpr auto pad = fd::input<"pad", bool, B, Lk>();
  constexpr std::int64_t scores_bytes = B * 4 * Lq * Lk * std::int64_t(sizeof(float));
  using O = fd::nn::attention_options;
  constexpr O cross{.heads = 4, .kv_heads = 2, .scale = 1.0, .context = true, .bias = true};
  constexpr auto p1 = fd::compile(fd::nn::attention<"xa", cross>(x, enc, rel));
  CHECK(groups_of_kind<decltype(p1)>(fd::plan::kernel_kind::attention) == 1);
  CHECK(p1.arena_bytes() < scores_bytes);
  check_program(p1, 21);
  constexpr O masked{.heads = 4, .context = true, .bias = true, .mask = true};
  constexpr auto p2 = fd::compile(fd::nn::attention<"xa", masked>(x, enc, rel, pad));
  CHECK(groups_of_kind<decltype(p2)>(fd::plan::kernel_kind::attention) == 1);
  check_program(p2, 22);
  constexpr O sliding{.heads = 4, .kv_heads = 2, .causal = true, .window = 5, .bias = true};
  constexpr auto p3 = fd::compile(fd::nn::attention<"sa", sliding>(x, alibi));
  CHECK(groups_of_kind<decltype(p3)>(fd::plan::kernel_kind::attention) == 1);
  CHECK(attention_of<decltype(p3)>().att.causal);
  CHECK(p3.arena_bytes() < scores_bytes);
  check_program(p3, 23);
  constexpr O local{.heads = 4, .kv_heads = 1, .scale = 0.5, .window = 3};
  constexpr auto p4 = fd::compile(fd::nn::attention<"sa", local>(x));
  CHECK(groups_of_kind<decltype(p4)>(fd::plan::kernel_kind::attention) == 1);
  check_program(p4, 24);
}

TEST_CASE("GEMM epilogues of any elementwise shape run in the GEMM") {
  constexpr auto x = fd::input<"x", float, 37, 29>();
  constexpr auto w = fd::param<"w", float, 29, 45>();
  constexpr auto bias = fd::param<"b", float, 45>();
  constexpr auto colv = fd::input<"c", float, 37, 1>();
  constexpr auto res = fd::input<"r", float, 37, 45>();
  constexpr auto mm = fd::matmul(x, w);
  constexpr auto p1 = fd::compile(mm - bias);
  CHECK(groups_of_kind<decltype(p1)>(fd::plan::kernel_kind::gemm) == 1);
  check_program(p1, 20);
  check_program(fd::compile(fd::gelu(mm + bias) * lit<2.0>), 21);
  check_program(fd::compile(fd::tanh(mm * colv + bias)), 22);
  check_program(fd::compile(res + fd::silu(mm) * fd::sigmoid(res)), 23);
  check_program(fd::compile(fd::max(mm, lit<0.0>) / lit<3.0>), 24);
  check_program(fd::compile(fd::cast<fd::bf16>(mm + bias)), 25, 8e-3);
  // an intermediate of the epilogue read elsewhere too
  constexpr auto t = mm + bias;
  check_program(fd::compile(fd::relu(t), fd::sum<1>(t)), 26);
}

TEST_CASE("batched and transposed matmuls with epilogues") {
  constexpr auto a = fd::input<"a", float, 3, 17, 9>();
  constexpr auto b = fd::input<"b", float, 3, 9, 11>();
  check_program(fd::compile(fd::exp(fd::matmul(a, b) * lit<0.1>)), 27);
  constexpr auto at = fd::input<"at", float, 3, 9, 17>();
  check_program(fd::compile(fd::matmul<true, false>(at, b) + lit<1.0>), 28);
  constexpr auto bt = fd::input<"bt", float, 3, 11, 9>();
  check_program(fd::compile(fd::matmul<false, true>(a, bt)), 29);
}

// A stack of weights [E, K, N] (experts', or heads') read by a batched matmul is packed once, at
// bind, slice by slice; so is its transpose, and one read by a shared A. A weight broadcast along
// a batch axis is packed per call (a slice would be packed again per index).
TEST_CASE("stacked weights [E, K, N] of batched matmuls are packed at bind, slice by slice") {
  constexpr std::int64_t E = 4, T = 10, K = 24, N = 20;
  constexpr auto xe = fd::input<"xe", float, E, T, K>();
  constexpr auto xt = fd::input<"xt", float, T, K>();
  constexpr auto w = fd::param<"w", float, E, K, N>();
  constexpr auto wt = fd::param<"wt", fd::bf16, E, N, K>();
  constexpr auto bias = fd::param<"bias", float, E, 1, N>();
  constexpr auto p =
      fd::compile(fd::gelu(fd::matmul(xe, w) + bias),
                  fd::matmul<false, true>(xe, fd::cast<float>(wt)), fd::matmul(xt, w) * lit<0.5>);
  using P = decltype(p);
  const auto& lp = fd::cpu::executor<P>::kernels_plan();
  int stacked = 0;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi)
    if (lp.desc[std::size_t(gi)].kind == fd::plan::kernel_kind::gemm)
      for (int q = 0; q < lp.desc[std::size_t(gi)].n_gemm; ++q) {
        const fd::plan::gemm_part& g = lp.desc[std::size_t(gi)].gemm[std::size_t(q)];
        CHECK(g.b_param);
        stacked += g.b_slices == E;
      }
  CHECK(stacked == 3);
  check_program(p, 30, 1e-5);
  constexpr auto shared = fd::param<"shared", float, 1, K, N>();  // broadcast over E: per call
  constexpr auto pb = fd::compile(fd::matmul(xe, fd::broadcast_to<E, K, N>(shared)));
  check_program(pb, 31);
}

TEST_CASE("row kernels with prologues and epilogues, over any axis") {
  constexpr auto x = fd::input<"x", float, 13, 37>();
  constexpr auto y = fd::input<"y", float, 37>();
  constexpr auto g = fd::param<"g", float, 37>();
  constexpr auto bb = fd::param<"bb", float, 37>();
  check_program(fd::compile(fd::softmax(x + y) * lit<3.0>), 30);
  check_program(fd::compile(fd::layernorm(x * lit<2.0>, g, bb) + y), 31);
  check_program(fd::compile(fd::rmsnorm(fd::tanh(x), g)), 32);
  check_program(fd::compile(fd::log_softmax<0>(x)), 33);
  check_program(fd::compile(fd::softmax<0>(fd::transpose(x))), 34);
  constexpr auto gb = fd::param<"gb", fd::bf16, 37>();
  check_program(fd::compile(fd::rmsnorm(x, fd::cast<float>(gb))), 35);
}

TEST_CASE("gathers, dynamic slices and updates, argmax and reductions with epilogues") {
  constexpr auto table = fd::param<"table", float, 11, 19>();
  constexpr auto ids = fd::input<"ids", std::int32_t, 3, 5>();  // some ids outside [0, 11)
  constexpr auto pos = fd::input<"pos", std::int32_t>();
  constexpr auto e = fd::gather(table, ids);
  check_program(fd::compile(fd::layernorm(e + lit<1.0>, fd::param<"g", float, 19>(),
                                          fd::param<"b", float, 19>())),
                40);
  check_program(fd::compile(fd::dynamic_slice<1, 2>(fd::exp(e), pos)), 41);
  constexpr auto cache = fd::input<"cache", float, 3, 8, 19>();
  check_program(fd::compile(fd::dynamic_update_slice<1>(cache, fd::tanh(e), pos)), 42);
  check_program(fd::compile(fd::argmax<1>(e), fd::argmax<0, true>(e)), 43);
  constexpr auto x = fd::input<"x", float, 6, 33>();
  check_program(fd::compile(fd::sqrt(fd::sum<1>(x * x)) + lit<1.0>, fd::max<0>(fd::abs(x))), 44);
  check_program(fd::compile(x / fd::sqrt(fd::sum<1, true>(x * x) + lit<1e-6>)), 45);
}

TEST_CASE("RoPE, RMSNorm and SwiGLU of a LLaMA-style block run as generated kernels") {
  constexpr auto x = fd::input<"x", float, 12, 64>();
  constexpr auto cos = fd::input<"cos", float, 12, 8>();
  constexpr auto sin = fd::input<"sin", float, 12, 8>();
  constexpr auto p = fd::compile(fd::models::llama_block<4, 2, 96>(x, cos, sin));
  CHECK(groups_of_kind<decltype(p)>(fd::plan::kernel_kind::attention) == 1);
  check_program(p, 50, 1e-4);
}

TEST_CASE("bf16 activations through GEMMs and attention are widened, not refused") {
  constexpr auto x = fd::input<"x", fd::bf16, 16, 32>();
  constexpr auto p = fd::compile(fd::nn::attention<"a", 4, 4, true>(x));
  check_program(p, 51, 3e-2);
}
