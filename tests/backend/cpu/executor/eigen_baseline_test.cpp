// The plain Eigen transformer that model_bench and the race (benchmarks/race) measure the fused
// executor against (benchmarks/model/eigen_transformer.hpp) computes the same function as the
// reference backend, post-LN and pre-LN causal alike.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "check.hpp"
#include "eigen_transformer.hpp"

namespace fd = fusedsl;

namespace {

template <class M>
void check_against_reference() {
  using P = typename M::program_type;
  fd::cpu::executor<P> probe(P{});  // only for its binding list
  const auto bound = fd::test::bind_random(probe, 7);
  std::map<std::string, const float*> by_name;
  const float* x = nullptr;
  for (std::size_t i = 0; i < bound.names.size(); ++i) {
    const float* data = bound.storage[i].template data<float>();
    if (bound.names[i] == "x")
      x = data;
    else
      by_name[bound.names[i]] = data;
  }
  REQUIRE(x != nullptr);
  fusedsl_bench::eigen_transformer<M> eigen([&](const std::string& name) {
    const auto it = by_name.find(name);
    REQUIRE_MESSAGE(it != by_name.end(), "no binding named ", name);
    return it->second;
  });
  std::vector<float> y(std::size_t(M::seq * M::d_model), std::nanf(""));
  eigen.run(x, y.data());

  const auto expected = fd::reference::run(fd::graph::graph_view(P::graph),
                                           std::span<const fd::reference::binding>(bound.refs));
  REQUIRE(expected.size() == 1);
  REQUIRE(expected[0].shape().size() == std::int64_t(y.size()));
  // Different summation orders and Eigen's tanh/exp approximations: a few f32 ulps per step.
  const auto c = fd::test::compare(y, std::span<const float>(expected[0].data<float>(), y.size()),
                                   fd::test::rel_tol(1e-4));
  CHECK(c);
  MESSAGE("max relative error against the reference: ", c.max_ratio);

  // A second call on the same buffers gives the same result (no state carried over).
  std::vector<float> again(y.size());
  eigen.run(x, again.data());
  CHECK(again == y);
}

}  // namespace

TEST_CASE("the plain Eigen seed transformer matches the reference backend") {
  check_against_reference<fd::models::seed>();
}

TEST_CASE("the plain Eigen pre-LN causal transformer matches the reference backend") {
  check_against_reference<fd::models::transformer<48, 64, 4, 256, 3, fd::nn::pre_ln, true>>();
}
