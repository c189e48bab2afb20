// Run-time behaviour of the executor: no allocation per call, reproducible results (and which
// kernels two threads split), bindings checked with errors that name the binding.
// The seed's kernels are below the default threshold of a sleeping pool (2^24 multiply-adds) and
// above the polling pool's (2^20): `polling` executors below really split them.
#include <chrono>
#include <cstring>

#include "allocation_counter.hpp"
#include "check.hpp"
#include "fusedsl/models/transformer.hpp"

namespace fd = fusedsl;
using M = fd::models::seed;

// Two threads whose pool polls between runs: a fork/join is cheap, so the seed's kernels split.
const fd::cpu::threads polling_pair{2, std::chrono::microseconds(500)};

TEST_CASE("a call allocates nothing: the arena and workspaces come from construction") {
  fd::cpu::executor ex(M::program, polling_pair);
  auto b = fd::test::bind_random(ex, 7);
  fd::tensor<float, 128, 128> out;
  ex.bind_output(0, out);
  ex.run();                                 // warm-up
  REQUIRE(ex.stats().parallel_groups > 0);  // the calls below really use both threads
  const long before = fd::test::allocations.load();
  for (int i = 0; i < 5; ++i) ex.run();
  CHECK(fd::test::allocations.load() == before);
}

TEST_CASE("results are bitwise identical from run to run and across thread counts") {
  fd::cpu::executor one(M::program, fd::cpu::threads{1});
  fd::cpu::executor two(M::program, fd::cpu::threads{2});
  fd::cpu::executor polling(M::program, polling_pair);
  auto b1 = fd::test::bind_random(one, 8);
  auto b2 = fd::test::bind_random(two, 8);
  auto b3 = fd::test::bind_random(polling, 8);
  fd::tensor<float, 128, 128> a, a2, c, d;
  one.bind_output(0, a);
  one.run();
  one.bind_output(0, a2);
  one.run();
  two.bind_output(0, c);
  two.run();
  polling.bind_output(0, d);
  polling.run();
  CHECK(std::memcmp(a.data(), a2.data(), sizeof(float) * 128 * 128) == 0);
  CHECK(std::memcmp(a.data(), c.data(), sizeof(float) * 128 * 128) == 0);
  CHECK(std::memcmp(a.data(), d.data(), sizeof(float) * 128 * 128) == 0);
  // Which runs split kernels: waking a sleeping worker costs more than the seed's kernels would
  // share (~80 us here), so a sleeping pair keeps them on one thread; a polling pair splits every
  // matmul group and the attention group (5 per layer: Q/K/V, attention, output projection, FFN
  // up, FFN down), so the last check above compares split kernels with whole ones.
  CHECK(one.stats().parallel_groups == 0);
  CHECK(two.stats().parallel_groups == 0);
  CHECK(polling.stats().parallel_groups == 5);
}

TEST_CASE("bindings are checked by name, shape and dtype") {
  fd::cpu::executor ex(M::program);
  fd::tensor<float, 128, 64> wrong_shape;
  fd::tensor<fd::bf16, 128, 128> wrong_dtype;
  fd::tensor<float, 128, 128> x;
  CHECK_THROWS_WITH_AS(ex.bind("layers.0.attn.q.w", wrong_shape),
                       "binding \"layers.0.attn.q.w\": expected f32[128,128], got f32[128,64]",
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(ex.bind("x", wrong_dtype),
                       "binding \"x\": expected f32[128,128], got bf16[128,128]",
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(
      ex.bind("layers.2.attn.q.w", x),
      "binding \"layers.2.attn.q.w\": the program has no input or param of that name",
      fd::binding_error);
  ex.bind("x", x);
  fd::tensor<float, 128, 128> out;
  ex.bind_output(0, out);
  CHECK_THROWS_WITH_AS(ex.run(), "binding \"layers.0.attn.q.w\": not bound", fd::binding_error);
  // Every per-layer name is listed.
  int layer1 = 0;
  for (const auto& info : ex.bindings()) layer1 += info.name.rfind("layers.1.", 0) == 0;
  CHECK(layer1 == 16);
}
