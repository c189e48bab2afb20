// Structural ops against index loops: permute/transpose, reshape, slice, concat, broadcast_to.
// They copy elements bit for bit, whatever the dtype.
#include "../common/test_util.hpp"

namespace {

constexpr auto x = fd::input<"x", float, 2, 3, 4>();

template <int P0, int P1, int P2>
void check_permute(fd::tensor<float, 2, 3, 4>& xv) {
  auto out = fd::reference::run(fd::flatten(fd::permute<P0, P1, P2>(x)), {{"x", xv}});
  const int n[3] = {2, 3, 4};
  const int p[3] = {P0, P1, P2};
  CHECK(out[0].shape() == fd::make_dims(n[P0], n[P1], n[P2]));
  std::vector<double> want;
  for (int a = 0; a < n[P0]; ++a)
    for (int b = 0; b < n[P1]; ++b)
      for (int c = 0; c < n[P2]; ++c) {
        int idx[3]{};
        idx[p[0]] = a;
        idx[p[1]] = b;
        idx[p[2]] = c;
        want.push_back(xv(idx[0], idx[1], idx[2]));
      }
  test::check_close(out[0], want, 0);
}

}  // namespace

TEST_CASE("permute moves output axis j to input axis perm[j], for every permutation of 3 axes") {
  auto xv = test::random_tensor<float, 2, 3, 4>(1);
  check_permute<0, 2, 1>(xv);
  check_permute<1, 0, 2>(xv);
  check_permute<1, 2, 0>(xv);
  check_permute<2, 0, 1>(xv);
  check_permute<2, 1, 0>(xv);
}

TEST_CASE("transpose swaps the last two axes of a rank-4 tensor") {
  constexpr auto y = fd::input<"y", float, 2, 3, 4, 5>();
  auto yv = test::random_tensor<float, 2, 3, 4, 5>(2);
  auto out = fd::reference::run(fd::flatten(fd::transpose(y)), {{"y", yv}});
  CHECK(out[0].shape() == fd::make_dims(2, 3, 5, 4));
  std::vector<double> want;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 5; ++c)
        for (int d = 0; d < 4; ++d) want.push_back(yv(a, b, d, c));
  test::check_close(out[0], want, 0);
}

TEST_CASE("reshape keeps the row-major element order") {
  auto xv = test::random_tensor<float, 2, 3, 4>(3);
  auto out =
      fd::reference::run(fd::flatten(fd::reshape<6, 4>(x), fd::reshape<24>(x)), {{"x", xv}});
  CHECK(out[0].shape() == fd::make_dims(6, 4));
  CHECK(out[1].shape() == fd::make_dims(24));
  std::vector<double> want(xv.span().begin(), xv.span().end());
  test::check_close(out[0], want, 0);
  test::check_close(out[1], want, 0);
}

TEST_CASE("slice takes [begin, end) along one axis, for each axis") {
  auto xv = test::random_tensor<float, 2, 3, 4>(4);
  auto outs = fd::reference::run(fd::flatten(fd::slice<0, 1, 2>(x), fd::slice<1, 1, 3>(x),
                                                    fd::slice<2, 1, 3>(x), fd::slice<-1, 0, 1>(x)),
                                 {{"x", xv}});
  std::vector<double> w0, w1, w2, w3;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) {
        if (a == 1) w0.push_back(xv(a, b, c));
        if (b >= 1) w1.push_back(xv(a, b, c));
        if (c >= 1 && c < 3) w2.push_back(xv(a, b, c));
        if (c == 0) w3.push_back(xv(a, b, c));
      }
  CHECK(outs[0].shape() == fd::make_dims(1, 3, 4));
  CHECK(outs[1].shape() == fd::make_dims(2, 2, 4));
  CHECK(outs[2].shape() == fd::make_dims(2, 3, 2));
  CHECK(outs[3].shape() == fd::make_dims(2, 3, 1));
  test::check_close(outs[0], w0, 0);
  test::check_close(outs[1], w1, 0);
  test::check_close(outs[2], w2, 0);
  test::check_close(outs[3], w3, 0);
}

TEST_CASE("concat joins operands of different lengths along any axis") {
  constexpr auto a = fd::input<"a", float, 2, 3>();
  constexpr auto b = fd::input<"b", float, 2, 1>();
  constexpr auto c = fd::input<"c", float, 2, 2>();
  constexpr auto d = fd::input<"d", float, 1, 3>();
  auto av = test::random_tensor<float, 2, 3>(5);
  auto bv = test::random_tensor<float, 2, 1>(6);
  auto cv = test::random_tensor<float, 2, 2>(7);
  auto dv = test::random_tensor<float, 1, 3>(8);
  auto outs = fd::reference::run(fd::flatten(fd::concat<1>(a, b, c), fd::concat<0>(a, d, a)),
                                 {{"a", av}, {"b", bv}, {"c", cv}, {"d", dv}});
  CHECK(outs[0].shape() == fd::make_dims(2, 6));
  CHECK(outs[1].shape() == fd::make_dims(5, 3));
  std::vector<double> w0, w1;
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 3; ++j) w0.push_back(av(r, j));
    w0.push_back(bv(r, 0));
    for (int j = 0; j < 2; ++j) w0.push_back(cv(r, j));
  }
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) w1.push_back(av(r, j));
  for (int j = 0; j < 3; ++j) w1.push_back(dv(0, j));
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) w1.push_back(av(r, j));
  test::check_close(outs[0], w0, 0);
  test::check_close(outs[1], w1, 0);
}

TEST_CASE("broadcast_to repeats size-1 and missing axes") {
  constexpr auto r = fd::input<"r", float, 3, 1>();
  auto rv = test::random_tensor<float, 3, 1>(9);
  auto out = fd::reference::run(fd::flatten(fd::broadcast_to<2, 3, 4>(r)), {{"r", rv}});
  CHECK(out[0].shape() == fd::make_dims(2, 3, 4));
  std::vector<double> want;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) want.push_back(rv(b, 0));
  test::check_close(out[0], want, 0);
}

TEST_CASE("structural ops copy bf16 and pred elements bit for bit") {
  constexpr auto h = fd::input<"h", fd::bf16, 3, 4>();
  fd::tensor<fd::bf16, 3, 4> hv;
  for (int i = 0; i < 12; ++i) hv[i] = fd::bf16::from_bits(std::uint16_t(0x3f80 + 7 * i));
  hv[5] = fd::bf16::from_bits(0x7fc1);  // a NaN with a payload survives a copy
  constexpr auto mask = fd::iota<std::int32_t, 0, 3, 4>() > fd::iota<std::int32_t, 1, 3, 4>();
  auto outs = fd::reference::run(
      fd::flatten(fd::transpose(h), fd::slice<1, 1, 3>(fd::transpose(mask))), {{"h", hv}});
  REQUIRE(outs[0].type() == fd::dtype::bf16);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(outs[0].data<fd::bf16>()[j * 3 + i].bits == hv(i, j).bits);
  REQUIRE(outs[1].type() == fd::dtype::boolean);
  CHECK(outs[1].shape() == fd::make_dims(4, 2));
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 2; ++k) CHECK(outs[1].data<bool>()[j * 2 + k] == (k + 1 > j));
}
