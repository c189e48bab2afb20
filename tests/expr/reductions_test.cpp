// Reductions against plain loops: sum, mean, max, min over every axis, with and without keepdims.
#include <limits>

#include "../common/test_util.hpp"

namespace {

constexpr auto x = fd::input<"x", float, 3, 4, 5>();
const fd::dims xs = fd::make_dims(3, 4, 5);

enum class kind { sum, mean, max, min };

// The reduction of xv over `axis`, in double, in the output's row-major order.
std::vector<double> expected(const fd::tensor<float, 3, 4, 5>& xv, int axis, kind k) {
  std::vector<double> out;
  axis = fd::normalize_axis(axis, 3);
  if (axis < 0 || axis > 2) return out;
  const int n[3] = {3, 4, 5};
  int o1 = axis == 0 ? 1 : 0, o2 = axis == 2 ? 1 : 2;  // the two kept axes, in order
  for (int a = 0; a < n[o1]; ++a)
    for (int b = 0; b < n[o2]; ++b) {
      double acc = 0;
      for (int r = 0; r < n[axis]; ++r) {
        int idx[3]{};
        idx[axis] = r;
        idx[o1] = a;
        idx[o2] = b;
        const double v = xv(idx[0], idx[1], idx[2]);
        if (r == 0 && (k == kind::max || k == kind::min))
          acc = v;
        else if (k == kind::max)
          acc = v > acc ? v : acc;
        else if (k == kind::min)
          acc = v < acc ? v : acc;
        else
          acc += v;
      }
      out.push_back(k == kind::mean ? acc / n[axis] : acc);
    }
  return out;
}

template <int Axis, bool Keep>
void check_axis(const fd::tensor<float, 3, 4, 5>& xv) {
  auto outs = fd::reference::run(fd::flatten(fd::sum<Axis, Keep>(x), fd::mean<Axis, Keep>(x),
                                                    fd::max<Axis, Keep>(x), fd::min<Axis, Keep>(x)),
                                 {{"x", xv.ref()}});
  REQUIRE(outs.size() == 4);
  const fd::dims want_shape = fd::reduce_shape(xs, Axis, Keep).value;
  for (auto& o : outs) CHECK(o.shape() == want_shape);
  test::check_close(outs[0], expected(xv, Axis, kind::sum), 1e-5, 1e-5);
  test::check_close(outs[1], expected(xv, Axis, kind::mean), 1e-6, 1e-5);
  test::check_close(outs[2], expected(xv, Axis, kind::max), 0);
  test::check_close(outs[3], expected(xv, Axis, kind::min), 0);
}

}  // namespace

TEST_CASE("sum, mean, max and min reduce each axis, dropping it or keeping it as 1") {
  const auto xv = test::random_tensor<float, 3, 4, 5>(7, -2, 2);
  SUBCASE("axis 0") {
    check_axis<0, false>(xv);
    check_axis<0, true>(xv);
  }
  SUBCASE("axis 1") {
    check_axis<1, false>(xv);
    check_axis<1, true>(xv);
  }
  SUBCASE("axis 2") {
    check_axis<2, false>(xv);
    check_axis<2, true>(xv);
  }
  SUBCASE("axis -1 is the last axis") {
    check_axis<-1, true>(xv);
  }
}

TEST_CASE("a rank-1 reduction gives a scalar, and a keepdims result broadcasts back") {
  constexpr auto v = fd::input<"v", float, 8>();
  auto vv = test::random_tensor<float, 8>(3);
  // x - mean(x, keepdims): a centred row, the broadcast a norm layer needs.
  auto xv = test::random_tensor<float, 3, 4, 5>(4);
  auto outs = fd::reference::run(fd::flatten(fd::sum<0>(v), x - fd::mean<2, true>(x)),
                                 {{"v", vv}, {"x", xv}});
  double s = 0;
  for (int i = 0; i < 8; ++i) s += vv[i];
  CHECK(outs[0].shape().rank == 0);
  test::check_close(outs[0], {s}, 1e-6);
  std::vector<double> centred(60);
  for (int r = 0; r < 12; ++r) {
    float m = 0;
    for (int j = 0; j < 5; ++j) m += xv[r * 5 + j];
    m /= 5.0f;
    for (int j = 0; j < 5; ++j) centred[std::size_t(r * 5 + j)] = double(xv[r * 5 + j] - m);
  }
  test::check_close(outs[1], centred, 0);
}

TEST_CASE("max and min propagate NaN; -inf and +inf are ordinary extremes") {
  fd::tensor<float, 3, 4, 5> xv;
  for (int i = 0; i < 60; ++i) xv[i] = float(i % 7);
  xv(0, 1, 2) = std::numeric_limits<float>::quiet_NaN();
  xv(1, 2, 3) = std::numeric_limits<float>::infinity();
  xv(2, 3, 4) = -std::numeric_limits<float>::infinity();
  auto outs = fd::reference::run(fd::flatten(fd::max<2>(x), fd::min<2>(x), fd::sum<2>(x)),
                                 {{"x", xv}});
  const auto mx = test::values(outs[0]), mn = test::values(outs[1]), sm = test::values(outs[2]);
  CHECK(std::isnan(mx[1 * 1 + 0]));  // row (0,1)
  CHECK(std::isnan(mn[1]));
  CHECK(std::isnan(sm[1]));
  CHECK(mx[4 + 2] == std::numeric_limits<float>::infinity());   // row (1,2)
  CHECK(mn[8 + 3] == -std::numeric_limits<float>::infinity());  // row (2,3)
  CHECK(mx[0] == 4.0f);                                         // row (0,0) holds 0..4
}

TEST_CASE("a bf16 reduction accumulates in f32 and rounds once") {
  constexpr auto b = fd::input<"x", fd::bf16, 4, 64>();
  fd::tensor<fd::bf16, 4, 64> bv;
  for (int i = 0; i < 256; ++i) bv[i] = fd::bf16(1.0f + float(i % 64) / 64.0f);
  auto out = fd::reference::run(fd::flatten(fd::sum<1>(b)), {{"x", bv}});
  REQUIRE(out[0].type() == fd::dtype::bf16);
  for (int r = 0; r < 4; ++r) {
    float acc = 0;
    for (int j = 0; j < 64; ++j) acc += float(bv(r, j));
    CHECK(out[0].data<fd::bf16>()[r] == fd::bf16(acc));
  }
}

TEST_CASE("integer reductions: sum, max and min of i32 are exact") {
  constexpr auto i = fd::iota<std::int32_t, 1, 3, 6>();
  auto outs =
      fd::reference::run(fd::flatten(fd::sum<1>(i), fd::max<1>(i), fd::min<0>(i)), {});
  test::check_close(outs[0], {15, 15, 15}, 0);
  test::check_close(outs[1], {5, 5, 5}, 0);
  test::check_close(outs[2], {0, 1, 2, 3, 4, 5}, 0);
  CHECK_THROWS_WITH_AS(fd::reference::run(fd::flatten(fd::mean<1>(i)), {}),
                       doctest::Contains("reduce_mean: needs a floating-point operand"), fd::error);
}
