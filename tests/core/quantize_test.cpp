// int8 weights per channel (core/quantize.hpp): scales from each channel's largest magnitude along
// either axis, values within half a step, ties to even, zero channels, the symmetric range, and
// the errors for non-finite weights, bad shapes and weights that do not fit their scales.
#include "fusedsl/core/quantize.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace fd = fusedsl;

namespace {

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.2f);
  std::vector<float> w(std::size_t(rows * cols));
  for (float& v : w) v = d(rng);
  return w;
}

}  // namespace

TEST_CASE("per-channel int8 weights come back within half a step, along either axis") {
  constexpr std::int64_t rows = 7, cols = 13;
  const std::vector<float> w = random_matrix(rows, cols, 3);
  for (int axis : {0, 1}) {
    CAPTURE(axis);
    const fd::s8_weight q = fd::quantize_s8_per_channel(w, rows, cols, axis);
    REQUIRE(q.channels() == (axis == 0 ? rows : cols));
    REQUIRE(q.scales.size() == std::size_t(q.channels()));
    std::vector<float> peak(q.scales.size(), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        float& p = peak[std::size_t(axis == 0 ? r : c)];
        p = std::max(p, std::fabs(w[std::size_t(r * cols + c)]));
      }
    int extremes = 0, outside = 0, below = 0;
    for (std::size_t ch = 0; ch < peak.size(); ++ch) CHECK(q.scales[ch] == peak[ch] / 127.0f);
    const std::vector<float> back = q.dequantize();
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::size_t i = std::size_t(r * cols + c);
        extremes += std::abs(q.values[i]) == 127;
        below += q.values[i] < -127;
        outside += std::fabs(back[i] - w[i]) > 0.5f * q.scale_at(r, c) * (1 + 1e-5f);
        CHECK(back[i] == q.dequantized(r, c));
      }
    CHECK(extremes >= q.channels());  // each channel's largest magnitude is +-127
    CHECK(below == 0);
    CHECK(outside == 0);
  }
}

TEST_CASE("quantizing rounds ties to even, keeps zero channels exact and signs symmetric") {
  // Channel 0 (row 0) peaks at 127, so its scale is 1 and the halves are ties.
  const std::vector<float> w = {127.0f, 2.5f,  3.5f,  -2.5f, -0.5f, 0.5f,   // row 0
                                0.0f,   0.0f,  -0.0f, 0.0f,  0.0f,  0.0f,   // row 1: zeros
                                -1.0f,  0.25f, 0.0f,  0.0f,  0.0f,  0.0f};  // row 2
  const fd::s8_weight q = fd::quantize_s8_per_channel(w, 3, 6, 0, "tied");
  CHECK(q.scales[0] == 1.0f);
  CHECK(q.values[0] == 127);
  CHECK(q.values[1] == 2);
  CHECK(q.values[2] == 4);
  CHECK(q.values[3] == -2);
  CHECK(q.values[4] == 0);
  CHECK(q.values[5] == 0);
  CHECK(q.scales[1] == 0.0f);
  for (int c = 0; c < 6; ++c) {
    CHECK(q.values[std::size_t(6 + c)] == 0);
    CHECK(q.dequantized(1, c) == 0.0f);
  }
  CHECK(q.values[12] == -127);  // the negative peak maps to -127, never -128
  CHECK(q.values[13] == 32);    // 0.25 / (1 / 127) = 31.75
}

TEST_CASE("a non-finite weight or a bad shape is an error naming the tensor, channel and element") {
  std::vector<float> w(12, 0.5f);
  w[7] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(fd::quantize_s8_per_channel(w, 3, 4, 1, "fc.weight"),
                       "quantize 'fc.weight': element [1,3] of channel 3 is NaN; a channel with a "
                       "non-finite weight has no scale",
                       fd::quantize_error);
  w[7] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(fd::quantize_s8_per_channel(w, 3, 4, 0, "fc.weight"),
                       "quantize 'fc.weight': element [1,3] of channel 1 is -inf; a channel with "
                       "a non-finite weight has no scale",
                       fd::quantize_error);
  w[7] = 0.0f;
  CHECK_THROWS_WITH_AS(fd::quantize_s8_per_channel(w, 4, 4, 0, "fc.weight"),
                       "quantize 'fc.weight': 12 values for the shape [4,4]", fd::quantize_error);
  CHECK_THROWS_WITH_AS(fd::quantize_s8_per_channel(w, 3, 4, 2, "fc.weight"),
                       "quantize 'fc.weight': channel_axis is 2; a matrix's channels are along "
                       "axis 0 or 1",
                       fd::quantize_error);
  CHECK_THROWS_WITH_AS(fd::quantize_s8_per_channel({}, 0, 4, 0, "fc.weight"),
                       "quantize 'fc.weight': the shape [0,4] is not a matrix with elements",
                       fd::quantize_error);
}

TEST_CASE("a stored weight that does not fit its scales is refused, naming what is wrong") {
  fd::s8_weight q = fd::quantize_s8_per_channel(random_matrix(3, 5, 9), 3, 5, 1);
  CHECK_NOTHROW(fd::check_s8_weight(q, "w"));
  fd::s8_weight few = q;
  few.scales.pop_back();
  CHECK_THROWS_WITH_AS(fd::check_s8_weight(few, "w"),
                       "quantized weight 'w': 4 scales for 5 channels", fd::quantize_error);
  fd::s8_weight negative = q;
  negative.scales[2] = -0.5f;
  CHECK_THROWS_WITH_AS(fd::check_s8_weight(negative, "w"),
                       "quantized weight 'w': the scale of channel 2 is -0.500000; scales are "
                       "finite and not negative",
                       fd::quantize_error);
  fd::s8_weight nan = q;
  nan.scales[0] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(fd::check_s8_weight(nan, "w"), fd::quantize_error);
  fd::s8_weight low = q;
  low.values[7] = -128;
  CHECK_THROWS_WITH_AS(fd::check_s8_weight(low, "w"),
                       "quantized weight 'w': element [1,2] is -128; symmetric int8 weights lie "
                       "in [-127, 127]",
                       fd::quantize_error);
}
