// Binding by name: a missing, unknown, mis-shaped or mis-typed tensor is a binding_error naming the
// binding and both shapes; a malformed graph is a graph_error naming the node; nothing is UB.
#include "../../common/test_util.hpp"

namespace {

constexpr auto x = fd::input<"x", float, 4, 8>();
constexpr auto w = fd::param<"w", float, 8, 3>();
constexpr auto& g = fd::flatten(fd::matmul(x, w));

}  // namespace

TEST_CASE("required() lists every input and param with dtype and shape") {
  fd::reference::evaluator ev{g};
  REQUIRE(ev.required().size() == 2);
  CHECK(ev.required()[0] == fd::reference::binding_spec{"x", fd::dtype::f32, fd::make_dims(4, 8),
                                                        fd::graph::op_kind::input});
  CHECK(ev.required()[1] == fd::reference::binding_spec{"w", fd::dtype::f32, fd::make_dims(8, 3),
                                                        fd::graph::op_kind::param});
}

TEST_CASE("a missing binding is reported with its expected shape when run() is called") {
  auto xv = test::random_tensor<float, 4, 8>(1);
  fd::reference::evaluator ev{g};
  ev.bind("x", xv);
  CHECK_THROWS_WITH_AS(ev.run(), "binding \"w\": missing (expected f32[8,3])", fd::binding_error);
  CHECK_THROWS_WITH_AS(fd::reference::run(g, {}),
                       doctest::Contains("binding \"x\": missing (expected f32[4,8])"),
                       fd::binding_error);
}

TEST_CASE("an unknown name is rejected when bound, naming it and what the program reads") {
  auto xv = test::random_tensor<float, 4, 8>(1);
  fd::reference::evaluator ev{g};
  CHECK_THROWS_WITH_AS(
      ev.bind("wq", xv),
      "binding \"wq\": the program has no input or param of that name (it has: x, w)",
      fd::binding_error);
  CHECK_THROWS_AS(fd::reference::run(g, {{"x", xv}, {"w", xv}, {"extra", xv}}), fd::binding_error);
}

TEST_CASE("a wrong shape names the binding and both shapes") {
  auto wrong = test::random_tensor<float, 3, 8>(2);
  fd::reference::evaluator ev{g};
  CHECK_THROWS_WITH_AS(ev.bind("w", wrong), "binding \"w\": expected f32[8,3], got f32[3,8]",
                       fd::binding_error);
  auto rank3 = test::random_tensor<float, 1, 4, 8>(2);
  CHECK_THROWS_WITH_AS(ev.bind("x", rank3), "binding \"x\": expected f32[4,8], got f32[1,4,8]",
                       fd::binding_error);
}

TEST_CASE("a wrong dtype names the binding and both dtypes") {
  fd::tensor<fd::bf16, 4, 8> xb;
  fd::tensor<std::int32_t, 8, 3> wi;
  fd::reference::evaluator ev{g};
  CHECK_THROWS_WITH_AS(ev.bind("x", xb), "binding \"x\": expected f32[4,8], got bf16[4,8]",
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(ev.bind("w", wi), "binding \"w\": expected f32[8,3], got i32[8,3]",
                       fd::binding_error);
}

TEST_CASE("a tensor_ref without data is rejected") {
  fd::reference::evaluator ev{g};
  const fd::tensor_ref null{nullptr, fd::dtype::f32, fd::make_dims(4, 8)};
  CHECK_THROWS_WITH_AS(ev.bind("x", null),
                       doctest::Contains("binding \"x\": the tensor has no data"),
                       fd::binding_error);
}

TEST_CASE("binding errors are fusedsl errors and std::runtime_errors") {
  fd::reference::evaluator ev{g};
  auto wrong = test::random_tensor<float, 3, 8>(2);
  CHECK_THROWS_AS(ev.bind("w", wrong), fd::error);
  CHECK_THROWS_AS(ev.bind("w", wrong), std::runtime_error);
}

TEST_CASE("per-layer params of a stack are checked under their full names") {
  constexpr auto body = fd::nn::block([](auto h) { return fd::nn::linear<"fc", 8>(h); });
  constexpr auto& gs = fd::flatten(fd::nn::stack<"layers", 2>(body, x));
  fd::reference::evaluator ev{gs};
  auto wrong = test::random_tensor<float, 8, 4>(3);
  CHECK_THROWS_WITH_AS(ev.bind("layers.1.fc.w", wrong),
                       "binding \"layers.1.fc.w\": expected f32[8,8], got f32[8,4]",
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(ev.bind("fc.w", wrong),
                       doctest::Contains("binding \"fc.w\": the program has no input"),
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(ev.bind("layers.2.fc.w", wrong), doctest::Contains("no input or param"),
                       fd::binding_error);
}

TEST_CASE("a later bind replaces an earlier one, and an evaluator runs again with new data") {
  auto xv = test::random_tensor<float, 4, 8>(4);
  auto w1 = test::random_tensor<float, 8, 3>(5);
  fd::tensor<float, 8, 3> w2;
  for (int i = 0; i < 24; ++i) w2[i] = 2.0f * w1[i];
  fd::reference::evaluator ev{g};
  ev.bind({{"x", xv}, {"w", w1}});
  auto a = ev.run();
  ev.bind("w", w2);
  auto b = ev.run();
  std::vector<double> twice(12);
  for (int i = 0; i < 12; ++i) twice[std::size_t(i)] = 2.0 * a[0].data<float>()[i];
  test::check_close(b[0], twice, 1e-6, 1e-6);
  ev.clear();
  CHECK_THROWS_AS(ev.run(), fd::binding_error);
}

TEST_CASE("a malformed node table is a graph_error naming the node, before anything runs") {
  auto broken = g;  // a copy we may corrupt: input, param, matmul
  SUBCASE("a shape its operands do not give") {
    broken.nodes[2].shape = fd::make_dims(4, 4);
    CHECK_THROWS_WITH_AS(fd::reference::evaluator{broken}, doctest::Contains("node %2 (matmul)"),
                         fd::graph::graph_error);
  }
  SUBCASE("an operand that does not precede its node") {
    broken.nodes[2].in[1] = 2;
    CHECK_THROWS_AS(fd::reference::evaluator{broken}, fd::graph::graph_error);
  }
  SUBCASE("an operand id out of range") {
    broken.nodes[2].in[0] = 77;
    CHECK_THROWS_AS(fd::reference::evaluator{broken}, fd::graph::graph_error);
  }
  SUBCASE("an output that names no node") {
    broken.outputs[0] = 9;
    CHECK_THROWS_AS(fd::reference::evaluator{broken}, fd::graph::graph_error);
  }
  SUBCASE("a slice past the end") {
    constexpr auto& gs = fd::flatten(fd::slice<1, 0, 4>(x));
    auto bad = gs;
    bad.nodes[1].end = 12;
    bad.nodes[1].shape = fd::make_dims(4, 12);
    CHECK_THROWS_WITH_AS(fd::reference::evaluator{bad}, doctest::Contains("node %1 (slice"),
                         fd::graph::graph_error);
  }
  SUBCASE("a composite whose gamma is not a vector of the last axis (ids are the caller's)") {
    constexpr auto gm = fd::param<"g", float, 8>();
    constexpr auto& gl = fd::flatten(fd::rmsnorm(fd::exp(x), gm));
    auto bad = gl;  // x, exp, g, rmsnorm
    bad.nodes[2].shape = fd::make_dims(4);
    CHECK_THROWS_WITH_AS(fd::reference::evaluator{bad}, doctest::Contains("node %3 (rmsnorm"),
                         fd::graph::graph_error);
  }
  SUBCASE("an operand count beyond the table") {
    broken.nodes[2].n_in = 40;
    CHECK_THROWS_AS(fd::reference::evaluator{broken}, fd::graph::graph_error);
  }
}
