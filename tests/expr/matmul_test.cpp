// matmul against triple loops: 2-D, transposed operands, batched, broadcast batch axes.
#include "../common/test_util.hpp"

namespace {

// C[b..., m, n] = sum_k A[m, k] B[k, n] in double, for operands already laid out as [batch, M, K]
// and [batch, K, N] by the caller's index functions.
template <class FA, class FB>
std::vector<double> loop_matmul(int batch, int m, int n, int k, FA a, FB b) {
  std::vector<double> c(std::size_t(batch * m * n));
  for (int t = 0; t < batch; ++t)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int p = 0; p < k; ++p) acc += double(a(t, i, p)) * double(b(t, p, j));
        c[std::size_t((t * m + i) * n + j)] = acc;
      }
  return c;
}

}  // namespace

TEST_CASE("2-D matmul, with either or both operands read transposed") {
  constexpr int M = 9, K = 13, N = 7;
  auto av = test::random_tensor<float, M, K>(1);
  auto bv = test::random_tensor<float, K, N>(2);
  auto atv = test::random_tensor<float, K, M>(3);
  auto btv = test::random_tensor<float, N, K>(4);
  constexpr auto a = fd::input<"a", float, M, K>();
  constexpr auto b = fd::input<"b", float, K, N>();
  constexpr auto at = fd::input<"at", float, K, M>();
  constexpr auto bt = fd::input<"bt", float, N, K>();
  auto outs = fd::reference::run(
      fd::flatten(fd::matmul(a, b), fd::matmul<true, false>(at, b),
                         fd::matmul<false, true>(a, bt), fd::matmul<true, true>(at, bt)),
      {{"a", av}, {"b", bv}, {"at", atv}, {"bt", btv}});
  auto A = [&](int, int i, int p) { return av(i, p); };
  auto B = [&](int, int p, int j) { return bv(p, j); };
  auto AT = [&](int, int i, int p) { return atv(p, i); };
  auto BT = [&](int, int p, int j) { return btv(j, p); };
  for (auto& o : outs) CHECK(o.shape() == fd::make_dims(M, N));
  test::check_close(outs[0], loop_matmul(1, M, N, K, A, B), 1e-5, 1e-5);
  test::check_close(outs[1], loop_matmul(1, M, N, K, AT, B), 1e-5, 1e-5);
  test::check_close(outs[2], loop_matmul(1, M, N, K, A, BT), 1e-5, 1e-5);
  test::check_close(outs[3], loop_matmul(1, M, N, K, AT, BT), 1e-5, 1e-5);
}

TEST_CASE("batched matmul multiplies matching batch entries") {
  constexpr auto a = fd::input<"a", float, 2, 3, 5, 4>();
  constexpr auto b = fd::input<"b", float, 2, 3, 4, 6>();
  auto av = test::random_tensor<float, 2, 3, 5, 4>(5);
  auto bv = test::random_tensor<float, 2, 3, 4, 6>(6);
  auto out = fd::reference::run(fd::flatten(fd::matmul(a, b)), {{"a", av}, {"b", bv}});
  CHECK(out[0].shape() == fd::make_dims(2, 3, 5, 6));
  auto want = loop_matmul(
      6, 5, 6, 4, [&](int t, int i, int p) { return av(t / 3, t % 3, i, p); },
      [&](int t, int p, int j) { return bv(t / 3, t % 3, p, j); });
  test::check_close(out[0], want, 1e-5, 1e-5);
}

TEST_CASE("batch axes broadcast: [2,1,5,4] x [3,6,4] (transposed) gives [2,3,5,6]") {
  constexpr auto a = fd::input<"a", float, 2, 1, 5, 4>();
  constexpr auto b = fd::input<"b", float, 3, 6, 4>();
  auto av = test::random_tensor<float, 2, 1, 5, 4>(7);
  auto bv = test::random_tensor<float, 3, 6, 4>(8);
  auto out =
      fd::reference::run(fd::flatten(fd::matmul<false, true>(a, b)), {{"a", av}, {"b", bv}});
  CHECK(out[0].shape() == fd::make_dims(2, 3, 5, 6));
  auto want = loop_matmul(
      6, 5, 6, 4, [&](int t, int i, int p) { return av(t / 3, 0, i, p); },
      [&](int t, int p, int j) { return bv(t % 3, j, p); });
  test::check_close(out[0], want, 1e-5, 1e-5);
}

TEST_CASE("a matrix times a batch of matrices: [8,4] x [3,4,5]") {
  constexpr auto a = fd::input<"a", float, 8, 4>();
  constexpr auto b = fd::input<"b", float, 3, 4, 5>();
  auto av = test::random_tensor<float, 8, 4>(9);
  auto bv = test::random_tensor<float, 3, 4, 5>(10);
  auto out = fd::reference::run(fd::flatten(fd::matmul(a, b)), {{"a", av}, {"b", bv}});
  CHECK(out[0].shape() == fd::make_dims(3, 8, 5));
  auto want = loop_matmul(
      3, 8, 5, 4, [&](int, int i, int p) { return av(i, p); },
      [&](int t, int p, int j) { return bv(t, p, j); });
  test::check_close(out[0], want, 1e-5, 1e-5);
}

TEST_CASE("bf16 matmul multiplies in f32 and rounds the result to bf16") {
  constexpr auto a = fd::input<"a", fd::bf16, 4, 32>();
  constexpr auto b = fd::input<"b", fd::bf16, 32, 3>();
  fd::tensor<fd::bf16, 4, 32> av;
  fd::tensor<fd::bf16, 32, 3> bv;
  auto af = test::random_tensor<float, 4, 32>(11);
  auto bf = test::random_tensor<float, 32, 3>(12);
  for (int i = 0; i < 128; ++i) av[i] = fd::bf16(af[i]);
  for (int i = 0; i < 96; ++i) bv[i] = fd::bf16(bf[i]);
  auto out = fd::reference::run(fd::flatten(fd::matmul(a, b)), {{"a", av}, {"b", bv}});
  REQUIRE(out[0].type() == fd::dtype::bf16);
  auto want = loop_matmul(
      1, 4, 3, 32, [&](int, int i, int p) { return float(av(i, p)); },
      [&](int, int p, int j) { return float(bv(p, j)); });
  test::check_close(out[0], want, 1e-6, 1.0 / 128);  // within one bf16 rounding
}
