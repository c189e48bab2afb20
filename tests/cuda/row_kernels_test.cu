// Warp-per-row softmax, log_softmax, layernorm and rmsnorm against CPU loops, in f32 (1e-5) and
// bf16 (1e-2), on rows that are and are not multiples of the warp width.
#include <doctest/doctest.h>

#include <fusedsl/backend/cuda/row_kernels.cuh>
#include <stdexcept>

#include "cuda_test_util.hpp"
#include "reference.hpp"

namespace fc = fusedsl::cuda;
namespace ft = fusedsl::cuda::testing;
namespace ref = fusedsl::cuda::reference;

namespace {

template <fc::row_op Op, int Rows, int Cols, class In, class Out>
double run_case() {
  std::vector<float> xf, gf, bf;
  auto x = ft::random_values<In>(static_cast<std::size_t>(Rows) * Cols, xf, -4.0f, 4.0f);
  auto gamma = ft::random_values<Out>(Cols, gf, 0.5f, 1.5f);
  auto beta = ft::random_values<Out>(Cols, bf);
  ft::device_buffer<In> dx(x);
  ft::device_buffer<Out> dy(x.size()), dg(gamma), db(beta);
  dy.poison();
  fc::row_params p;
  p.gamma = dg.get();
  p.beta = db.get();
  p.eps = 1e-5f;
  fc::launch_row<Op, Rows, Cols>(nullptr, dx.get(), dy.get(), p);
  const auto out = ft::widen(dy.download());
  std::vector<double> expect;
  if constexpr (Op == fc::row_op::softmax || Op == fc::row_op::log_softmax)
    expect = ref::softmax_rows(xf, Rows, Cols, Op == fc::row_op::log_softmax);
  else
    expect =
        ref::norm_rows(xf, Rows, Cols, gf, Op == fc::row_op::layernorm ? bf : std::vector<float>{},
                       1e-5, Op == fc::row_op::layernorm);
  return ft::rel_l2(out, expect);
}

}  // namespace

TEST_CASE("f32 softmax over rows of 1000 (not a multiple of 32) matches within 1e-5") {
  const double err = run_case<fc::row_op::softmax, 301, 1000, float, float>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<float>);
}

TEST_CASE("f32 log_softmax matches within 1e-5") {
  const double err = run_case<fc::row_op::log_softmax, 256, 512, float, float>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<float>);
}

TEST_CASE("f32 layernorm with gamma and beta matches within 1e-5") {
  const double err = run_case<fc::row_op::layernorm, 130, 128, float, float>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<float>);
}

TEST_CASE("f32 rmsnorm with gamma matches within 1e-5") {
  const double err = run_case<fc::row_op::rmsnorm, 64, 1024, float, float>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<float>);
}

TEST_CASE("bf16 softmax over rows of 2048 matches within 1e-2") {
  const double err = run_case<fc::row_op::softmax, 256, 2048, fc::bf16, fc::bf16>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("bf16 log_softmax matches within 1e-2") {
  const double err = run_case<fc::row_op::log_softmax, 128, 384, fc::bf16, fc::bf16>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("bf16 layernorm reading bf16 and writing bf16 matches within 1e-2") {
  const double err = run_case<fc::row_op::layernorm, 200, 768, fc::bf16, fc::bf16>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("rmsnorm reading f32 and writing bf16 matches within 1e-2") {
  const double err = run_case<fc::row_op::rmsnorm, 96, 1024, float, fc::bf16>();
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("layernorm without gamma is refused before launch") {
  ft::device_buffer<float> x(128), y(128);
  CHECK_THROWS_WITH_AS(
      (fc::launch_row<fc::row_op::layernorm, 1, 128>(nullptr, x.get(), y.get(), {})),
      "launch_row: normalisation needs gamma", std::invalid_argument);
}
