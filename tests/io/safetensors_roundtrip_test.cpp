// safetensors writer and reader: what is written reads back (names, dtypes, shapes, bytes,
// metadata) through the memory map, views are zero-copy, and f16/bf16 widen exactly to f32.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/io/safetensors_writer.hpp"
#include "safetensors_test_util.hpp"

using namespace fusedsl;
using namespace fusedsl::io;
using fusedsl::test::scratch_file;

namespace {

bool message_has(const std::exception& e, const std::string& part) {
  return std::string(e.what()).find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a written file reads back with the same names, dtypes, shapes and bytes") {
  const std::vector<float> w = {0.5f, -1.0f, 2.25f, 3.0f, -0.0f, 1e-30f};
  const std::vector<std::int64_t> ids = {1, -2, std::numeric_limits<std::int64_t>::max()};
  const std::vector<std::int32_t> small = {7, 8, 9, 10};
  const std::vector<std::uint8_t> raw = {0, 255, 17};
  const std::vector<double> scalar = {3.5};
  const std::vector<float> none;
  const std::vector<safetensors_entry> entries = {
      make_safetensors_entry<float>("layer.w", w, {2, 3}),
      make_safetensors_entry<std::int64_t>("ids", ids, {3}),
      make_safetensors_entry<std::int32_t>("a.small", small, {2, 1, 2}),
      make_safetensors_entry<std::uint8_t>("raw", raw, {3}),
      make_safetensors_entry<double>("scalar", scalar, {}),
      make_safetensors_entry<float>("empty", none, {0, 4}),
  };
  scratch_file file("roundtrip");
  write_safetensors(file.path(), entries, {{"format", "pt"}, {"note", "x \"quoted\" y"}});

  const safetensors_file f = safetensors_file::open(file.path());
  CHECK(f.label() == file.path().string());
  REQUIRE(f.tensors().size() == entries.size());
  std::vector<std::string> names;
  for (const safetensors_tensor& t : f.tensors()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"a.small", "empty", "ids", "layer.w", "raw", "scalar"});
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.metadata().at("note") == "x \"quoted\" y");

  for (const safetensors_entry& e : entries) {
    CAPTURE(e.name);
    const safetensors_tensor& t = f.tensor(e.name);
    CHECK(t.dtype == e.dtype);
    CHECK(t.shape == e.shape);
    CHECK(t.byte_size() == e.bytes.size());
    const safetensors_view v = f.view(e.name);
    REQUIRE(v.bytes.size() == e.bytes.size());
    CHECK(std::equal(v.bytes.begin(), v.bytes.end(), e.bytes.begin()));
  }
  CHECK(f.tensor("scalar").shape.empty());
  CHECK(f.tensor("scalar").element_count() == 1);
  CHECK(f.tensor("empty").element_count() == 0);
  CHECK(f.to_f32("layer.w") == w);
  CHECK(f.to_f32("empty").empty());
}

TEST_CASE("the writer aligns the data region to 8 bytes and packs tensors without holes") {
  const std::vector<std::uint8_t> three = {1, 2, 3};
  const std::vector<float> two = {1, 2};
  const std::vector<safetensors_entry> entries = {
      make_safetensors_entry<std::uint8_t>("a", three, {3}),
      make_safetensors_entry<float>("b", two, {2})};
  const std::string bytes = serialize_safetensors(entries);
  const safetensors_file f = safetensors_file::parse(test::as_bytes(bytes), "mem");
  CHECK(f.header_bytes() % 8 == 0);
  CHECK(bytes.size() == 8 + f.header_bytes() + 3 + 8);
  CHECK(f.tensor("a").begin == 0);
  CHECK(f.tensor("a").end == 3);
  CHECK(f.tensor("b").begin == 3);
  CHECK(f.tensor("b").end == 11);
  // "b" starts 3 bytes into an 8-aligned region: a typed view refuses it, a copy works.
  CHECK_THROWS_WITH_AS(f.view("b").as<float>(), doctest::Contains("not aligned to 4 bytes"),
                       safetensors_error);
  CHECK(f.to_f32("b") == two);
}

TEST_CASE("a typed view points into the mapping, and a wrong type is an error") {
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<safetensors_entry> entries = {make_safetensors_entry<float>("w", w, {4})};
  scratch_file file("view");
  write_safetensors(file.path(), entries);
  safetensors_file f = safetensors_file::open(file.path());
  const std::span<const float> s = f.view("w").as<float>();
  CHECK(std::vector<float>(s.begin(), s.end()) == w);
  CHECK(reinterpret_cast<const std::byte*>(s.data()) == f.data().data());
  CHECK_THROWS_WITH_AS(f.view("w").as<std::int32_t>(), doctest::Contains("is F32, not I32"),
                       safetensors_error);
  // A moved file keeps its mapping at one address.
  const safetensors_file g = std::move(f);
  CHECK(g.view("w").as<float>().data() == s.data());
}

TEST_CASE("to_f32 widens f16 and bf16 exactly, with the rounding of core/dtype.hpp") {
  const std::array<float, 7> src = {
      1.0f / 3, -2.5f, 65504.0f, 6.0e-8f, -0.0f, std::numeric_limits<float>::infinity(), 1e-3f};
  std::vector<f16> h;
  std::vector<bf16> b;
  for (float x : src) {
    h.push_back(f16(x));
    b.push_back(bf16(x));
  }
  const std::vector<safetensors_entry> entries = {
      make_safetensors_entry<f16>("h", std::span<const f16>(h), {7}),
      make_safetensors_entry<bf16>("b", std::span<const bf16>(b), {7})};
  const std::string bytes = serialize_safetensors(entries);
  const safetensors_file f = safetensors_file::parse(test::as_bytes(bytes), "mem");
  CHECK(f.tensor("h").dtype == safetensors_dtype::f16);
  CHECK(f.tensor("b").dtype == safetensors_dtype::bf16);
  const std::vector<float> hf = f.to_f32("h"), bf = f.to_f32("b");
  for (std::size_t i = 0; i < src.size(); ++i) {
    CAPTURE(i);
    CHECK(std::bit_cast<std::uint32_t>(hf[i]) == std::bit_cast<std::uint32_t>(float(h[i])));
    CHECK(std::bit_cast<std::uint32_t>(bf[i]) == std::bit_cast<std::uint32_t>(float(b[i])));
  }
  CHECK(hf[2] == 65504.0f);
  CHECK(std::signbit(hf[4]));
  CHECK(std::isinf(bf[5]));
}

TEST_CASE("to_f32 refuses integer tensors and an output of the wrong size") {
  const std::vector<std::int64_t> ids = {1, 2};
  const std::vector<float> w = {1, 2};
  const std::vector<safetensors_entry> entries = {
      make_safetensors_entry<std::int64_t>("ids", ids, {2}),
      make_safetensors_entry<float>("w", w, {2})};
  const std::string bytes = serialize_safetensors(entries);
  const safetensors_file f = safetensors_file::parse(test::as_bytes(bytes), "weights.bin");
  CHECK_THROWS_WITH_AS(f.to_f32("ids"),
                       "safetensors: weights.bin: tensor 'ids' is I64; reading as f32 takes F32, "
                       "F16 or BF16",
                       safetensors_error);
  std::array<float, 3> out{};
  CHECK_THROWS_WITH_AS(f.copy_to_f32("w", out), doctest::Contains("has 2 elements, the output 3"),
                       safetensors_error);
}

TEST_CASE("a missing tensor is an error naming the file and the tensor") {
  const std::string bytes = serialize_safetensors({});
  const safetensors_file f = safetensors_file::parse(test::as_bytes(bytes), "empty.safetensors");
  CHECK(f.tensors().empty());
  CHECK_FALSE(f.contains("x"));
  CHECK_THROWS_WITH_AS(f.tensor("x"),
                       "safetensors: empty.safetensors: tensor 'x' no such tensor (the file has 0)",
                       safetensors_error);
}

TEST_CASE("opening a missing file or a directory is a safetensors_error naming the path") {
  try {
    (void)safetensors_file::open("/nonexistent/dir/model.safetensors");
    FAIL("expected an error");
  } catch (const safetensors_error& e) {
    CHECK(message_has(e, "/nonexistent/dir/model.safetensors"));
    CHECK(message_has(e, "No such file"));
  }
  CHECK_THROWS_WITH_AS(safetensors_file::open(std::filesystem::temp_directory_path()),
                       doctest::Contains("is not a regular file"), safetensors_error);
  scratch_file empty("empty");
  empty.write("");
  CHECK_THROWS_WITH_AS(safetensors_file::open(empty.path()),
                       doctest::Contains("file is 0 bytes, shorter than the 8-byte header length"),
                       safetensors_error);
}

TEST_CASE("the writer refuses duplicate names, a reserved name, wrong byte counts and bad dims") {
  const std::vector<float> w = {1, 2};
  const auto refuses = [](std::vector<safetensors_entry> e, const char* why) {
    CHECK_THROWS_WITH_AS(serialize_safetensors(e), doctest::Contains(why), safetensors_error);
  };
  refuses({make_safetensors_entry<float>("w", w, {2}), make_safetensors_entry<float>("w", w, {2})},
          "tensor 'w' is given twice");
  refuses({make_safetensors_entry<float>("__metadata__", w, {2})}, "'__metadata__' is reserved");
  refuses({make_safetensors_entry<float>("w", w, {3})}, "has 8 bytes for 3 elements of F32");
  refuses({make_safetensors_entry<float>("w", w, {-2})}, "negative dimension -2");
  refuses({make_safetensors_entry<float>("w", w, {1LL << 40, 1LL << 40})},
          "element count that overflows 64 bits");
}

TEST_CASE("every dtype has its header name and size, and names map back") {
  for (safetensors_dtype t : all_safetensors_dtypes) {
    CAPTURE(name_of(t));
    CHECK(safetensors_dtype_named(name_of(t)) == t);
    CHECK(size_of(t) >= 1);
  }
  CHECK(size_of(safetensors_dtype::bf16) == 2);
  CHECK(size_of(safetensors_dtype::i64) == 8);
  CHECK(name_of(safetensors_dtype::boolean) == "BOOL");
  CHECK_FALSE(safetensors_dtype_named("F4").has_value());
  CHECK(to_dtype(safetensors_dtype::bf16) == dtype::bf16);
  CHECK_FALSE(to_dtype(safetensors_dtype::i64).has_value());
}
