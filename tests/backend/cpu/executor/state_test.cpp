// States (fd::state): tensors the executor keeps across calls, given new values by fd::update and
// written in place by a dynamic update slice; and decode attention over a cache that reads only
// the keys before a run-time length.
#include <cstring>
#include <random>

#include "check.hpp"
#include "fusedsl/plan/report.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;

TEST_CASE("a state keeps its value across calls and takes its update in place") {
  constexpr auto cache = fd::state<"cache", float, 8, 4>();
  constexpr auto row = fd::input<"row", float, 1, 4>();
  constexpr auto pos = fd::input<"pos", std::int32_t>();
  constexpr auto next = fd::dynamic_update_slice<0>(cache, row, pos);
  constexpr auto p = fd::compile(fd::sum<0>(next), fd::update(cache, next));
  fd::cpu::executor ex(p);
  CHECK(ex.footprint().states == 8 * 4 * 4 + 0);  // 128 bytes, 64-aligned
  fd::tensor<float, 4> total;
  fd::tensor<float, 1, 4> r;
  fd::tensor<std::int32_t> ps;
  ex.bind_output(0, total);
  ex.bind("row", r);
  ex.bind("pos", ps);
  for (int step = 0; step < 3; ++step) {
    for (int j = 0; j < 4; ++j) r[j] = float(step + 1) * float(j + 1);
    ps[0] = step;
    ex.run();
    for (int j = 0; j < 4; ++j) CHECK(total[j] == float((step + 1) * (step + 2) / 2 * (j + 1)));
  }
  const auto c = ex.state("cache");
  CHECK(static_cast<const float*>(c.data)[2 * 4 + 1] == 6.0f);
  ex.reset_states();
  CHECK(static_cast<const float*>(c.data)[2 * 4 + 1] == 0.0f);
  CHECK_THROWS_WITH_AS(ex.bind_output(1, total),
                       "output 1: it is the new value of state \"cache\", written into the state "
                       "(read it with state())",
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(ex.state("kv"), "state \"kv\": the program has no state of that name",
                       fd::binding_error);
  CHECK(ex.stats().interpreted_groups == 0);
}

namespace {
constexpr std::int64_t H = 4, Lmax = 40, Dh = 16;
constexpr auto kc = fd::state<"k_cache", float, H, Lmax, Dh>();
constexpr auto vc = fd::state<"v_cache", float, H, Lmax, Dh>();
constexpr auto q = fd::input<"q", float, H, 1, Dh>();
constexpr auto k = fd::input<"k", float, H, 1, Dh>();
constexpr auto v = fd::input<"v", float, H, 1, Dh>();
constexpr auto pos = fd::input<"pos", std::int32_t>();
constexpr auto k2 = fd::dynamic_update_slice<1>(kc, k, pos);
constexpr auto v2 = fd::dynamic_update_slice<1>(vc, v, pos);
constexpr auto keys = fd::iota<std::int32_t, 1, 1, Lmax>();
constexpr auto s = fd::matmul<false, true>(q, k2) * fd::lit<0.25>;
constexpr auto o = fd::matmul(fd::softmax(fd::where(keys <= pos, s, fd::neg_inf)), v2);
constexpr auto decode = fd::compile(o, fd::update(kc, k2), fd::update(vc, v2));
// Twelve decode steps of program P (caches of element type E) on random q, k and v. After each,
// the output matches the reference run on the same program with the caches' values before the
// call bound as inputs, and both caches hold the reference's bits. `after(step, k_cache)` checks
// more of a step.
template <class P, class E, class After>
void check_decode_steps(fd::cpu::executor<P>& ex, unsigned seed, After after) {
  using bits = std::conditional_t<std::is_same_v<E, fd::bf16>, std::uint16_t, float>;
  static_assert(sizeof(bits) == sizeof(E));
  constexpr std::size_t n = H * Lmax * Dh;
  fd::tensor<float, H, 1, Dh> qv, kv, vv, out;
  fd::tensor<std::int32_t> pv;
  ex.bind("q", qv), ex.bind("k", kv), ex.bind("v", vv), ex.bind("pos", pv);
  ex.bind_output(0, out);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<bits> kcache(n, bits{}), vcache(n, bits{});
  for (int step = 0; step < 12; ++step) {
    for (int i = 0; i < H * Dh; ++i) qv[i] = nd(rng), kv[i] = nd(rng), vv[i] = nd(rng);
    pv[0] = step;
    fd::tensor<E, H, Lmax, Dh> kin, vin;
    std::memcpy(static_cast<void*>(kin.data()), kcache.data(), n * sizeof(bits));
    std::memcpy(static_cast<void*>(vin.data()), vcache.data(), n * sizeof(bits));
    const auto want = fd::reference::run(
        fd::graph::graph_view(P::graph),
        {{"k_cache", kin}, {"v_cache", vin}, {"q", qv}, {"k", kv}, {"v", vv}, {"pos", pv}});
    ex.run();
    CHECK(ft::compare(std::span<const float>(out.data(), H * Dh),
                      std::span<const float>(want[0].template data<float>(), H * Dh),
                      ft::rel_tol(1e-5)));
    const bits* kst = static_cast<const bits*>(ex.state("k_cache").data);
    const bits* vst = static_cast<const bits*>(ex.state("v_cache").data);
    CHECK(std::memcmp(kst, want[1].template data<E>(), n * sizeof(bits)) == 0);
    CHECK(std::memcmp(vst, want[2].template data<E>(), n * sizeof(bits)) == 0);
    after(step, kst, kv);
    std::copy(kst, kst + n, kcache.begin());
    std::copy(vst, vst + n, vcache.begin());
  }
  CHECK(ex.stats().interpreted_groups == 0);
}
}  // namespace

TEST_CASE("decode attention over a cache reads the keys up to the run-time position only") {
  using P = decltype(decode);
  const auto& lp = fd::cpu::executor<P>::kernels_plan();
  int att = -1;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi)
    if (lp.desc[std::size_t(gi)].kind == fd::plan::kernel_kind::attention) att = gi;
  REQUIRE(att >= 0);
  CHECK(lp.desc[std::size_t(att)].att.kv_len >= 0);  // the kernel stops at pos + 1
  CHECK(lp.desc[std::size_t(att)].att.kv_len_offset == 1);
  fd::cpu::executor<P> ex{P{}};
  check_decode_steps<P, float>(ex, 3, [](int, const float*, const auto&) {});
}

TEST_CASE("a GEMM that splits k into blocks never writes its result over its residual") {
  // k > 512: the GEMM keeps partial sums in its output, so the residual (which dies here) must
  // keep a buffer of its own.
  constexpr auto x = fd::input<"x", float, 24, 600>();
  constexpr auto w = fd::param<"w", float, 600, 40>();
  constexpr auto r = fd::tanh(fd::input<"r", float, 24, 40>());
  constexpr auto p = fd::compile(fd::matmul(x, w) + r);
  fd::cpu::executor ex(p);
  auto b = ft::bind_random(ex, 7);
  CHECK(ft::compare_with_reference(ex, b, ft::rel_tol(1e-5)));
}

namespace {
// The same step with the caches in bf16: the new key and value rounded to bf16 as they are
// written, the products reading the caches widened to f32. (The casts keep the lowering from
// seeing an attention here: it runs as a matmul, a softmax and a matmul over the whole capacity.)
constexpr auto kc16 = fd::state<"k_cache", fd::bf16, H, Lmax, Dh>();
constexpr auto vc16 = fd::state<"v_cache", fd::bf16, H, Lmax, Dh>();
constexpr auto k16 = fd::dynamic_update_slice<1>(kc16, fd::cast<fd::bf16>(k), pos);
constexpr auto v16 = fd::dynamic_update_slice<1>(vc16, fd::cast<fd::bf16>(v), pos);
constexpr auto s16 = fd::matmul<false, true>(q, fd::cast<float>(k16)) * fd::lit<0.25>;
constexpr auto o16 =
    fd::matmul(fd::softmax(fd::where(keys <= pos, s16, fd::neg_inf)), fd::cast<float>(v16));
constexpr auto decode16 = fd::compile(o16, fd::update(kc16, k16), fd::update(vc16, v16));
}  // namespace

TEST_CASE("a bf16 cache: written in place rounded to bf16, half the state bytes, read by decode") {
  using P = decltype(decode16);
  fd::cpu::executor<P> ex{P{}};
  CHECK(ex.footprint().states == 2 * H * Lmax * Dh * 2);  // bf16: 2 bytes an element
  // The row written is the step's key rounded to bf16.
  check_decode_steps<P, fd::bf16>(ex, 5, [](int step, const std::uint16_t* kst, const auto& kv) {
    int wrong = 0;
    for (int h = 0; h < H; ++h)
      for (int x = 0; x < Dh; ++x)
        wrong += kst[(h * Lmax + step) * Dh + x] != fd::bf16::from_float(kv[h * Dh + x]);
    CHECK(wrong == 0);
  });
}
