// The CPU executor on whole transformer models, against the Eigen reference backend.
#include "check.hpp"
#include "fusedsl/models/transformer.hpp"

namespace fd = fusedsl;

// Tolerance: f32 GEMMs accumulate in a different order than Eigen's (blocking, FMA), and
// layernorm/softmax amplify that by at most a few units; 1e-5 relative is the per-op bound, and
// we state 1e-4 for whole models whose dot products run over 512-3072 terms.
TEST_CASE(
    "the seed transformer runs every group on a specialised kernel and matches the reference") {
  using M = fd::models::seed;
  fd::cpu::executor ex(M::program, fd::cpu::threads{2});
  auto b = fd::test::bind_random(ex, 1);
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(2e-5)));
  CHECK(ex.stats().fast_groups == 7);
  CHECK(ex.stats().interpreted_groups == 0);
}

TEST_CASE("a causal pre-LN model with batch and grouped key/value heads matches the reference") {
  constexpr auto x = fd::input<"x", float, 2, 24, 64>();
  constexpr auto blk =
      fd::nn::transformer_block<fd::nn::pre_ln, 8, 96, 2, true, fd::nn::activation::silu>;
  constexpr auto p = fd::compile(fd::nn::stack<"layers", 2>(blk, x));
  fd::cpu::executor ex(p);
  auto b = fd::test::bind_random(ex, 2);
  INFO("fast groups " << ex.stats().fast_groups);
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(2e-5)));
}

TEST_CASE("GPT-2-small shapes (one causal layer) match the reference") {
  using M = fd::models::gpt2_small<1>;
  fd::cpu::executor ex(M::program, fd::cpu::threads{2});
  auto b = fd::test::bind_random(ex, 3);
  // dot products over 3072 terms, outputs up to |50|: measured 1.3e-4
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::rel_tol(2e-4)));
  CHECK(ex.stats().interpreted_groups == 0);
}
