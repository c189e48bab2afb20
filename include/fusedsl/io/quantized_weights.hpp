#pragma once
// int8 weights (core/quantize.hpp) in safetensors files: made at load from an F32, F16 or BF16
// checkpoint, or read pre-quantized, and written back.
//
// Stored as compressed-tensors stores channel-wise int8 weights: the values as an I8 tensor under
// the weight's own name, in its layout, and the scales as F32 `<name>_scale`, shaped to broadcast
// against the weight: [rows, 1] for channels along axis 0 (torch's Linear, [out, in]), [1, cols]
// for axis 1 (GPT-2's Conv1D, [in, out]). The scale's shape says the channel axis, so a reader
// needs nothing else.
//
//   const auto file = io::safetensors_file::open("model.safetensors");
//   s8_weight w = io::load_s8_weight(file, "encoder.layer.0.attention.self.query.weight", 0);
//   std::vector<io::safetensors_entry> out = io::s8_weight_entries("...query.weight", w);
//   io::write_safetensors("model-int8.safetensors", out);
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/core/quantize.hpp"
#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/io/safetensors_writer.hpp"

namespace fusedsl::io {

// The name of the scales of the int8 weight `name`.
inline std::string s8_scale_name(std::string_view name) {
  return std::string(name) + "_scale";
}

// The two tensors that store `w` under `name`: the I8 values and the F32 scales. They view `w`'s
// storage: keep it alive until they are written.
inline std::array<safetensors_entry, 2> s8_weight_entries(std::string name, const s8_weight& w) {
  check_s8_weight(w, name);
  std::vector<std::int64_t> scale_shape = w.channel_axis == 0
                                              ? std::vector<std::int64_t>{w.rows, 1}
                                              : std::vector<std::int64_t>{1, w.cols};
  std::string scale = s8_scale_name(name);
  return {make_safetensors_entry<std::int8_t>(std::move(name), w.values, {w.rows, w.cols}),
          make_safetensors_entry<float>(std::move(scale), w.scales, std::move(scale_shape))};
}

// Reads the int8 weight `name` and its scales (F32, F16 or BF16, widened exactly). Errors name the
// file and the tensor: a weight that is not 2-D I8, scales that are missing or not shaped [rows, 1]
// or [1, cols], a scale that is negative or not finite, a value of -128.
inline s8_weight read_s8_weight(const safetensors_file& file, std::string_view name) {
  const auto fail = [&](const std::string& what) -> void {
    throw safetensors_error("safetensors: " + file.label() + ": int8 weight '" + std::string(name) +
                            "' " + what);
  };
  const safetensors_tensor& t = file.tensor(name);
  if (t.dtype != safetensors_dtype::i8 || t.shape.size() != 2)
    fail("is " + std::string(name_of(t.dtype)) + " of rank " + std::to_string(t.shape.size()) +
         "; an int8 weight is a 2-D I8 tensor");
  const std::string scale_name = s8_scale_name(name);
  if (!file.contains(scale_name)) fail("has no scales: the file lacks '" + scale_name + "'");
  const safetensors_tensor& s = file.tensor(scale_name);
  s8_weight w;
  w.rows = t.shape[0];
  w.cols = t.shape[1];
  if (s.shape.size() == 2 && s.shape[0] == w.rows && s.shape[1] == 1)
    w.channel_axis = 0;
  else if (s.shape.size() == 2 && s.shape[0] == 1 && s.shape[1] == w.cols)
    w.channel_axis = 1;
  else
    fail("is [" + std::to_string(w.rows) + "," + std::to_string(w.cols) + "] but '" + scale_name +
         "' is not shaped [" + std::to_string(w.rows) + ",1] (channels along axis 0) or [1," +
         std::to_string(w.cols) + "] (along axis 1)");
  if (!reads_as_f32(s.dtype))
    fail("has scales of dtype " + std::string(name_of(s.dtype)) + "; scales are F32, F16 or BF16");
  const safetensors_view v = file.view(name);
  w.values.resize(v.bytes.size());
  if (!v.bytes.empty()) std::memcpy(w.values.data(), v.bytes.data(), v.bytes.size());
  w.scales = file.to_f32(scale_name);
  try {
    check_s8_weight(w, name);
  } catch (const quantize_error& e) {
    fail(std::string("does not hold: ") + e.what());
  }
  return w;
}

// The int8 weight `name`: read as stored where the file holds it in int8 (its scales' shape must
// put the channels along `channel_axis`), else quantized per channel from an F32, F16 or BF16
// matrix.
inline s8_weight load_s8_weight(const safetensors_file& file, std::string_view name,
                                int channel_axis) {
  const safetensors_tensor& t = file.tensor(name);
  if (t.dtype == safetensors_dtype::i8) {
    s8_weight w = read_s8_weight(file, name);
    if (w.channel_axis != channel_axis)
      throw safetensors_error("safetensors: " + file.label() + ": int8 weight '" +
                              std::string(name) + "' has its scales along axis " +
                              std::to_string(w.channel_axis) + ", not the axis " +
                              std::to_string(channel_axis) + " asked for");
    return w;
  }
  if (!reads_as_f32(t.dtype) || t.shape.size() != 2)
    throw safetensors_error("safetensors: " + file.label() + ": weight '" + std::string(name) +
                            "' is " + std::string(name_of(t.dtype)) + " of rank " +
                            std::to_string(t.shape.size()) +
                            "; quantizing takes a 2-D F32, F16 or BF16 tensor, or reads I8");
  const std::vector<float> f = file.to_f32(name);
  return quantize_s8_per_channel(f, t.shape[0], t.shape[1], channel_axis,
                                 file.label() + ": " + std::string(name));
}

}  // namespace fusedsl::io
