#pragma once
// int8 weights, one scale per output channel (symmetric, no zero point): the weight format of
// dynamically quantized linear layers (ONNX Runtime's MatMulInteger with per-channel weights,
// oneDNN's s8 weights, compressed-tensors' channel-wise int8).
//
//   scale[c] = max |w| over channel c / 127      (0 for a channel of zeros)
//   q        = clamp(round(w / scale[c]), -127, 127), half to even
//   w        ~ scale[c] * q, within scale[c] / 2
//
// The values keep the source weight's layout: a 2-D [rows, cols] matrix whose channel axis is 0
// (torch's Linear, [out, in]) or 1 (GPT-2's Conv1D, [in, out]). -128 is never produced, so the
// range is symmetric and a product of two extremes cannot overflow a 16-bit pair sum. A weight
// holding NaN or an infinity has no scale: quantizing it is an error naming the tensor, the
// channel and the element.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/core/error.hpp"

namespace fusedsl {

// A weight that cannot be quantized, or quantized values that do not fit their scales.
struct quantize_error : error {
  using error::error;
};

// A 2-D int8 weight with one f32 scale per channel (rows when channel_axis is 0, else columns).
struct s8_weight {
  std::vector<std::int8_t> values;  // rows * cols, row-major, the source's layout
  std::vector<float> scales;        // one per channel
  std::int64_t rows = 0, cols = 0;
  int channel_axis = 0;

  std::int64_t channels() const { return channel_axis == 0 ? rows : cols; }
  // The scale of element (r, c).
  float scale_at(std::int64_t r, std::int64_t c) const {
    return scales[std::size_t(channel_axis == 0 ? r : c)];
  }
  float dequantized(std::int64_t r, std::int64_t c) const {
    return scale_at(r, c) * float(values[std::size_t(r * cols + c)]);
  }
  std::vector<float> dequantize() const {
    std::vector<float> out(values.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) out[std::size_t(r * cols + c)] = dequantized(r, c);
    return out;
  }
};

namespace detail {

inline void check_quantize_shape(std::string_view name, std::size_t size, std::int64_t rows,
                                 std::int64_t cols, int channel_axis) {
  const std::string n(name);
  if (rows <= 0 || cols <= 0)
    throw quantize_error("quantize '" + n + "': the shape [" + std::to_string(rows) + "," +
                         std::to_string(cols) + "] is not a matrix with elements");
  if (channel_axis != 0 && channel_axis != 1)
    throw quantize_error("quantize '" + n + "': channel_axis is " + std::to_string(channel_axis) +
                         "; a matrix's channels are along axis 0 or 1");
  if (std::uint64_t(size) != std::uint64_t(rows) * std::uint64_t(cols))
    throw quantize_error("quantize '" + n + "': " + std::to_string(size) +
                         " values for the shape [" + std::to_string(rows) + "," +
                         std::to_string(cols) + "]");
}

}  // namespace detail

// Quantizes the f32 matrix `w` ([rows, cols], row-major) per channel; `name` labels errors.
inline s8_weight quantize_s8_per_channel(std::span<const float> w, std::int64_t rows,
                                         std::int64_t cols, int channel_axis,
                                         std::string_view name = "weight") {
  detail::check_quantize_shape(name, w.size(), rows, cols, channel_axis);
  s8_weight out;
  out.rows = rows;
  out.cols = cols;
  out.channel_axis = channel_axis;
  out.values.resize(w.size());
  out.scales.assign(std::size_t(out.channels()), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = w[std::size_t(r * cols + c)];
      if (!std::isfinite(v))
        throw quantize_error("quantize '" + std::string(name) + "': element [" + std::to_string(r) +
                             "," + std::to_string(c) + "] of channel " +
                             std::to_string(channel_axis == 0 ? r : c) + " is " +
                             (v != v  ? "NaN"
                              : v > 0 ? "inf"
                                      : "-inf") +
                             "; a channel with a non-finite weight has no scale");
      float& s = out.scales[std::size_t(channel_axis == 0 ? r : c)];
      s = std::max(s, std::fabs(v));
    }
  for (float& s : out.scales) s /= 127.0f;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = std::size_t(r * cols + c);
      const float s = out.scale_at(r, c);
      const float q = s > 0.0f ? std::nearbyint(w[i] / s) : 0.0f;
      out.values[i] = std::int8_t(std::clamp(q, -127.0f, 127.0f));
    }
  return out;
}

// Checks a weight read from storage: sizes agree, every scale is finite and not negative, no value
// is -128 (outside the symmetric range). `name` labels errors.
inline void check_s8_weight(const s8_weight& w, std::string_view name) {
  detail::check_quantize_shape(name, w.values.size(), w.rows, w.cols, w.channel_axis);
  const std::string n(name);
  if (std::int64_t(w.scales.size()) != w.channels())
    throw quantize_error("quantized weight '" + n + "': " + std::to_string(w.scales.size()) +
                         " scales for " + std::to_string(w.channels()) + " channels");
  for (std::size_t c = 0; c < w.scales.size(); ++c)
    if (!(w.scales[c] >= 0.0f) || !std::isfinite(w.scales[c]))
      throw quantize_error("quantized weight '" + n + "': the scale of channel " +
                           std::to_string(c) + " is " + std::to_string(w.scales[c]) +
                           "; scales are finite and not negative");
  for (std::size_t i = 0; i < w.values.size(); ++i)
    if (w.values[i] == -128)
      throw quantize_error("quantized weight '" + n + "': element [" +
                           std::to_string(std::int64_t(i) / w.cols) + "," +
                           std::to_string(std::int64_t(i) % w.cols) +
                           "] is -128; symmetric int8 weights lie in [-127, 127]");
}

}  // namespace fusedsl
