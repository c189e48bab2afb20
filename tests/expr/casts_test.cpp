// bf16 and f16 conversions (round to nearest, ties to even) on hand-picked values, and the cast
// node between every pair of dtypes.
#include <bit>
#include <limits>

#include "../common/test_util.hpp"

namespace {

float from_bits(std::uint32_t u) {
  return std::bit_cast<float>(u);
}
constexpr float inf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("bf16 rounds to nearest, ties to even, and keeps inf and NaN") {
  CHECK(fd::bf16(1.0f).bits == 0x3f80);
  CHECK(fd::bf16(from_bits(0x3f808000)).bits == 0x3f80);  // 1 + 2^-8: a tie, 0x3f80 is even
  CHECK(fd::bf16(from_bits(0x3f818000)).bits == 0x3f82);  // 1 + 3 2^-8: a tie, rounds up to even
  CHECK(fd::bf16(from_bits(0x3f808001)).bits == 0x3f81);  // just above the tie
  CHECK(fd::bf16(from_bits(0x3f807fff)).bits == 0x3f80);  // just below the tie
  CHECK(fd::bf16(-2.0f).bits == 0xc000);
  CHECK(fd::bf16(inf).bits == 0x7f80);
  CHECK(fd::bf16(-inf).bits == 0xff80);
  CHECK(fd::bf16(std::numeric_limits<float>::max()).bits ==
        0x7f80);  // rounds up past the largest bf16
  CHECK(std::isnan(float(fd::bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(float(fd::bf16(from_bits(0x7f800001)))));  // a signalling NaN stays NaN, not inf
  CHECK(fd::bf16(from_bits(0x00010000)).bits == 0x0001);      // a subnormal
  CHECK(float(fd::bf16::from_bits(0x3f81)) == 1.0078125f);
}

TEST_CASE("f16 rounds to nearest, ties to even, through normals, subnormals and overflow") {
  CHECK(fd::f16(1.0f).bits == 0x3c00);
  CHECK(fd::f16(-0.0f).bits == 0x8000);
  CHECK(fd::f16(1.0f + 0x1p-11f).bits == 0x3c00);      // tie, even stays
  CHECK(fd::f16(1.0f + 3 * 0x1p-11f).bits == 0x3c02);  // tie, rounds up to even
  CHECK(fd::f16(1.0f + 0x1p-11f + 0x1p-20f).bits == 0x3c01);
  CHECK(fd::f16(65504.0f).bits == 0x7bff);  // the largest f16
  CHECK(fd::f16(65519.0f).bits == 0x7bff);
  CHECK(fd::f16(65520.0f).bits == 0x7c00);  // the tie above it overflows to inf
  CHECK(fd::f16(inf).bits == 0x7c00);
  CHECK(fd::f16(-inf).bits == 0xfc00);
  CHECK(std::isnan(float(fd::f16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(fd::f16(0x1p-14f).bits == 0x0400);             // the smallest normal
  CHECK(fd::f16(0x1p-24f).bits == 0x0001);             // the smallest subnormal
  CHECK(fd::f16(1023 * 0x1p-24f).bits == 0x03ff);      // the largest subnormal
  CHECK(fd::f16(0x1p-25f).bits == 0x0000);             // half the smallest subnormal: tie to even 0
  CHECK(fd::f16(3 * 0x1p-25f).bits == 0x0002);         // 1.5 ulp: tie to even 2
  CHECK(fd::f16(0x1p-25f + 0x1p-30f).bits == 0x0001);  // above the tie
  CHECK(fd::f16(0x1p-26f).bits == 0x0000);             // underflows to zero
  CHECK(float(fd::f16::from_bits(0x0001)) == 0x1p-24f);
  CHECK(float(fd::f16::from_bits(0x03ff)) == 1023 * 0x1p-24f);
  CHECK(float(fd::f16::from_bits(0xfbff)) == -65504.0f);
}

TEST_CASE("cast nodes round f32 to bf16 and f16 exactly as the core conversions do") {
  constexpr auto x = fd::input<"x", float, 16>();
  fd::tensor<float, 16> xv;
  const float picks[16] = {1.0f,
                           from_bits(0x3f808000),
                           from_bits(0x3f818000),
                           1.0f + 0x1p-11f,
                           1.0f + 3 * 0x1p-11f,
                           65520.0f,
                           0x1p-25f,
                           3 * 0x1p-25f,
                           1023 * 0x1p-24f,
                           -0.0f,
                           inf,
                           -inf,
                           std::numeric_limits<float>::quiet_NaN(),
                           3.14159265f,
                           -1e-3f,
                           1e30f};
  for (int i = 0; i < 16; ++i) xv[i] = picks[i];
  auto outs = fd::reference::run(fd::flatten(fd::cast<fd::bf16>(x), fd::cast<fd::f16>(x),
                                                    fd::cast<float>(fd::cast<fd::bf16>(x)),
                                                    fd::cast<fd::f16>(fd::cast<fd::bf16>(x))),
                                 {{"x", xv}});
  REQUIRE(outs[0].type() == fd::dtype::bf16);
  REQUIRE(outs[1].type() == fd::dtype::f16);
  REQUIRE(outs[2].type() == fd::dtype::f32);
  for (int i = 0; i < 16; ++i) {
    CAPTURE(i);
    CHECK(outs[0].data<fd::bf16>()[i].bits == fd::bf16(picks[i]).bits);
    CHECK(outs[1].data<fd::f16>()[i].bits == fd::f16(picks[i]).bits);
    const float back = outs[2].data<float>()[i];
    const float want = float(fd::bf16(picks[i]));
    CHECK((std::bit_cast<std::uint32_t>(back) == std::bit_cast<std::uint32_t>(want) ||
           (back != back && want != want)));
    CHECK(outs[3].data<fd::f16>()[i].bits == fd::f16(float(fd::bf16(picks[i]))).bits);
  }
}

TEST_CASE("casts to i32 truncate toward zero and saturate; NaN gives 0; pred is != 0") {
  constexpr auto x = fd::input<"x", float, 8>();
  fd::tensor<float, 8> xv;
  const float picks[8] = {2.7f, -2.7f, 1e10f, -1e10f, std::numeric_limits<float>::quiet_NaN(),
                          inf,  0.0f,  -0.0f};
  for (int i = 0; i < 8; ++i) xv[i] = picks[i];
  auto outs = fd::reference::run(fd::flatten(fd::cast<std::int32_t>(x), fd::cast<bool>(x)),
                                 {{"x", xv}});
  REQUIRE(outs[0].type() == fd::dtype::i32);
  const std::int32_t want[8] = {2, -2, 2147483647, -2147483647 - 1, 0, 2147483647, 0, 0};
  for (int i = 0; i < 8; ++i) CHECK(outs[0].data<std::int32_t>()[i] == want[i]);
  const bool wantb[8] = {true, true, true, true, true, true, false, false};
  for (int i = 0; i < 8; ++i) CHECK(outs[1].data<bool>()[i] == wantb[i]);
}

TEST_CASE("i32 and pred cast to floating types as their values") {
  constexpr auto i = fd::iota<std::int32_t, 0, 5>();
  auto outs = fd::reference::run(fd::flatten(fd::cast<float>(i), fd::cast<fd::f16>(i),
                                                    fd::cast<float>(i > fd::lit<2.0>)),
                                 {});
  test::check_close(outs[0], {0, 1, 2, 3, 4}, 0);
  REQUIRE(outs[1].type() == fd::dtype::f16);
  test::check_close(outs[1], {0, 1, 2, 3, 4}, 0);
  test::check_close(outs[2], {0, 0, 0, 1, 1}, 0);
}

TEST_CASE("casts to i8 and u8 truncate toward zero and saturate; NaN gives 0; i8 sums saturate") {
  constexpr auto x = fd::input<"x", float, 8>();
  fd::tensor<float, 8> xv;
  const float picks[8] = {2.7f, -2.7f, 300.0f, -300.0f, std::numeric_limits<float>::quiet_NaN(),
                          inf,  127.9f, -128.5f};
  for (int i = 0; i < 8; ++i) xv[i] = picks[i];
  constexpr auto q = fd::cast<std::int8_t>(x);
  auto outs = fd::reference::run(
      fd::flatten(q, fd::cast<std::uint8_t>(x), fd::cast<float>(q), q + q), {{"x", xv}});
  REQUIRE(outs[0].type() == fd::dtype::i8);
  REQUIRE(outs[1].type() == fd::dtype::u8);
  const std::int8_t want_i8[8] = {2, -2, 127, -128, 0, 127, 127, -128};
  const std::uint8_t want_u8[8] = {2, 0, 255, 0, 0, 255, 127, 0};
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(outs[0].data<std::int8_t>()[i] == want_i8[i]);
    CHECK(outs[1].data<std::uint8_t>()[i] == want_u8[i]);
    CHECK(outs[2].data<float>()[i] == float(want_i8[i]));
    const int sum = 2 * want_i8[i];
    CHECK(outs[3].data<std::int8_t>()[i] == std::int8_t(sum > 127 ? 127 : sum < -128 ? -128 : sum));
  }
  CHECK(fd::from_f32<std::int8_t>(-0.5f) == 0);
  CHECK(fd::size_of(fd::dtype::u8) == 1);
  CHECK(fd::name_of(fd::dtype::i8) == "i8");
}
