#include "fusedsl/tpu/execute.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "../common/compare.hpp"
#include "fusedsl/hlo/builder.hpp"
#include "fusedsl/tpu/cost.hpp"
#include "fusedsl/tpu/schedule.hpp"
#include "invariants.hpp"

namespace tpu = fusedsl::tpu;
namespace hlo = fusedsl::hlo;
namespace ft = fusedsl::test;
using hlo::element_type;

namespace {

tpu::value random_value(const hlo::shape& s, unsigned seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, scale);
  auto v = tpu::value::zeros(s);
  for (auto& x : v.data) x = hlo::round_to(s.type, dist(rng));
  return v;
}

double bf16(double x) { return hlo::round_to(element_type::bf16, x); }

hlo::module make_module(hlo::computation entry, std::vector<hlo::computation> callees = {}) {
  hlo::module m;
  m.name = "test";
  for (auto& c : callees) m.add_computation(std::move(c));
  m.set_entry(std::move(entry));
  hlo::verify(m);
  return m;
}

hlo::dot_dimension_numbers mm_dims() {
  hlo::dot_dimension_numbers dn;
  dn.lhs_contracting = {1};
  dn.rhs_contracting = {0};
  return dn;
}

void check_schedule_sane(const tpu::schedule& s) {
  check_invariants(s.kernels, s.tl, s.chip);
  const auto c = tpu::summarize(s);
  for (const auto& k : c.kernels) {
    CAPTURE(k.name);
    CHECK(k.time_s >= k.roofline_s * (1 - 1e-12));
  }
  CHECK(c.total_time_s >= c.roofline_time_s * (1 - 1e-12));
  CHECK(c.vmem_peak_bytes <= s.chip.vmem_bytes_per_core);
}

}  // namespace

TEST_CASE("dot + bias + tanh runs as one MXU kernel with a fused epilogue and matches loops") {
  hlo::computation_builder b("main");
  const auto x = b.add_parameter(hlo::shape::array(element_type::f32, {64, 96}), "x");
  const auto w = b.add_parameter(hlo::shape::array(element_type::f32, {96, 160}), "w");
  const auto bias = b.add_parameter(hlo::shape::array(element_type::f32, {160}), "bias");
  const auto d = b.add_dot(x, w, mm_dims());
  const auto bb = b.add_broadcast(bias, {64, 160}, {1});
  const auto a = b.add_binary(hlo::opcode::add, d, bb, "biased");
  b.add_unary(hlo::opcode::tanh, a, "act");
  const auto m = make_module(b.build());
  for (const auto& chip : tpu::known_chips()) {
    CAPTURE(chip.name);
    const auto s = tpu::make_schedule(m, chip);
    std::size_t matmuls = 0;
    for (std::size_t k = 0; k < s.kernels.size(); ++k)
      if (s.kernels[k].kind == tpu::kernel_kind::matmul) {
        ++matmuls;
        CHECK(s.kernels[k].ops == std::vector<std::string>{"dot", "biased", "act"});
        CHECK(s.kernels[k].name == "act");
      } else {
        CHECK(s.kernels[k].kind == tpu::kernel_kind::layout);
      }
    CHECK(matmuls == 1);
    check_schedule_sane(s);
    const auto X = random_value(b.shape_of(x), 1), W = random_value(b.shape_of(w), 2, 0.1),
               B = random_value(b.shape_of(bias), 3);
    const auto out = tpu::execute(s, {X, W, B});
    REQUIRE(out.data.size() == 64u * 160u);
    std::vector<double> want;
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 160; ++j) {
        double acc = 0;
        for (int k = 0; k < 96; ++k) acc += X.data[i * 96 + k] * W.data[k * 160 + j];
        want.push_back(std::tanh(acc + B.data[j]));
      }
    CHECK(ft::compare(out.data, want, ft::abs_tol(2e-6)));
  }
}

TEST_CASE("a bf16 dot multiplies bf16 operands and accumulates in f32, as the MXU does; its "
          "operand converts are fused into it") {
  hlo::computation_builder b("main");
  const auto x = b.add_parameter(hlo::shape::array(element_type::f32, {48, 300}), "x");
  const auto w = b.add_parameter(hlo::shape::array(element_type::f32, {300, 40}), "w");
  const auto xb = b.add_convert(x, element_type::bf16, "xb");
  const auto wb = b.add_convert(w, element_type::bf16, "wb");
  b.add_dot(xb, wb, mm_dims(), element_type::f32, "dot");
  const auto m = make_module(b.build());
  // Small blocks so that k=300 takes three accumulation steps.
  tpu::schedule_options opt;
  opt.blocks = tpu::matmul_blocks{16, 128, 128};
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"), opt);
  check_schedule_sane(s);
  const auto X = random_value(b.shape_of(x), 4), W = random_value(b.shape_of(w), 5);
  const auto out = tpu::execute(s, {X, W});
  std::vector<double> want_bf16, want_f32;
  for (int i = 0; i < 48; ++i)
    for (int j = 0; j < 40; ++j) {
      double ref_bf16 = 0, ref_f32 = 0;
      for (int k = 0; k < 300; ++k) {
        ref_bf16 += bf16(X.data[i * 300 + k]) * bf16(W.data[k * 40 + j]);
        ref_f32 += X.data[i * 300 + k] * W.data[k * 40 + j];
      }
      want_bf16.push_back(ref_bf16);
      want_f32.push_back(ref_f32);
    }
  CHECK(ft::compare(out.data, want_bf16, ft::abs_tol(1e-4)));  // f32 sums of exact bf16 products
  const auto f32 = ft::compare(out.data, want_f32, ft::abs_tol(1e-2));
  CHECK(std::isfinite(f32.max_error));
  CHECK_FALSE(f32);  // the operands really were rounded to bf16: some element is off by > 1e-2
  std::size_t matmuls = 0;
  for (const auto& k : s.kernels)
    if (k.kind == tpu::kernel_kind::matmul) {
      ++matmuls;
      CHECK(k.mm.mxu_passes == 1);
      CHECK(k.blocks.bk == 128);
      CHECK(k.steps.size() == 3u * 1u * 1u * 3u);
      // The converts run on each block in VMEM: HBM sees the f32 sources, once per use.
      CHECK(k.ops == std::vector<std::string>{"xb", "wb", "dot"});
      CHECK(k.hbm_bytes == (48 * 300 * 4 * 1 + 300 * 40 * 4 * 3 + 48 * 40 * 4));
    } else {
      CHECK(k.kind == tpu::kernel_kind::layout);
    }
  CHECK(matmuls == 1);
}

namespace {

// x s8[m,k] . w s8[k,n] -> s32, converted to f32 and scaled per column: an int8 linear layer as
// XLA reads one.
hlo::module int8_linear(std::int64_t m, std::int64_t k, std::int64_t n,
                        element_type t = element_type::s8) {
  hlo::computation_builder b("main");
  const auto x = b.add_parameter(hlo::shape::array(t, {m, k}), "x");
  const auto w = b.add_parameter(hlo::shape::array(t, {k, n}), "w");
  const auto s = b.add_parameter(hlo::shape::array(element_type::f32, {n}), "scale");
  const bool ints = t == element_type::s8;
  const auto d = b.add_dot(x, w, mm_dims(), ints ? element_type::s32 : element_type::f32, "dot");
  const auto f = ints ? b.add_convert(d, element_type::f32, "as_f32") : d;
  const auto sb = b.add_broadcast(s, {m, n}, {1});
  b.add_binary(hlo::opcode::multiply, f, sb, "scaled");
  return make_module(b.build());
}

const tpu::kernel_cost& the_matmul(const tpu::cost_summary& c) {
  for (const auto& k : c.kernels)
    if (k.kind == tpu::kernel_kind::matmul) return k;
  FAIL("no matmul kernel");
  return c.kernels.front();
}

}  // namespace

TEST_CASE("an int8 dot sums its products exactly into s32, as the MXU's integer accumulators do") {
  // Sums past 2^24 with odd values: an f32 accumulator would round them.
  constexpr std::int64_t m = 21, k = 1900, n = 45;
  hlo::computation_builder b("main");
  const auto x = b.add_parameter(hlo::shape::array(element_type::s8, {m, k}), "x");
  const auto w = b.add_parameter(hlo::shape::array(element_type::s8, {k, n}), "w");
  b.add_dot(x, w, mm_dims(), element_type::s32, "dot");
  const auto mod = make_module(b.build());
  std::mt19937 rng(7);
  auto X = tpu::value::zeros(b.shape_of(x)), W = tpu::value::zeros(b.shape_of(w));
  for (std::size_t i = 0; i < X.data.size(); ++i)
    X.data[i] = i < std::size_t(k) ? -128.0 : double(int(rng() % 28) + 100);  // row 0: all -128
  for (std::size_t i = 0; i < W.data.size(); ++i) W.data[i] = double(int(rng() % 28) + 100);
  for (std::int64_t p = 0; p < k; ++p) {
    W.data[std::size_t(p * n)] = -128.0;                              // column 0
    W.data[std::size_t(p * n + 1)] = double(int(rng() % 256) - 128);  // column 1: random signs
  }
  tpu::schedule_options opt;
  opt.blocks = tpu::matmul_blocks{16, 512, 128};  // four k steps
  for (const char* chip : {"v4", "v5e", "v6e"}) {
    CAPTURE(chip);
    const auto s = tpu::make_schedule(mod, tpu::chip_by_name(chip), opt);
    check_schedule_sane(s);
    const auto out = tpu::execute(s, {X, W});
    int wrong = 0, past_f32 = 0;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        std::int64_t want = 0;
        for (std::int64_t p = 0; p < k; ++p)
          want += std::int64_t(X.data[std::size_t(i * k + p)]) *
                  std::int64_t(W.data[std::size_t(p * n + j)]);
        past_f32 += want > (1 << 24) && want % 2 != 0;
        wrong += out.data[std::size_t(i * n + j)] != double(want);
      }
    CHECK(wrong == 0);
    CHECK(past_f32 > 0);                          // the case really needs the exact sums
    CHECK(out.data[0] == double(128 * 128 * k));  // -128 * -128 over all of k
  }
}

TEST_CASE("int8 dots run at the chip's int8 rate and count one byte per operand element") {
  constexpr std::int64_t m = 512, k = 1024, n = 512;
  const auto int8 = int8_linear(m, k, n), bf16_mod = int8_linear(m, k, n, element_type::bf16);
  for (const auto& chip : tpu::known_chips()) {
    CAPTURE(chip.name);
    const auto c8 = tpu::summarize(tpu::make_schedule(int8, chip));
    const auto c16 = tpu::summarize(tpu::make_schedule(bf16_mod, chip));
    const tpu::kernel_cost& k8 = the_matmul(c8);
    const tpu::kernel_cost& k16 = the_matmul(c16);
    CHECK(k8.mm.mxu_rate == chip.int8_rate);
    CHECK(k16.mm.mxu_rate == 1);
    CHECK(k8.mm.lhs_bytes == 1);
    CHECK(k8.mm.rhs_bytes == 1);
    // Blocks that divide the problem: the MXU's busy time is the useful products at its rate.
    const double macs = double(m) * k * n;
    const double mxu_s = macs / (chip.mxu_macs_per_cycle() * chip.int8_rate) / chip.clock_hz();
    CHECK(ft::compare(k8.mxu_s, mxu_s, ft::rel_tol(1e-9)));
    CHECK(ft::compare(k16.mxu_s * (1.0 / chip.int8_rate), k8.mxu_s, ft::rel_tol(1e-9)));
    CHECK(k8.hbm_bytes < k16.hbm_bytes);
    CHECK(k8.roofline_s <= k16.roofline_s);
    CHECK(k8.mxu_utilization <= 1.0);
    CHECK(c8.mxu_utilization <= 1.0);
  }
  CHECK(tpu::chip_by_name("v4").int8_rate == 1);
  CHECK(tpu::chip_by_name("v5e").int8_rate == 2);
}

TEST_CASE("a dot whose result has two users is not fused; each user runs as a vector kernel") {
  hlo::computation_builder b("main");
  const auto x = b.add_parameter(hlo::shape::array(element_type::f32, {16, 128}), "x");
  const auto d = b.add_dot(x, x, [] {
    hlo::dot_dimension_numbers dn;
    dn.lhs_contracting = {1};
    dn.rhs_contracting = {1};
    return dn;
  }(), std::nullopt, "gram");
  const auto e = b.add_unary(hlo::opcode::exponential, d, "e");
  const auto n = b.add_unary(hlo::opcode::negate, d, "n");
  b.add_binary(hlo::opcode::add, e, n, "sum");
  const auto m = make_module(b.build());
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  check_schedule_sane(s);
  std::vector<std::vector<std::string>> groups;
  for (const auto& k : s.kernels)
    if (k.kind != tpu::kernel_kind::layout) groups.push_back(k.ops);
  CHECK(groups == std::vector<std::vector<std::string>>{{"gram"}, {"e"}, {"n", "sum"}});
  const auto X = random_value(b.shape_of(x), 6, 0.05);
  const auto out = tpu::execute(s, {X});
  std::vector<double> want;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double g = 0;
      for (int k = 0; k < 128; ++k) g += X.data[i * 128 + k] * X.data[j * 128 + k];
      want.push_back(std::exp(g) - g);
    }
  CHECK(ft::compare(out.data, want, ft::abs_tol(1e-5)));
}

TEST_CASE("a batched dot with batch and contracting dims in any position matches loops") {
  hlo::computation_builder b("main");
  const auto q = b.add_parameter(hlo::shape::array(element_type::f32, {16, 3, 32}), "q");  // s,h,d
  const auto k = b.add_parameter(hlo::shape::array(element_type::f32, {3, 32, 20}), "k");  // h,d,t
  hlo::dot_dimension_numbers dn;
  dn.lhs_batch = {1};
  dn.rhs_batch = {0};
  dn.lhs_contracting = {2};
  dn.rhs_contracting = {1};
  b.add_dot(q, k, dn, std::nullopt, "scores");  // [h, s, t]
  const auto m = make_module(b.build());
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v6e"));
  check_schedule_sane(s);
  const auto Q = random_value(b.shape_of(q), 7), K = random_value(b.shape_of(k), 8);
  const auto out = tpu::execute(s, {Q, K});
  REQUIRE(out.shape.dims == std::vector<std::int64_t>{3, 16, 20});
  std::vector<double> want;
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 16; ++i)
      for (int t = 0; t < 20; ++t) {
        double acc = 0;
        for (int d = 0; d < 32; ++d)
          acc += Q.data[(i * 3 + h) * 32 + d] * K.data[(h * 32 + d) * 20 + t];
        want.push_back(acc);
      }
  CHECK(ft::compare(out.data, want, ft::abs_tol(1e-5)));
}

TEST_CASE("reduce, transpose, slice, concatenate, iota, compare/select, call and tuples compute "
          "what plain loops compute") {
  const auto add = hlo::make_scalar_computation("add", hlo::opcode::add, element_type::f32);
  const auto mx = hlo::make_scalar_computation("max", hlo::opcode::maximum, element_type::f32);
  // callee(x) = x * 2
  hlo::computation_builder cb("twice");
  const auto cx = cb.add_parameter(hlo::shape::array(element_type::f32, {4, 6}), "cx");
  const auto two = cb.add_constant(hlo::literal::scalar(element_type::f32, 2.0), "two");
  const auto two_b = cb.add_broadcast(two, {4, 6}, {});
  cb.add_binary(hlo::opcode::multiply, cx, two_b, "doubled");
  const auto twice = cb.build();

  hlo::computation_builder b("main");
  const auto x = b.add_parameter(hlo::shape::array(element_type::f32, {4, 6}), "x");
  const auto zero = b.add_constant(hlo::literal::scalar(element_type::f32, 0.0), "zero");
  const auto ninf = b.add_constant(hlo::literal::scalar(element_type::f32, -INFINITY), "ninf");
  const auto rsum = b.add_reduce(x, zero, {1}, add, "rsum");                  // [4]
  const auto cmax = b.add_reduce(x, ninf, {0}, mx, "cmax");                   // [6]
  const auto xt = b.add_transpose(x, {1, 0}, "xt");                          // [6,4]
  const auto sl = b.add_slice(x, {{1, 4, 2}, {0, 6, 3}}, "sl");              // [2,2]
  const auto cat = b.add_concatenate({x, x}, 0, "cat");                      // [8,6]
  const auto ia = b.add_iota(hlo::shape::array(element_type::s32, {4, 6}), 0, "rows");
  const auto ib = b.add_iota(hlo::shape::array(element_type::s32, {4, 6}), 1, "cols");
  const auto ge = b.add_compare(ia, ib, hlo::comparison_direction::ge, "lower");
  const auto nb = b.add_broadcast(ninf, {4, 6}, {}, "ninf_b");
  const auto masked = b.add_select(ge, x, nb, "masked");
  const auto called = b.add_call({x}, twice, "call_twice");
  const auto tup = b.add_tuple({x, called}, "pair");
  const auto second = b.add_get_tuple_element(tup, 1, "second");
  b.add_tuple({rsum, cmax, xt, sl, cat, masked, second}, "results");
  const auto m = make_module(b.build(), {add, mx, twice});
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  check_schedule_sane(s);
  const auto X = random_value(b.shape_of(x), 9);
  const auto out = tpu::execute(s, {X});
  REQUIRE(out.elements.size() == 7u);
  auto xv = [&](int i, int j) { return X.data[std::size_t(i * 6 + j)]; };
  for (int i = 0; i < 4; ++i) {
    double sum = 0;
    for (int j = 0; j < 6; ++j) sum += xv(i, j);
    CHECK(ft::compare(out.elements[0].data[i], sum, ft::rel_tol(1e-6)));
  }
  for (int j = 0; j < 6; ++j) {
    double best = -INFINITY;
    for (int i = 0; i < 4; ++i) best = std::max(best, xv(i, j));
    CHECK(out.elements[1].data[j] == best);
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      CHECK(out.elements[2].data[j * 4 + i] == xv(i, j));
      CHECK(out.elements[4].data[i * 6 + j] == xv(i, j));
      CHECK(out.elements[4].data[(i + 4) * 6 + j] == xv(i, j));
      CHECK(out.elements[5].data[i * 6 + j] == (i >= j ? xv(i, j) : -INFINITY));
      CHECK(out.elements[6].data[i * 6 + j] == 2 * xv(i, j));
    }
  CHECK(out.elements[3].data == std::vector<double>{xv(1, 0), xv(1, 3), xv(3, 0), xv(3, 3)});
}

TEST_CASE("inputs of the wrong shape or count are rejected with the parameter's name") {
  hlo::computation_builder b("main");
  const auto x = b.add_parameter(hlo::shape::array(element_type::f32, {4, 6}), "x");
  b.add_unary(hlo::opcode::negate, x, "neg");
  const auto m = make_module(b.build());
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  CHECK_THROWS_WITH_AS(tpu::execute(s, {}), doctest::Contains("takes 1 inputs, got 0"),
                       tpu::tpu_error);
  CHECK_THROWS_WITH_AS(
      tpu::execute(s, {tpu::value::zeros(hlo::shape::array(element_type::f32, {6, 4}))}),
      doctest::Contains("input 0 (x) must be f32[4,6], got f32[6,4]"), tpu::tpu_error);
}

TEST_CASE("HLO fusions are kept as kernels: an output fusion with a dot becomes one MXU kernel, "
          "a loop fusion one VPU kernel") {
  // fused_mm(x, w, r) = dot(x, w) + r ; fused_act(y) = tanh(y) * 0.5
  hlo::computation_builder fm("fused_mm");
  const auto fx = fm.add_parameter(hlo::shape::array(element_type::f32, {32, 256}), "fx");
  const auto fw = fm.add_parameter(hlo::shape::array(element_type::f32, {256, 128}), "fw");
  const auto fr = fm.add_parameter(hlo::shape::array(element_type::f32, {32, 128}), "fr");
  const auto fd = fm.add_dot(fx, fw, mm_dims(), std::nullopt, "fdot");
  fm.add_binary(hlo::opcode::add, fd, fr, "fadd");
  const auto fused_mm = fm.build();
  hlo::computation_builder fa("fused_act");
  const auto fy = fa.add_parameter(hlo::shape::array(element_type::f32, {32, 128}), "fy");
  const auto half = fa.add_constant(hlo::literal::scalar(element_type::f32, 0.5), "half");
  const auto hb = fa.add_broadcast(half, {32, 128}, {}, "half_b");
  const auto t = fa.add_unary(hlo::opcode::tanh, fy, "ft");
  fa.add_binary(hlo::opcode::multiply, t, hb, "fmul");
  const auto fused_act = fa.build();

  hlo::computation_builder b("main");
  const auto x = b.add_parameter(hlo::shape::array(element_type::f32, {32, 256}), "x");
  const auto w = b.add_parameter(hlo::shape::array(element_type::f32, {256, 128}), "w");
  const auto r = b.add_parameter(hlo::shape::array(element_type::f32, {32, 128}), "r");
  const auto f1 = b.add_fusion({x, w, r}, fused_mm, hlo::fusion_kind::output, "mm_fusion");
  b.add_fusion({f1}, fused_act, hlo::fusion_kind::loop, "act_fusion");
  const auto m = make_module(b.build(), {fused_mm, fused_act});
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  check_schedule_sane(s);
  std::vector<std::pair<std::string, tpu::kernel_kind>> kernels;
  for (const auto& k : s.kernels)
    if (k.kind != tpu::kernel_kind::layout) kernels.push_back({k.name, k.kind});
  CHECK(kernels ==
        std::vector<std::pair<std::string, tpu::kernel_kind>>{
            {"mm_fusion", tpu::kernel_kind::matmul}, {"act_fusion", tpu::kernel_kind::vector}});
  // The output fusion reads x, w and r once and writes its result once.
  CHECK(s.kernels[3].hbm_bytes == (32 * 256 + 256 * 128 + 32 * 128 + 32 * 128) * 4);
  const auto X = random_value(b.shape_of(x), 10), W = random_value(b.shape_of(w), 11, 0.05),
             R = random_value(b.shape_of(r), 12);
  const auto out = tpu::execute(s, {X, W, R});
  std::vector<double> want;
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 128; ++j) {
      double acc = R.data[i * 128 + j];
      for (int k = 0; k < 256; ++k) acc += X.data[i * 256 + k] * W.data[k * 128 + j];
      want.push_back(0.5 * std::tanh(acc));
    }
  CHECK(ft::compare(out.data, want, ft::abs_tol(2e-6)));
}
