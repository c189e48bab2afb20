// int8 weights in safetensors files (io/quantized_weights.hpp): quantized at load from F32 and
// BF16 checkpoints, written as I8 values with `<name>_scale` beside them, read back unchanged along
// either channel axis, and every malformed pair refused with an error naming the file and tensor.
#include "fusedsl/io/quantized_weights.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/io/safetensors_writer.hpp"
#include "safetensors_test_util.hpp"

using namespace fusedsl;
using namespace fusedsl::io;

namespace {

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.1f);
  std::vector<float> w(std::size_t(rows * cols));
  for (float& v : w) v = d(rng);
  return w;
}

bool same(const s8_weight& a, const s8_weight& b) {
  return a.rows == b.rows && a.cols == b.cols && a.channel_axis == b.channel_axis &&
         a.values == b.values && a.scales == b.scales;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("int8 weights are written as I8 with their scales and read back unchanged") {
  const std::vector<float> a = random_matrix(6, 10, 1), b = random_matrix(10, 6, 2);
  const s8_weight linear = quantize_s8_per_channel(a, 6, 10, 0, "fc.weight");      // [out, in]
  const s8_weight conv1d = quantize_s8_per_channel(b, 10, 6, 1, "c_attn.weight");  // [in, out]
  std::vector<safetensors_entry> entries;
  for (auto& e : s8_weight_entries("fc.weight", linear)) entries.push_back(e);
  for (auto& e : s8_weight_entries("c_attn.weight", conv1d)) entries.push_back(e);
  const std::string bytes = serialize_safetensors(entries);
  const safetensors_file f = safetensors_file::parse(test::as_bytes(bytes), "int8.safetensors");
  CHECK(f.tensor("fc.weight").dtype == safetensors_dtype::i8);
  CHECK(f.tensor("fc.weight_scale").shape == std::vector<std::int64_t>{6, 1});
  CHECK(f.tensor("c_attn.weight_scale").shape == std::vector<std::int64_t>{1, 6});
  CHECK(same(read_s8_weight(f, "fc.weight"), linear));
  CHECK(same(read_s8_weight(f, "c_attn.weight"), conv1d));
  CHECK(same(load_s8_weight(f, "fc.weight", 0), linear));  // stored int8 is read as it is
  CHECK(error_of([&] { load_s8_weight(f, "c_attn.weight", 0); }) ==
        "safetensors: int8.safetensors: int8 weight 'c_attn.weight' has its scales along axis 1, "
        "not the axis 0 asked for");
}

TEST_CASE("an F32 or BF16 checkpoint is quantized at load as its f32 values would be") {
  const std::vector<float> w = random_matrix(5, 7, 3);
  std::vector<std::uint16_t> w16(w.size());
  std::vector<float> widened(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    w16[i] = bf16::from_float(w[i]);
    widened[i] = static_cast<float>(bf16::from_bits(w16[i]));
  }
  const std::vector<safetensors_entry> entries = {
      make_safetensors_entry<float>("f32", w, {5, 7}),
      {"bf16", safetensors_dtype::bf16, {5, 7}, std::as_bytes(std::span(w16))}};
  const std::string bytes = serialize_safetensors(entries);
  const safetensors_file f = safetensors_file::parse(test::as_bytes(bytes), "ckpt");
  for (int axis : {0, 1}) {
    CAPTURE(axis);
    CHECK(same(load_s8_weight(f, "f32", axis), quantize_s8_per_channel(w, 5, 7, axis)));
    CHECK(same(load_s8_weight(f, "bf16", axis), quantize_s8_per_channel(widened, 5, 7, axis)));
  }
}

TEST_CASE("malformed int8 weights are refused with the file, the tensor and the fault") {
  const std::vector<std::int8_t> v = {1, -2, 3, 127, -127, 0};
  const std::vector<std::int8_t> low = {1, -2, 3, -128, 5, 0};
  const std::vector<float> rows = {0.1f, 0.2f}, cols = {0.1f, 0.2f, 0.3f}, neg = {0.1f, -0.2f};
  const std::vector<std::int32_t> i32 = {1, 2, 3, 4, 5, 6}, i32_cols = {1, 2, 3};
  const std::vector<float> f3 = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> inf = {std::numeric_limits<float>::infinity(), 1, 2, 3, 4, 5};
  const std::vector<safetensors_entry> entries = {
      make_safetensors_entry<std::int8_t>("ok", v, {2, 3}),
      make_safetensors_entry<float>("ok_scale", rows, {2, 1}),
      make_safetensors_entry<std::int8_t>("no_scale", v, {2, 3}),
      make_safetensors_entry<std::int8_t>("bad_shape", v, {2, 3}),
      make_safetensors_entry<float>("bad_shape_scale", cols, {3}),
      make_safetensors_entry<std::int8_t>("rank3", v, {1, 2, 3}),
      make_safetensors_entry<std::int8_t>("negative", v, {2, 3}),
      make_safetensors_entry<float>("negative_scale", neg, {2, 1}),
      make_safetensors_entry<std::int8_t>("int_scale", v, {2, 3}),
      make_safetensors_entry<std::int32_t>("int_scale_scale", i32_cols, {1, 3}),
      make_safetensors_entry<std::int8_t>("low", low, {2, 3}),
      make_safetensors_entry<float>("low_scale", cols, {1, 3}),
      make_safetensors_entry<std::int32_t>("ints", i32, {2, 3}),
      make_safetensors_entry<float>("cube", f3, {2, 2, 2}),
      make_safetensors_entry<float>("has_inf", inf, {2, 3})};
  const std::string bytes = serialize_safetensors(entries);
  const safetensors_file f = safetensors_file::parse(test::as_bytes(bytes), "q.safetensors");
  const std::string at = "safetensors: q.safetensors: int8 weight ";
  CHECK(read_s8_weight(f, "ok").channel_axis == 0);
  CHECK(error_of([&] { read_s8_weight(f, "no_scale"); }) ==
        at + "'no_scale' has no scales: the file lacks 'no_scale_scale'");
  CHECK(error_of([&] { read_s8_weight(f, "bad_shape"); }) ==
        at + "'bad_shape' is [2,3] but 'bad_shape_scale' is not shaped [2,1] (channels along "
             "axis 0) or [1,3] (along axis 1)");
  CHECK(error_of([&] { read_s8_weight(f, "rank3"); }) ==
        at + "'rank3' is I8 of rank 3; an int8 weight is a 2-D I8 tensor");
  CHECK(error_of([&] { read_s8_weight(f, "negative"); }) ==
        at + "'negative' does not hold: quantized weight 'negative': the scale of channel 1 is "
             "-0.200000; scales are finite and not negative");
  CHECK(error_of([&] { read_s8_weight(f, "int_scale"); }) ==
        at + "'int_scale' has scales of dtype I32; scales are F32, F16 or BF16");
  CHECK(error_of([&] { read_s8_weight(f, "low"); }) ==
        at + "'low' does not hold: quantized weight 'low': element [1,0] is -128; symmetric int8 "
             "weights lie in [-127, 127]");
  CHECK(error_of([&] { load_s8_weight(f, "ints", 0); }) ==
        "safetensors: q.safetensors: weight 'ints' is I32 of rank 2; quantizing takes a 2-D F32, "
        "F16 or BF16 tensor, or reads I8");
  CHECK(error_of([&] { load_s8_weight(f, "cube", 0); }) ==
        "safetensors: q.safetensors: weight 'cube' is F32 of rank 3; quantizing takes a 2-D F32, "
        "F16 or BF16 tensor, or reads I8");
  CHECK(error_of([&] { load_s8_weight(f, "has_inf", 1); }) ==
        "quantize 'q.safetensors: has_inf': element [0,0] of channel 0 is inf; a channel with a "
        "non-finite weight has no scale");
  CHECK(error_of([&] { load_s8_weight(f, "absent", 1); }).find("'absent' no such tensor") !=
        std::string::npos);
}
