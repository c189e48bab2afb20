// Run-time behaviour of the executor: no allocation per call, reproducible results (and which
// kernels two threads split), bindings checked with errors that name the binding.
// The seed's kernels are below the default threshold of a sleeping pool (2^24 multiply-adds) and
// above the polling pool's (2^20): `polling` executors below really split them.
#include <chrono>
#include <cmath>
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
      doctest::Contains(
          "binding \"layers.2.attn.q.w\": the program has no input or param of that name (it "
          "has: x, "),
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

TEST_CASE("an output may not share memory with an input, a parameter or another output") {
  fd::cpu::executor ex(M::program);
  auto b = fd::test::bind_random(ex, 9);
  fd::tensor<float, 128, 128> x, out;
  ex.bind("x", x);
  ex.bind_output(0, x);  // in place: the residual adds read x after the first layer's writes
  CHECK_THROWS_WITH_AS(
      ex.run(),
      "output 0: its memory overlaps the memory bound to \"x\" (inputs and parameters "
      "are read while outputs are written; bind a separate buffer)",
      fd::binding_error);
  // Inside a parameter: the output's 128 x 128 floats within the second layer's 128 x 512 FFN
  // weight. (Packed when it was bound, that weight is not read by a call; the check goes by
  // memory, not by use, as a later bind would read it.)
  fd::dynamic_tensor* w = nullptr;
  for (std::size_t i = 0; i < b.names.size(); ++i)
    if (b.names[i] == "layers.1.ffn.fc1.w") w = &b.storage[i];
  REQUIRE(w != nullptr);
  fd::tensor_ref inside = w->ref();
  inside.data = w->data<float>() + 1000;
  inside.shape = fd::dims(std::in_place, 128, 128);
  ex.bind_output(0, inside);
  CHECK_THROWS_WITH_AS(
      ex.run(),
      "output 0: its memory overlaps the memory bound to \"layers.1.ffn.fc1.w\" (inputs "
      "and parameters are read while outputs are written; bind a separate buffer)",
      fd::binding_error);
  ex.bind_output(0, out);  // a buffer of its own: runs
  ex.run();
  CHECK(std::isfinite(out[0]));
}

TEST_CASE(
    "a GEMM weight changed after bind counts once bound again; biases and inputs are read per "
    "call") {
  fd::cpu::executor ex(M::program);
  auto b = fd::test::bind_random(ex, 10);
  auto find = [&](const std::string& name) -> fd::dynamic_tensor& {
    for (std::size_t i = 0; i < b.names.size(); ++i)
      if (b.names[i] == name) return b.storage[i];
    FAIL("no binding named " << name);
    return b.storage[0];
  };
  fd::tensor<float, 128, 128> first, second;
  ex.bind_output(0, first);
  ex.run();
  fd::dynamic_tensor& w = find("layers.1.ffn.fc2.w");
  for (std::int64_t i = 0; i < w.shape().size(); ++i) w.data<float>()[i] *= 2.0f;
  ex.bind_output(0, second);
  ex.run();  // the weight was packed when bound: the change is not seen yet
  CHECK(std::memcmp(first.data(), second.data(), sizeof(float) * 128 * 128) == 0);
  ex.bind("layers.1.ffn.fc2.w", w.ref());
  ex.run();  // packed again
  CHECK(std::memcmp(first.data(), second.data(), sizeof(float) * 128 * 128) != 0);
  fd::tensor<float, 128, 128> third;
  ex.bind_output(0, third);
  fd::dynamic_tensor& bias = find("layers.1.ffn.fc2.b");
  // (Not the same amount on every column: the layernorm after it would cancel a constant shift.)
  for (std::int64_t i = 0; i < bias.shape().size(); ++i) bias.data<float>()[i] += 0.01f * float(i);
  ex.run();  // a bias is read from the bound memory at each call
  CHECK(std::memcmp(second.data(), third.data(), sizeof(float) * 128 * 128) != 0);
}

TEST_CASE("two outputs may not share memory, and in place softmax(x) + x is refused, not wrong") {
  constexpr auto x = fd::input<"x", float, 16, 16>();
  constexpr auto y = fd::softmax(x) + x;
  fd::tensor<float, 16, 16> xv, a, c;
  for (int i = 0; i < 256; ++i) xv[i] = float(i % 7);
  {
    // Before this check the executor wrote softmax(x) + x over x while it still read x: measured,
    // results off by up to 5.8 with no error.
    fd::cpu::executor ex(fd::compile(y));
    ex.bind("x", xv);
    ex.bind_output(0, xv);
    CHECK_THROWS_AS(ex.run(), fd::binding_error);
  }
  fd::cpu::executor two(fd::compile(y, y * fd::lit<2.0>));
  two.bind("x", xv);
  two.bind_output(0, a);
  two.bind_output(1, a);
  CHECK_THROWS_WITH_AS(two.run(),
                       "output 1: its memory overlaps output 0's (bind a separate buffer to each)",
                       fd::binding_error);
  two.bind_output(1, c);
  two.run();
  CHECK(c[3] == 2.0f * a[3]);
}
