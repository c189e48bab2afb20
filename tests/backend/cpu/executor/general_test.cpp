// Programs of every shape run as generated kernels and match
// the reference; edge values propagate as the reference defines them.
#include <limits>

#include "check.hpp"

namespace fd = fusedsl;

TEST_CASE("loop, reduce and layout groups of a hand-written program match the reference") {
  constexpr auto x = fd::input<"x", float, 7, 13>();
  constexpr auto y = fd::input<"y", float, 13>();
  constexpr auto w = fd::param<"w", float, 13, 5>();
  constexpr auto h = fd::tanh(x * y - fd::lit<0.25>);
  constexpr auto r = fd::mean<0, true>(fd::exp(h));               // reduce with a prologue
  constexpr auto s = fd::softmax<0>(fd::transpose(h));            // softmax over a non-last axis
  constexpr auto c = fd::concat<1>(fd::slice<1, 2, 9>(h), fd::matmul(h, w));  // layout + matmul
  constexpr auto m =
      fd::max(fd::matmul(h, w) / fd::lit<3.0>, fd::lit<0.0>);  // epilogue the GEMM lacks
  constexpr auto p = fd::compile(r, s, c, m);
  fd::cpu::executor ex(p);
  auto b = fd::test::bind_random(ex, 4);
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(1e-5)));
  CHECK(ex.stats().interpreted_groups == 0);  // every group is a generated kernel
}

TEST_CASE("a fully masked softmax row is zeros and NaN propagates, as in the reference") {
  constexpr auto x = fd::input<"x", float, 4, 16>();
  constexpr auto keep = fd::input<"keep", float, 4, 16>();
  constexpr auto masked = fd::where(keep > fd::lit<0.5>, x, fd::neg_inf);
  constexpr auto p = fd::compile(fd::softmax(masked), fd::log_softmax(x) + fd::lit<1.0>);
  fd::cpu::executor ex(p);
  fd::tensor<float, 4, 16> xv, kv;
  for (int i = 0; i < 64; ++i) {
    xv[i] = float(i % 7) - 3.0f;
    kv[i] = (i / 16 == 1) ? 0.0f : 1.0f;  // row 1 entirely masked
  }
  xv[3 * 16 + 5] = std::numeric_limits<float>::quiet_NaN();  // row 3 has a NaN
  xv[2 * 16 + 1] = std::numeric_limits<float>::infinity() * -1.0f;
  ex.bind("x", xv);
  ex.bind("keep", kv);
  fd::tensor<float, 4, 16> sm, ls;
  ex.bind_output(0, sm);
  ex.bind_output(1, ls);
  ex.run();
  for (int j = 0; j < 16; ++j) {
    CHECK(sm(1, j) == 0.0f);
    CHECK(std::isnan(sm(3, j)));
  }
  CHECK(sm(2, 1) == 0.0f);
  CHECK(ls(2, 1) == -std::numeric_limits<float>::infinity());
  const auto expected =
      fd::reference::run(fd::graph::graph_view(p.graph), {{"x", xv}, {"keep", kv}});
  CHECK(fd::test::compare(sm.span(), std::span<const float>(expected[0].data<float>(), 64),
                          fd::test::allclose(1e-6, 1e-6), fd::test::nans::expected));
}

TEST_CASE("bf16 weights are widened once when bound and match the reference") {
  constexpr auto x = fd::input<"x", float, 33, 40>();
  constexpr auto w = fd::param<"w", fd::bf16, 40, 17>();
  constexpr auto p = fd::compile(fd::gelu(fd::matmul(x, fd::cast<float>(w))));
  fd::cpu::executor ex(p);
  auto b = fd::test::bind_random(ex, 5);
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(1e-5)));
}

// The plan checked numerically before any fast kernel: every group run node by node by the
// interpreter, intermediates of a group in scratch, group results at their planned arena offsets
// (buffers shared in place included), against the unfused reference.
template <class Program>
fd::test::comparison planned_interpreted_error(unsigned seed) {
  fd::cpu::executor<Program> ex(Program{}, fd::cpu::threads{1}, fd::cpu::interpreter_only{});
  auto b = fd::test::bind_random(ex, seed);
  const auto err = fd::test::compare_with_reference(ex, b, fd::test::rel_tol(1e-5));
  CHECK(ex.stats().fast_groups == 0);
  return err;
}

TEST_CASE("planned programs run group by group over the arena match the unfused reference") {
  constexpr auto x = fd::input<"x", float, 24, 32>();
  constexpr auto post =
      fd::compile(fd::nn::stack<"layers", 3>(fd::nn::transformer_block<fd::nn::post_ln, 4, 64>, x));
  constexpr auto pre = fd::compile(fd::nn::stack<"l", 2>(
      fd::nn::transformer_block<fd::nn::pre_ln, 8, 48, 2, true, fd::nn::activation::gelu>, x));
  constexpr auto g = fd::param<"g", float, 32>();
  constexpr auto custom = fd::compile(
      fd::nn::stack<"b", 4>(fd::nn::block([](auto v) {
                              return fd::rmsnorm(v + fd::nn::linear<"lin", 32>(fd::silu(v)),
                                                 fd::param<"g", float, 32>());
                            }),
                            x),
      fd::softmax(x * g));
  CHECK(planned_interpreted_error<decltype(post)>(11));
  CHECK(planned_interpreted_error<decltype(pre)>(12));
  CHECK(planned_interpreted_error<decltype(custom)>(13));
}

TEST_CASE("an output returned twice, and an input returned as is, are each written") {
  constexpr auto x = fd::input<"x", float, 3, 5>();
  constexpr auto s = fd::softmax(x);
  constexpr auto p = fd::compile(s, fd::softmax<-1>(x), x);
  static_assert(p.graph.n_outputs == 3);
  fd::cpu::executor ex(p);
  auto b = fd::test::bind_random(ex, 21);
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(1e-6)));
}

TEST_CASE("i8 and u8 values: loads, saturating casts and sums, as the reference computes them") {
  constexpr auto q = fd::input<"q", std::int8_t, 13, 37>();
  constexpr auto u = fd::input<"u", std::uint8_t, 13, 37>();
  constexpr auto x = fd::input<"x", float, 13, 37>();
  constexpr auto dequantized = fd::cast<float>(q) * fd::lit<0.05>;        // i8 loads
  constexpr auto quantized = fd::cast<std::int8_t>(x * fd::lit<20.0>);    // saturates at ±127
  constexpr auto shifted = fd::cast<float>(u) - fd::lit<128.0>;           // u8 loads
  constexpr auto to_u8 = fd::cast<std::uint8_t>(x * fd::lit<30.0> + fd::lit<100.0>);
  constexpr auto p = fd::compile(dequantized, quantized, q + q, shifted, to_u8,
                                 fd::sum<1>(fd::cast<float>(q)));  // a reduce over i8
  fd::cpu::executor ex(p);
  auto b = fd::test::bind_random(ex, 5);
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(1e-6)));
  CHECK(ex.stats().interpreted_groups == 0);
}

// floor, ceil, trunc and round (half to even) in a loop kernel over ties, +-0, the last floats with
// a fraction, +-inf and NaN, and in a GEMM's epilogue over exact sums of halves (so that the
// products round the same in any order), exactly as the reference.
TEST_CASE("floor, ceil, trunc and round match the reference exactly, in loops and GEMM epilogues") {
  constexpr auto x = fd::input<"x", float, 7, 13>();
  constexpr auto w = fd::param<"w", float, 13, 9>();
  constexpr auto halves = fd::matmul(x, w) * fd::lit<0.5>;
  constexpr auto p = fd::compile(fd::floor(x), fd::ceil(x), fd::trunc(x), fd::round(x),
                                 fd::round(x * fd::lit<0.5>) - fd::floor(-x));
  fd::cpu::executor ex(p);
  static_assert(p.graph.n_outputs == 5);
  const float inf = std::numeric_limits<float>::infinity();
  const float edges[] = {0.5f,
                         -0.5f,
                         1.5f,
                         -2.5f,
                         2.5f,
                         -0.0f,
                         0.0f,
                         0.49999997f,
                         -0.49999997f,
                         8388607.5f,
                         -8388607.5f,
                         8388609.0f,
                         1e30f,
                         -1e30f,
                         inf,
                         -inf,
                         std::numeric_limits<float>::quiet_NaN(),
                         3.5f,
                         -3.5f,
                         100.5f};
  fd::tensor<float, 7, 13> xv;
  fd::tensor<float, 13, 9> wv;
  for (int i = 0; i < 7 * 13; ++i) xv[i] = i < 20 ? edges[i] : float(i % 11 - 5) * 0.5f;
  for (int i = 0; i < 13 * 9; ++i) wv[i] = float(i % 5 - 2);
  // The GEMM reads finite halves only (edge values would make its sums inf or NaN).
  fd::tensor<float, 7, 13> xg;
  for (int i = 0; i < 7 * 13; ++i) xg[i] = i < 20 ? float(i % 7 - 3) * 0.5f : xv[i];
  constexpr auto pg = fd::compile(fd::round(halves) + fd::trunc(halves) * fd::lit<100.0>,
                                  fd::ceil(fd::relu(halves)) - fd::floor(halves));
  fd::cpu::executor exg(pg);
  fd::test::bound_program b, bg;
  b.names = {"x"};
  bg.names = {"x", "w"};
  b.refs = {{b.names[0], xv}};
  bg.refs = {{bg.names[0], xg}, {bg.names[1], wv}};
  ex.bind("x", xv);
  exg.bind("x", xg);
  exg.bind("w", wv);
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(0.0, 0.0),
                                         fd::test::nans::expected));
  CHECK(fd::test::compare_with_reference(exg, bg, fd::test::rel_tol(0.0, 0.0)));
  CHECK(ex.stats().interpreted_groups == 0);
  CHECK(exg.stats().interpreted_groups == 0);
}

// quantize and dequantize (expr/quantize.hpp) as generated kernels: a per-row u8 quantization with
// zero points and its round trip in one loop kernel, an int8 weight dequantized per channel into a
// GEMM, and the GEMM's result quantized per channel in its epilogue; exact against the reference.
TEST_CASE("quantize and dequantize run in loop kernels and GEMM epilogues, as the reference") {
  constexpr auto x = fd::input<"x", float, 9, 21>();
  constexpr auto s = fd::input<"s", float, 9, 1>();
  constexpr auto z = fd::input<"z", std::uint8_t, 9, 1>();
  constexpr auto w = fd::param<"w", std::int8_t, 21, 13>();
  constexpr auto ws = fd::param<"ws", float, 13>();
  constexpr auto os = fd::param<"os", float, 13>();
  constexpr auto q = fd::quantize<std::uint8_t>(x, s, z);
  constexpr auto y = fd::matmul(fd::dequantize(q, s, z), fd::dequantize(w, ws));
  constexpr auto p = fd::compile(q, fd::dequantize(q, s, z), fd::quantize<std::int8_t>(y, os));
  fd::cpu::executor ex(p);
  fd::tensor<float, 9, 21> xv;
  fd::tensor<float, 9, 1> sv;
  fd::tensor<std::uint8_t, 9, 1> zv;
  fd::tensor<std::int8_t, 21, 13> wv;
  fd::tensor<float, 13> wsv, osv;
  for (int i = 0; i < 9 * 21; ++i) xv[i] = float(i % 23 - 7) * 0.125f;  // ties at scale 0.25
  for (int r = 0; r < 9; ++r) sv[r] = r % 2 ? 0.25f : 0.5f, zv[r] = std::uint8_t(100 + r);
  xv[5] = std::numeric_limits<float>::quiet_NaN();
  xv[6] = std::numeric_limits<float>::infinity();
  for (int i = 0; i < 21 * 13; ++i) wv[i] = std::int8_t(i % 255 - 127);
  for (int c = 0; c < 13; ++c) wsv[c] = 0.125f, osv[c] = 0.5f * float(c + 1);
  fd::test::bound_program b;
  b.names = {"x", "s", "z", "w", "ws", "os"};
  b.refs = {{b.names[0], xv}, {b.names[1], sv},  {b.names[2], zv},
            {b.names[3], wv}, {b.names[4], wsv}, {b.names[5], osv}};
  for (const auto& [name, value] : b.refs) ex.bind(name, value);
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(0.0, 0.0)));
  CHECK(ex.stats().interpreted_groups == 0);
}

// A group whose value depends on no input, parameter or state runs once, when the executor is
// built, into storage no later group reuses; a constant group that writes an output runs per call.
TEST_CASE("groups computed from constants only run once and keep their values across calls") {
  constexpr auto x = fd::input<"x", float, 64, 32>();
  constexpr auto w = fd::param<"w", float, 32, 32>();
  // [64, 1] from iota only (a reduce group), read by the first group and by no later one, so the
  // arena's planner gives its bytes to later values
  constexpr auto table = fd::sum<1, true>(fd::exp(fd::iota<float, 1, 64, 16>() * fd::lit<-0.25>) *
                                          fd::cos(fd::iota<float, 0, 64, 16>()));
  constexpr auto h1 = fd::softmax(fd::matmul(x, w) * table);
  constexpr auto h2 = fd::softmax(fd::matmul(h1, w) + h1);
  constexpr auto h3 = fd::tanh(fd::matmul(h2, w)) * h2;
  // an output from constants only, and a group from constants only that reads it: both per call
  constexpr auto waves = fd::sin(fd::iota<float, 0, 8, 4>() * fd::lit<0.5>);
  constexpr auto scaled = fd::input<"y", float, 8, 4>() * fd::exp(fd::sum<1, true>(waves));
  constexpr auto p = fd::compile(h3, waves, scaled);
  fd::cpu::executor ex(p);
  CHECK(ex.stats().constant_groups >= 1);
  CHECK(ex.footprint().constants >= 64 * 4);
  auto b = fd::test::bind_random(ex, 31);
  ex.profile(true);
  for (unsigned call = 0; call < 3; ++call) {
    // new values of x each call (compare_with_reference binds fresh output memory each time)
    std::mt19937 rng(call);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (std::size_t k = 0; k < b.names.size(); ++k)
      if (b.names[k] == "x")
        for (std::int64_t i = 0; i < 64 * 32; ++i) b.storage[k].data<float>()[i] = nd(rng);
    CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(1e-5)));
  }
  int not_run = 0;
  for (const auto& g : ex.profile_results()) not_run += g.calls == 0;
  CHECK(not_run == ex.stats().constant_groups);  // never run by a call
  CHECK(ex.stats().interpreted_groups == 0);
  fd::cpu::executor check(p, fd::cpu::threads{1}, fd::cpu::interpreter_only{true});
  CHECK(check.stats().constant_groups == 0);  // the interpreter computes everything per call
  auto bc = fd::test::bind_random(check, 31);
  CHECK(fd::test::compare_with_reference(check, bc, fd::test::rel_tol(1e-5)));
}

// A group whose value depends on parameters alone (an int8 weight dequantized; a bias gathered from
// a table by buckets of positions) runs at the first call after its parameters are bound, into
// storage no later group reuses, and again once one of them is bound anew; not on every call.
TEST_CASE("groups computed from parameters only run once per binding of their parameters") {
  constexpr auto x = fd::input<"x", float, 16, 24>();
  constexpr auto w = fd::param<"w", std::int8_t, 24, 24>();
  constexpr auto ws = fd::param<"ws", float, 24>();
  constexpr auto table = fd::param<"table", float, 8, 1>();
  constexpr auto bucket =  // 0..7, then 7
      fd::cast<std::int32_t>(fd::min(fd::iota<float, 0, 16>(), fd::lit<7.0>));
  constexpr auto bias = fd::tanh(fd::gather(table, bucket));  // [16, 1]
  constexpr auto h = fd::matmul(x, fd::dequantize(w, ws)) + bias;
  constexpr auto p = fd::compile(fd::softmax(h));
  fd::cpu::executor ex(p);
  auto b = fd::test::bind_random(ex, 7);
  ex.profile(true);
  for (int call = 0; call < 3; ++call)
    CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(1e-5)));
  const int at_bind = ex.stats().parameter_groups;
  CHECK(at_bind >= 2);  // the dequantized weight and the bias
  CHECK(ex.footprint().constants >= 24 * 24 * 4 + 16 * 4);
  int once = 0;
  for (const auto& g : ex.profile_results()) once += g.calls == 1;
  CHECK(once == at_bind);
  // new scales and a new table, bound again: the next calls read them
  for (std::size_t k = 0; k < b.names.size(); ++k)
    if (b.names[k] == "ws" || b.names[k] == "table") {
      float* v = b.storage[k].data<float>();
      for (std::int64_t i = 0; i < b.storage[k].shape().size(); ++i) v[i] = 0.5f - v[i];
      ex.bind(b.names[k], b.storage[k].ref());
    }
  for (int call = 0; call < 2; ++call)
    CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(1e-5)));
  once = 0;
  for (const auto& g : ex.profile_results()) once += g.calls == 2;
  CHECK(once == at_bind);
  CHECK(ex.stats().interpreted_groups == 0);
}
