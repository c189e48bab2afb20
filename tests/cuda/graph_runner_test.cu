// The device arena and the graph runner: one allocation carved by the plan, a launch list that
// runs eagerly or as one captured CUDA graph with the same result.
#include <doctest/doctest.h>

#include <cstdint>
#include <fusedsl/backend/cuda/device_arena.hpp>
#include <fusedsl/backend/cuda/elementwise.cuh>
#include <fusedsl/backend/cuda/gemm.cuh>
#include <fusedsl/backend/cuda/graph_runner.hpp>
#include <fusedsl/backend/cuda/row_kernels.cuh>
#include <span>
#include <stdexcept>

#include "cuda_test_util.hpp"
#include "reference.hpp"

namespace fc = fusedsl::cuda;
using fusedsl::graph::op_kind;
namespace ft = fusedsl::cuda::testing;
namespace ref = fusedsl::cuda::reference;

TEST_CASE("the arena hands out 256-byte aligned buffers and names the buffer that does not fit") {
  fc::device_arena arena(4096);
  auto* a = arena.carve<float>(3, "a");
  auto* b = arena.carve<fc::bf16>(5, "b");
  CHECK(reinterpret_cast<std::uintptr_t>(a) % 256 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(b) - reinterpret_cast<std::uintptr_t>(a) == 256);
  CHECK(arena.used() == 256 + 10);
  CHECK_THROWS_AS(arena.carve<float>(1024, "too_big"), std::length_error);
  CHECK_THROWS_AS(arena.at<float>(4000, 100), std::out_of_range);
}

TEST_CASE("a three-step program gives the same result eagerly and as one replayed CUDA graph") {
  constexpr int M = 128, N = 128, K = 256;
  cudaStream_t stream{};
  fc::check(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::vector<float> xf, wf, gf, bf;
  auto x = ft::random_values<float>(M * K, xf), w = ft::random_values<float>(K * N, wf);
  auto gamma = ft::random_values<float>(N, gf, 0.5f, 1.5f), beta = ft::random_values<float>(N, bf);

  fc::device_arena arena(1 << 20);
  float* dx = arena.carve<float>(M * K, "x");
  float* dw = arena.carve<float>(K * N, "w");
  float* dg = arena.carve<float>(N, "gamma");
  float* db = arena.carve<float>(N, "beta");
  float* h = arena.carve<float>(M * N, "h");
  float* y = arena.carve<float>(M * N, "y");
  arena.upload(dx, std::span<const float>(xf), stream);
  arena.upload(dw, std::span<const float>(wf), stream);
  arena.upload(dg, std::span<const float>(gf), stream);
  arena.upload(db, std::span<const float>(bf), stream);

  fc::graph_runner run(stream);
  run.add("matmul",
          [=](cudaStream_t s) { fc::gemm<M, N, K, float, fc::epilogue<float>>(s, dx, dw, h, {}); });
  run.add("layernorm", [=](cudaStream_t s) {
    fc::row_params p;
    p.gamma = dg, p.beta = db;
    fc::launch_row<fc::row_op::layernorm, M, N>(s, h, h, p);
  });
  run.add("relu",
          [=](cudaStream_t s) { fc::launch_map<M * N>(s, fc::ops::unary<op_kind::relu>{}, y, h); });
  CHECK_THROWS_AS(run.replay(), std::logic_error);

  std::vector<float> eager(M * N), graphed(M * N);
  run.run_eager();
  arena.download(std::span<float>(eager), y, stream);
  fc::check(cudaStreamSynchronize(stream), "sync");

  fc::check(cudaMemsetAsync(y, 0xff, M * N * sizeof(float), stream), "poison");
  run.capture();
  CHECK(run.captured());
  CHECK(run.kernel_nodes() == 3);
  run.replay();
  run.replay();  // a second replay over the same arena gives the same answer
  arena.download(std::span<float>(graphed), y, stream);
  fc::check(cudaStreamSynchronize(stream), "sync");
  CHECK(eager == graphed);

  auto expect = ref::gemm(xf, wf, M, N, K, 1.0, {}, {}, [](double v) { return v; });
  std::vector<float> hf(expect.begin(), expect.end());
  expect = ref::norm_rows(hf, M, N, gf, bf, 1e-5, true);
  for (auto& v : expect) v = ref::relu(v);
  std::vector<double> got(graphed.begin(), graphed.end());
  CHECK(ft::compare_rel_l2(got, expect, ft::tolerance<float>));
  fc::check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

TEST_CASE("a failing step is reported with its name") {
  cudaStream_t stream{};
  fc::check(cudaStreamCreate(&stream), "cudaStreamCreate");
  fc::graph_runner run(stream);
  run.add("broken", [](cudaStream_t) { throw fc::cuda_error("launch", cudaErrorInvalidValue); });
  CHECK_THROWS_WITH_AS(run.run_eager(), doctest::Contains("graph_runner: step 'broken'"),
                       fc::cuda_error);
  CHECK_THROWS_WITH_AS(run.capture(), doctest::Contains("graph_runner: step 'broken'"),
                       fc::cuda_error);
  fc::check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}
