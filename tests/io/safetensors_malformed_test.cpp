// Malformed safetensors files: each is refused with a safetensors_error naming the file, the
// tensor where there is one, and the problem. One test per way a file can be wrong.
#include <doctest/doctest.h>

#include <string>

#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/io/safetensors_writer.hpp"
#include "safetensors_test_util.hpp"

using namespace fusedsl::io;
using fusedsl::test::as_bytes;
using fusedsl::test::raw_safetensors;
using fusedsl::test::raw_safetensors_with_length;

namespace {

// The error parse() gives for these bytes, or "" when they parse.
std::string error_of(const std::string& bytes) {
  try {
    (void)safetensors_file::parse(as_bytes(bytes), "bad.safetensors");
  } catch (const safetensors_error& e) {
    return e.what();
  }
  return "";
}

// A header with one F32 tensor "w" whose entry is `entry`, and `data` after it.
std::string one_tensor(const std::string& entry, const std::string& data) {
  return raw_safetensors("{\"w\":" + entry + "}", data);
}

const std::string eight(8, '\x01');

// The error for tensor "w" given as {"dtype": dtype, "shape": shape, "data_offsets": offsets}
// (JSON texts) over 8 data bytes.
std::string entry_error(const std::string& dtype, const std::string& shape,
                        const std::string& offsets) {
  return error_of(one_tensor(
      "{\"dtype\":" + dtype + ",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}", eight));
}

bool has(const std::string& error, const std::string& part) {
  return error.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("the well-formed base case of these tests parses") {
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", eight)) == "");
  CHECK(error_of(raw_safetensors("{}")) == "");
  CHECK(error_of(raw_safetensors("{}      ")) == "");  // trailing spaces pad the header
}

TEST_CASE("a file shorter than the 8-byte length is refused") {
  CHECK(error_of(std::string("\x02\x00\x00", 3)) ==
        "safetensors: bad.safetensors: file is 3 bytes, shorter than the 8-byte header length");
}

TEST_CASE("a header length past the end of the file is refused (truncated header)") {
  CHECK(error_of(raw_safetensors_with_length(40, "{}", "")) ==
        "safetensors: bad.safetensors: header length 40 runs past the end of the file (2 bytes "
        "follow the length; truncated file?)");
  // The largest length there is must not wrap any offset arithmetic.
  CHECK(error_of(raw_safetensors_with_length(~0ULL, "{}", "")).find("exceeds the limit") !=
        std::string::npos);
}

TEST_CASE("a header length over the 100 MB limit is refused before anything is read") {
  CHECK(error_of(raw_safetensors_with_length(100'000'001, "{}", "")) ==
        "safetensors: bad.safetensors: header length 100000001 exceeds the limit of 100000000 "
        "bytes");
}

TEST_CASE("a header that does not begin with '{' is refused") {
  CHECK(error_of(raw_safetensors(" {}")).find("header does not begin with '{'") !=
        std::string::npos);
  CHECK(error_of(raw_safetensors("[]")).find("header does not begin with '{'") !=
        std::string::npos);
  CHECK(error_of(raw_safetensors("")).find("header does not begin with '{'") != std::string::npos);
}

TEST_CASE("a header that is not valid JSON is refused with the byte offset") {
  const std::string e = error_of(raw_safetensors(R"({"w": {"dtype": "F32",})"));
  CHECK(e.find("bad header: invalid JSON at byte") != std::string::npos);
}

TEST_CASE("text after the header's JSON object is refused") {
  CHECK(error_of(raw_safetensors("{} x")).find("invalid JSON") != std::string::npos);
  CHECK(error_of(raw_safetensors("{}{}")).find("invalid JSON") != std::string::npos);
}

TEST_CASE("invalid UTF-8 in the header is refused") {
  CHECK(error_of(raw_safetensors("{\"\xff\":1}")).find("invalid JSON") != std::string::npos);
}

TEST_CASE("a tensor named twice is refused") {
  const std::string entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  CHECK(error_of(raw_safetensors("{\"w\":" + entry + ",\"w\":" + entry + "}", eight)) ==
        "safetensors: bad.safetensors: bad header: duplicate key \"w\"");
}

TEST_CASE("a key given twice inside a tensor entry is refused") {
  CHECK(error_of(
            one_tensor(R"({"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]})", eight))
            .find("duplicate key \"dtype\"") != std::string::npos);
}

TEST_CASE("nesting deeper than a header's three levels is refused") {
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":[[2]],"data_offsets":[0,8]})", eight))
            .find("nested deeper than a safetensors header (3 levels)") != std::string::npos);
  CHECK(error_of(raw_safetensors("{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + "}"))
            .find("nested deeper") != std::string::npos);
}

TEST_CASE("a tensor entry that is not an object is refused") {
  CHECK(error_of(one_tensor("[1,2]", "")) ==
        "safetensors: bad.safetensors: tensor 'w' is not an object");
}

TEST_CASE("a tensor entry without dtype, shape or data_offsets is refused") {
  CHECK(error_of(one_tensor(R"({"shape":[2],"data_offsets":[0,8]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has no \"dtype\"");
  CHECK(error_of(one_tensor(R"({"dtype":"F32","data_offsets":[0,8]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has no \"shape\"");
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":[2]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has no \"data_offsets\"");
}

TEST_CASE("a dtype that is not a string or not a safetensors type is refused") {
  CHECK(error_of(one_tensor(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has a dtype that is not a string");
  CHECK(error_of(one_tensor(R"({"dtype":"float32","shape":[2],"data_offsets":[0,8]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has an unsupported dtype \"float32\"");
}

TEST_CASE("a shape that is not an array is refused") {
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has a shape that is not an array");
}

TEST_CASE("a negative, fractional or non-numeric dimension is refused") {
  for (const char* dim : {"-2", "2.0", "2e0", "\"2\"", "null", "true"}) {
    CAPTURE(dim);
    const std::string e = entry_error("\"F32\"", std::string("[") + dim + "]", "[0,8]");
    CHECK(has(e, "tensor 'w' has a shape entry"));
    CHECK(has(e, "that is not a non-negative integer"));
  }
}

TEST_CASE("a dimension beyond int64 or a shape whose element count overflows is refused") {
  CHECK(has(entry_error("\"F32\"", "[9223372036854775808]", "[0,8]"),
            "element count overflows 64 bits"));
  CHECK(has(entry_error("\"F32\"", "[4294967296,4294967296]", "[0,8]"),
            "element count overflows 64 bits"));
  // The element count fits, its byte size does not.
  CHECK(
      has(entry_error("\"F64\"", "[2305843009213693952]", "[0,8]"), "byte size overflows 64 bits"));
  // Beyond u64 altogether: nlohmann reads it as a float, which no shape entry may be.
  CHECK(
      has(entry_error("\"F32\"", "[99999999999999999999]", "[0,8]"), "not a non-negative integer"));
}

TEST_CASE("data_offsets that are not a pair of non-negative integers are refused") {
  for (const char* offs : {"[0]", "[0,8,8]", "8", "{}"}) {
    CAPTURE(offs);
    CHECK(has(entry_error("\"F32\"", "[2]", offs),
              "has data_offsets that are not a pair [begin, end]"));
  }
  for (const char* offs : {"[-1,8]", "[0,8.5]", "[\"0\",8]"}) {
    CAPTURE(offs);
    CHECK(has(entry_error("\"F32\"", "[2]", offs), "that are not non-negative integers"));
  }
}

TEST_CASE("data_offsets with begin after end are refused") {
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has data_offsets [8, 0] with begin after end");
}

TEST_CASE("data_offsets past the data region are refused (truncated data)") {
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has data_offsets [0, 16] past the end of the "
        "8-byte data region (truncated file?)");
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":)"
                            R"([18446744073709551615,18446744073709551615]})",
                            eight))
            .find("past the end") != std::string::npos);
}

TEST_CASE("a byte span that is not product(shape) * dtype size is refused") {
  CHECK(error_of(one_tensor(R"({"dtype":"F16","shape":[2],"data_offsets":[0,8]})", eight)) ==
        "safetensors: bad.safetensors: tensor 'w' has data_offsets [0, 8] spanning 8 bytes, but "
        "its shape and dtype F16 need 4");
}

TEST_CASE("overlapping tensors are refused") {
  const std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  CHECK(error_of(raw_safetensors(h, eight)) ==
        "safetensors: bad.safetensors: tensor 'b' overlaps tensor 'a' (bytes 4 to 8)");
  // Two names for the same bytes overlap too.
  const std::string same = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(error_of(raw_safetensors(same, eight)).find("overlaps tensor") != std::string::npos);
}

TEST_CASE("a hole in the data region is refused") {
  const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})";
  CHECK(error_of(raw_safetensors(h, eight)) ==
        "safetensors: bad.safetensors: bytes 4 to 6 of the data region belong to no tensor (a hole "
        "before 'b')");
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})", eight))
            .find("bytes 0 to 4 of the data region belong to no tensor") != std::string::npos);
}

TEST_CASE("bytes after the last tensor are refused") {
  CHECK(error_of(one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", eight)) ==
        "safetensors: bad.safetensors: bytes 4 to 8 of the data region belong to no tensor "
        "(trailing bytes)");
  CHECK(error_of(raw_safetensors("{}", "x")).find("trailing bytes") != std::string::npos);
}

TEST_CASE("__metadata__ that is not an object of strings is refused") {
  CHECK(error_of(raw_safetensors(R"({"__metadata__":["pt"]})")) ==
        "safetensors: bad.safetensors: __metadata__ is not an object");
  CHECK(error_of(raw_safetensors(R"({"__metadata__":{"format":1}})")) ==
        "safetensors: bad.safetensors: __metadata__ value for \"format\" is not a string");
}

TEST_CASE("a file cut short anywhere is refused, never read past its end") {
  const std::vector<float> w = {1, 2, 3, 4, 5};
  const std::vector<safetensors_entry> entries = {make_safetensors_entry<float>("w", w, {5})};
  const std::string good = serialize_safetensors(entries);
  REQUIRE(error_of(good) == "");
  for (std::size_t n = 0; n < good.size(); ++n) {
    CAPTURE(n);
    CHECK(error_of(good.substr(0, n)) != "");
  }
}
