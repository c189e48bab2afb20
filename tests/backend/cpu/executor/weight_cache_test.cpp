// Executors sharing a packed_weight_cache (cpu/weight_cache.hpp): programs of several lengths
// over the same weights hold one copy of the GEMM panels, compute bitwise what executors with
// their own panels compute, and a weight bound again is packed again for all of them. f32 and
// bf16 weights (f32 panels for 13 rows, bf16 panels for one), GEMM pairs (their own panels), and
// the errors.
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;

namespace {

using fd::nn::linear;

// Random values for every parameter a program binds, by name: the memory several executors share.
struct weights {
  std::map<std::string, fd::dynamic_tensor> t;
};

template <class Exec>
weights random_weights(const Exec& ex, unsigned seed) {
  weights w;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.2f);
  for (const auto& info : ex.bindings()) {
    if (info.kind != fd::graph::op_kind::param) continue;
    fd::dynamic_tensor t(info.type, info.shape);
    for (std::int64_t i = 0; i < info.shape.size(); ++i) {
      if (info.type == fd::dtype::bf16)
        t.data<fd::bf16>()[i] = fd::bf16(nd(rng));
      else
        t.data<float>()[i] = nd(rng);
    }
    w.t.emplace(info.name, std::move(t));
  }
  return w;
}

// Binds the parameters from `w` and the input "x" from `x` (both kept alive by the caller).
template <class Exec>
void bind_all(Exec& ex, weights& w, fd::dynamic_tensor& x) {
  for (const auto& info : ex.bindings())
    ex.bind(info.name, info.kind == fd::graph::op_kind::param ? w.t.at(info.name).ref() : x.ref());
}

fd::dynamic_tensor random_input(const fd::dims& shape, unsigned seed) {
  fd::dynamic_tensor x(fd::dtype::f32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::int64_t i = 0; i < shape.size(); ++i) x.data<float>()[i] = nd(rng);
  return x;
}

template <class Program>
std::vector<float> run_output(fd::cpu::executor<Program>& ex) {
  const fd::graph::node& n = Program::graph[Program::graph.outputs[0]];
  std::vector<float> out(std::size_t(n.shape.size()));
  ex.bind_output(0, fd::tensor_ref{out.data(), fd::dtype::f32, n.shape});
  ex.run();
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <std::int64_t Rows, class W = float>
constexpr auto mlp() {
  constexpr auto x = fd::input<"x", float, Rows, 40>();
  return fd::compile(linear<"fc2", 24, true, W>(fd::gelu(linear<"fc1", 72, true, W>(x))));
}

// Runs the program at `Rows` rows twice, sharing `cache` and with panels of its own, on the same
// weights and input: the outputs bitwise equal, finite, and within tolerance of the reference.
template <std::int64_t Rows, class W>
void check_same_bits(const std::shared_ptr<fd::cpu::packed_weight_cache>& cache, weights& w,
                     unsigned seed) {
  constexpr auto p = mlp<Rows, W>();
  fd::cpu::executor<decltype(p)> shared{p}, own{p};
  shared.share_packed_weights(cache);
  fd::dynamic_tensor x = random_input(fd::make_dims(Rows, 40), seed);
  bind_all(shared, w, x);
  bind_all(own, w, x);
  const std::vector<float> a = run_output(shared), b = run_output(own);
  CHECK(bitwise_equal(a, b));
  for (float v : a) REQUIRE(std::isfinite(v));
  CHECK(shared.footprint().shared_weights > 0);
  CHECK(own.footprint().shared_weights == 0);
  CHECK(shared.footprint().packed_weights < own.footprint().packed_weights);
}

}  // namespace

TEST_CASE("programs of two lengths sharing a cache hold one copy of the panels, same bits") {
  constexpr auto p13 = mlp<13>();
  constexpr auto p29 = mlp<29>();
  using P13 = decltype(p13);
  using P29 = decltype(p29);
  auto cache = std::make_shared<fd::cpu::packed_weight_cache>();
  fd::cpu::executor<P13> a13{p13}, u13{p13};
  fd::cpu::executor<P29> a29{p29}, u29{p29};
  a13.share_packed_weights(cache);
  a29.share_packed_weights(cache);
  weights w = random_weights(u13, 7);
  fd::dynamic_tensor x13 = random_input(fd::make_dims(13, 40), 1);
  fd::dynamic_tensor x29 = random_input(fd::make_dims(29, 40), 2);
  bind_all(a13, w, x13);
  bind_all(u13, w, x13);
  bind_all(a29, w, x29);
  bind_all(u29, w, x29);

  // One entry per weight (fc1, fc2), not per executor.
  CHECK(cache->entries() == 2);
  CHECK(a13.footprint().shared_weights == cache->bytes());
  CHECK(a29.footprint().shared_weights == cache->bytes());
  CHECK(a13.footprint().packed_weights <= 128);  // the two buffers' alignment slack only
  CHECK(u13.footprint().packed_weights >= cache->bytes());
  CHECK(u13.footprint().shared_weights == 0);

  const std::vector<float> s13 = run_output(a13), s29 = run_output(a29);
  CHECK(bitwise_equal(s13, run_output(u13)));
  CHECK(bitwise_equal(s29, run_output(u29)));
  CHECK(a13.stats().interpreted_groups == 0);

  // And against the reference.
  ft::bound_program b;
  for (auto& [name, t] : w.t) b.names.push_back(name);
  b.names.push_back("x");
  std::size_t k = 0;
  for (auto& [name, t] : w.t) b.refs.push_back({b.names[k++], t.ref()});
  b.refs.push_back({b.names[k], x29.ref()});
  CHECK(ft::compare_with_reference(a29, b, ft::rel_tol(2e-5)));
}

TEST_CASE("a shared weight bound again is packed again for every executor sharing it") {
  constexpr auto p13 = mlp<13>();
  constexpr auto p29 = mlp<29>();
  using P13 = decltype(p13);
  using P29 = decltype(p29);
  auto cache = std::make_shared<fd::cpu::packed_weight_cache>();
  fd::cpu::executor<P13> a13{p13};
  fd::cpu::executor<P29> a29{p29}, u29{p29};
  a13.share_packed_weights(cache);
  a29.share_packed_weights(cache);
  weights w = random_weights(a13, 11);
  fd::dynamic_tensor x13 = random_input(fd::make_dims(13, 40), 3);
  fd::dynamic_tensor x29 = random_input(fd::make_dims(29, 40), 4);
  bind_all(a13, w, x13);
  bind_all(a29, w, x29);
  const std::vector<float> before = run_output(a29);

  // fc1's weight changed and bound again in a13 only: a29 reads the new panels.
  fd::dynamic_tensor& w1 = w.t.at("fc1.w");
  for (std::int64_t i = 0; i < w1.shape().size(); ++i) w1.data<float>()[i] *= -0.5f;
  a13.bind("fc1.w", w1.ref());
  bind_all(u29, w, x29);
  const std::vector<float> after = run_output(a29);
  CHECK(!bitwise_equal(before, after));
  CHECK(bitwise_equal(after, run_output(u29)));
  CHECK(cache->entries() == 2);

  // A weight bound from other memory takes panels of its own.
  const fd::dynamic_tensor& w2 = w.t.at("fc2.w");
  fd::dynamic_tensor other(w2.type(), w2.shape());
  std::memcpy(other.data<float>(), w2.data<float>(),
              std::size_t(w2.shape().size()) * sizeof(float));
  a29.bind("fc2.w", other.ref());
  CHECK(cache->entries() == 3);
  CHECK(bitwise_equal(run_output(a29), run_output(u29)));
}

TEST_CASE("bf16 weights share their f32 panels (13 rows) and bf16 panels (one row) apart") {
  auto cache = std::make_shared<fd::cpu::packed_weight_cache>();
  constexpr auto p13 = mlp<13, fd::bf16>();
  weights w = random_weights(fd::cpu::executor<decltype(p13)>{p13}, 5);
  check_same_bits<13, fd::bf16>(cache, w, 8);
  check_same_bits<1, fd::bf16>(cache, w, 9);
  check_same_bits<13, fd::bf16>(cache, w, 10);  // the same panels again
  // Where bf16 panels exist (AVX-512 with AVX512_BF16 and similar), the one-row program's
  // panels are other entries; elsewhere it reads the 13-row program's f32 panels.
  CHECK((cache->entries() == 2 || cache->entries() == 4));
}

TEST_CASE("GEMM pairs keep panels of their own; the other weights are shared") {
  constexpr auto x = fd::input<"x", float, 13, 40>();
  constexpr auto p = fd::compile(linear<"down", 24, false>(
      fd::silu(linear<"gate", 72, false>(x)) * linear<"up", 72, false>(x)));
  using P = decltype(p);
  auto cache = std::make_shared<fd::cpu::packed_weight_cache>();
  fd::cpu::executor<P> shared{p}, own{p};
  shared.share_packed_weights(cache);
  weights w = random_weights(own, 21);
  fd::dynamic_tensor x13 = random_input(fd::make_dims(13, 40), 22);
  bind_all(shared, w, x13);
  bind_all(own, w, x13);
  CHECK(bitwise_equal(run_output(shared), run_output(own)));
  CHECK(shared.stats().paired_gemms == 1);
  CHECK(cache->entries() == 1);  // down's weight; gate and up are packed side by side in `shared`
  CHECK(shared.footprint().packed_weights > 128);
}

TEST_CASE("share_packed_weights after a parameter is bound is an error naming it") {
  constexpr auto p = mlp<13>();
  fd::cpu::executor<decltype(p)> ex{p};
  weights w = random_weights(ex, 1);
  ex.bind("fc1.w", w.t.at("fc1.w").ref());
  auto cache = std::make_shared<fd::cpu::packed_weight_cache>();
  CHECK_THROWS_WITH_AS(ex.share_packed_weights(cache),
                       doctest::Contains("\"fc1.w\" is bound already"), fd::binding_error);
  // Before binding, a null cache gives the executor its own panels back.
  fd::cpu::executor<decltype(p)> ex2{p};
  const std::size_t own = ex2.footprint().packed_weights;
  ex2.share_packed_weights(cache);
  CHECK(ex2.footprint().packed_weights < own);
  ex2.share_packed_weights(nullptr);
  CHECK(ex2.footprint().packed_weights == own);
  fd::dynamic_tensor x = random_input(fd::make_dims(13, 40), 2);
  bind_all(ex2, w, x);
  CHECK(ex2.footprint().shared_weights == 0);
  CHECK(cache->entries() == 0);
}
