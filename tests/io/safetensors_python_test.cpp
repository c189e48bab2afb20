// A file written by Python's safetensors package (tests/io/data/make_python_safetensors.py): every
// tensor, dtype, shape, value and the metadata read back as Python wrote them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../common/test_paths.hpp"
#include "fusedsl/io/safetensors.hpp"

using namespace fusedsl;
using namespace fusedsl::io;

namespace {

const std::string path =
    fusedsl::test::test_path(FUSEDSL_IO_TEST_DATA) + "/python_tiny.safetensors";

// i * 0.25 - 1, the script's ramp.
std::vector<float> ramp(int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>(i) * 0.25f - 1.0f);
  return v;
}

template <class T>
std::vector<T> values(const safetensors_file& f, const char* name) {
  const std::span<const T> s = f.view(name).as<T>();
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("every tensor of the Python-written file is listed with its dtype and shape") {
  const safetensors_file f = safetensors_file::open(path);
  struct expect {
    const char* name;
    safetensors_dtype dtype;
    std::vector<std::int64_t> shape;
  };
  const std::vector<expect> want = {
      {"bf16.ramp", safetensors_dtype::bf16, {3, 2}},
      {"bf16.rounded", safetensors_dtype::bf16, {6}},
      {"bytes.u8", safetensors_dtype::u8, {4}},
      {"empty", safetensors_dtype::f32, {0, 3}},
      {"encoder.layer.0.bias", safetensors_dtype::f32, {4}},
      {"encoder.layer.0.weight", safetensors_dtype::f32, {3, 4}},
      {"f16.ramp", safetensors_dtype::f16, {2, 2, 2}},
      {"f16.rounded", safetensors_dtype::f16, {6}},
      {"ids.i32", safetensors_dtype::i32, {2, 2}},
      {"ids.i64", safetensors_dtype::i64, {4}},
      {"mask.bool", safetensors_dtype::boolean, {3}},
      {"scalar", safetensors_dtype::f32, {}},
  };
  REQUIRE(f.tensors().size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(want[i].name);
    CHECK(f.tensors()[i].name == want[i].name);
    CHECK(f.tensors()[i].dtype == want[i].dtype);
    CHECK(f.tensors()[i].shape == want[i].shape);
  }
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.metadata().at("writer").rfind("safetensors ", 0) == 0);
}

TEST_CASE("the Python-written values read back: f32 as is, f16 and bf16 widened, integers raw") {
  const safetensors_file f = safetensors_file::open(path);
  CHECK(f.to_f32("encoder.layer.0.weight") == ramp(12));
  CHECK(f.to_f32("encoder.layer.0.bias") == ramp(4));
  CHECK(f.to_f32("f16.ramp") == ramp(8));
  CHECK(f.to_f32("bf16.ramp") == ramp(6));
  CHECK(f.to_f32("scalar") == std::vector<float>{2.5f});
  CHECK(f.to_f32("empty").empty());

  // torch rounded 1/3, -2/3, 65504, 1e-7, -0, inf to nearest-even, as core/dtype.hpp does.
  const std::vector<float> src = {1.0f / 3, -2.0f / 3, 65504.0f,
                                  1e-7f,    -0.0f,     std::numeric_limits<float>::infinity()};
  const std::vector<float> h = f.to_f32("f16.rounded"), b = f.to_f32("bf16.rounded");
  REQUIRE(h.size() == src.size());
  REQUIRE(b.size() == src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    CAPTURE(i);
    CHECK(std::bit_cast<std::uint32_t>(h[i]) == std::bit_cast<std::uint32_t>(float(f16(src[i]))));
    CHECK(std::bit_cast<std::uint32_t>(b[i]) == std::bit_cast<std::uint32_t>(float(bf16(src[i]))));
  }
  CHECK(h[0] == 0.333251953125f);
  CHECK(b[2] == 65536.0f);

  CHECK(values<std::int64_t>(f, "ids.i64") ==
        std::vector<std::int64_t>{0, -1, 1LL << 40, -(1LL << 62)});
  CHECK(values<std::int32_t>(f, "ids.i32") == std::vector<std::int32_t>{7, -8, 9, 2147483647});
  CHECK(values<std::uint8_t>(f, "bytes.u8") == std::vector<std::uint8_t>{0, 1, 128, 255});
  const safetensors_view mask = f.view("mask.bool");
  REQUIRE(mask.bytes.size() == 3);
  CHECK(std::to_integer<int>(mask.bytes[0]) == 1);
  CHECK(std::to_integer<int>(mask.bytes[1]) == 0);
  CHECK(std::to_integer<int>(mask.bytes[2]) == 1);
}
