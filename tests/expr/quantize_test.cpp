// quantize and dequantize (expr/quantize.hpp) through the reference backend against plain loops:
// per tensor, per channel and per row, symmetric and with zero points, ties to even, saturation,
// NaN, and the round trip's error bound.
#include <cmath>
#include <cstdint>
#include <limits>

#include "../common/test_util.hpp"

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

// The formula of ONNX's QuantizeLinear with ties to even, saturating, NaN to 0.
template <class T>
T quantize_one(float x, float scale, int zero) {
  const double v = double(x) / double(scale);
  if (std::isnan(v)) return T(0);
  const double r = std::nearbyint(v) + zero;
  const double lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  return T(r < lo ? lo : (r > hi ? hi : r));
}

}  // namespace

TEST_CASE("quantize to int8 per tensor: ties to even, saturation at -128 and 127, NaN to 0") {
  constexpr auto x = fd::input<"x", float, 3, 7>();
  constexpr auto s = fd::input<"s", float>();
  const float vals[21] = {0.25f,  0.75f, -0.25f, -0.75f, 1.25f,  0.1f,    -0.1f,
                          31.75f, 31.8f, -32.0f, -32.2f, 100.0f, -100.0f, inf,
                          -inf,   qnan,  0.0f,   -0.0f,  0.124f, 0.126f,  12.3f};
  fd::tensor<float, 3, 7> xv;
  for (int i = 0; i < 21; ++i) xv[i] = vals[i];
  fd::tensor<float> sv;
  sv[0] = 0.25f;  // 0.125 = scale / 2: the tie points are odd multiples of 0.125
  auto out =
      fd::reference::run(fd::flatten(fd::quantize<std::int8_t>(x, s)), {{"x", xv}, {"s", sv}});
  REQUIRE(out.at(0).type() == fd::dtype::i8);
  const std::int8_t* q = out.at(0).data<std::int8_t>();
  for (int i = 0; i < 21; ++i) {
    CAPTURE(vals[i]);
    CHECK(q[i] == quantize_one<std::int8_t>(vals[i], 0.25f, 0));
  }
  CHECK(q[0] == 1);    // 0.25 / 0.25
  CHECK(q[1] == 3);    // 0.75 / 0.25
  CHECK(q[4] == 5);    // 1.25 / 0.25
  CHECK(q[7] == 127);  // 127
  CHECK(q[8] == 127);  // 127.2, saturated
  CHECK(q[9] == -128);
  CHECK(q[10] == -128);  // -128.8, saturated
  CHECK(q[13] == 127);   // +inf
  CHECK(q[14] == -128);  // -inf
  CHECK(q[15] == 0);     // NaN
  CHECK(q[18] == 0);     // 0.496: below the tie
  CHECK(q[19] == 1);     // 0.504
}

TEST_CASE("quantize to uint8 per row with zero points, and dequantize back within scale / 2") {
  constexpr int R = 5, C = 19;  // 19: not a multiple of any vector width
  constexpr auto x = fd::input<"x", float, R, C>();
  constexpr auto s = fd::input<"s", float, R, 1>();
  constexpr auto z = fd::input<"z", std::uint8_t, R, 1>();
  auto xv = test::random_tensor<float, R, C>(3, -2.0f, 6.0f);
  fd::tensor<float, R, 1> sv;
  fd::tensor<std::uint8_t, R, 1> zv;
  for (int r = 0; r < R; ++r) {
    float lo = 0.0f, hi = 0.0f;  // the row's range widened to hold 0
    for (int c = 0; c < C; ++c) lo = std::min(lo, xv(r, c)), hi = std::max(hi, xv(r, c));
    sv(r, 0) = (hi - lo) / 255.0f;
    zv(r, 0) = std::uint8_t(std::nearbyint(-lo / sv(r, 0)));
  }
  constexpr auto q = fd::quantize<std::uint8_t>(x, s, z);
  auto out = fd::reference::run(fd::flatten(q, fd::dequantize(q, s, z)),
                                {{"x", xv}, {"s", sv}, {"z", zv}});
  REQUIRE(out.at(0).type() == fd::dtype::u8);
  REQUIRE(out.at(1).type() == fd::dtype::f32);
  const std::uint8_t* qv = out.at(0).data<std::uint8_t>();
  const float* back = out.at(1).data<float>();
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      CAPTURE(r);
      CAPTURE(c);
      const int i = r * C + c;
      CHECK(qv[i] == quantize_one<std::uint8_t>(xv(r, c), sv(r, 0), zv(r, 0)));
      CHECK(back[i] == float((double(qv[i]) - zv(r, 0)) * sv(r, 0)));
      CHECK(std::abs(back[i] - xv(r, c)) <= sv(r, 0) * 0.5f * (1.0f + 1e-5f));
    }
}

TEST_CASE("int8 weights per output channel: dequantize broadcasts a scale over the last axis") {
  constexpr auto w = fd::param<"w", std::int8_t, 6, 4>();
  constexpr auto ws = fd::param<"ws", float, 4>();
  fd::tensor<std::int8_t, 6, 4> wv;
  fd::tensor<float, 4> sv;
  for (int i = 0; i < 24; ++i) wv[i] = std::int8_t(i * 11 - 128);
  for (int c = 0; c < 4; ++c) sv[c] = 0.01f * float(c + 1);
  auto out = fd::reference::run(fd::flatten(fd::dequantize(w, ws)), {{"w", wv}, {"ws", sv}});
  for (int i = 0; i < 24; ++i) CHECK(out.at(0).data<float>()[i] == float(wv[i]) * sv[i % 4]);
}
