// .npy reader and writer: byte-identical to numpy.save's output, and clear errors on bad bytes.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <string>

#include "fusedsl/io/npy.hpp"

using namespace fusedsl::io;

namespace {
// numpy.save(np.arange(6, dtype=np.float32).reshape(2, 3)) header, from numpy 2 (version 1.0).
const std::string numpy_f32_header = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                                     "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                                     std::string(58, ' ') + "\n";
}  // namespace

TEST_CASE("write_npy produces exactly numpy.save's bytes for a float32 matrix") {
  const std::array<float, 6> v = {0, 1, 2, 3, 4, 5};
  const std::array<std::int64_t, 2> shape = {2, 3};
  const std::string bytes = serialize_npy<float>(v, shape);
  REQUIRE(bytes.size() == 128 + 24);
  CHECK(bytes.substr(0, 128) == numpy_f32_header);
  npy_array a = parse_npy(bytes);
  CHECK(a.dtype == npy_dtype::f4);
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK(a.values<float>() == std::vector<float>(v.begin(), v.end()));
}

TEST_CASE("scalars, 1-d arrays, bools and int64 round-trip; header tuples match numpy's spelling") {
  const std::array<std::int64_t, 0> scalar{};
  const std::array<std::int64_t, 1> two = {2};
  const std::array<std::int64_t, 1> seven = {7};
  std::string s = serialize_npy<std::int64_t>(seven, scalar);
  CHECK(s.find("'shape': (), }") != std::string::npos);
  CHECK(parse_npy(s).values<std::int64_t>() == std::vector<std::int64_t>{7});
  const std::array<bool, 2> b = {true, false};
  std::string sb = serialize_npy<bool>(b, two);
  CHECK(sb.find("'descr': '|b1', 'fortran_order': False, 'shape': (2,), }") != std::string::npos);
  CHECK(parse_npy(sb).as_doubles() == std::vector<double>{1, 0});
  CHECK_THROWS_AS(parse_npy(sb).values<float>(), npy_error);
}

TEST_CASE("version 2.0 files and float16 data are read") {
  std::string header = "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }";
  header += std::string(64 - (12 + header.size() + 1) % 64, ' ') + "\n";
  std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
  bytes += static_cast<char>(header.size());
  bytes += std::string(3, '\0');
  bytes += header;
  bytes += std::string("\x00\x3e", 2);  // 1.5 in binary16
  npy_array a = parse_npy(bytes);
  CHECK(a.as_doubles() == std::vector<double>{1.5});
}

TEST_CASE("malformed .npy bytes give npy_error naming the problem") {
  const std::array<float, 6> v = {0, 1, 2, 3, 4, 5};
  const std::array<std::int64_t, 2> shape = {2, 3};
  const std::string good = serialize_npy<float>(v, shape);
  CHECK_THROWS_WITH_AS(parse_npy("hello"), "npy: not an .npy file (bad magic)", npy_error);
  CHECK_THROWS_WITH_AS(parse_npy(good.substr(0, good.size() - 1)),
                       "npy: data is 23 bytes, shape and dtype need 6 x 4", npy_error);
  std::string v9 = good;
  v9[6] = 9;
  CHECK_THROWS_WITH_AS(parse_npy(v9), "npy: unsupported format version 9", npy_error);
  std::string long_header = good;
  long_header[9] = '\x7f';
  CHECK_THROWS_AS(parse_npy(long_header), npy_error);
  std::string u8 = good;
  u8.replace(u8.find("<f4"), 3, "|u1");
  CHECK_THROWS_WITH_AS(parse_npy(u8),
                       "npy: bad header at offset 15: unsupported dtype '|u1' (supported: |b1, "
                       "<i4, <i8, <f2, <f4, <f8)",
                       npy_error);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  CHECK_THROWS_WITH_AS(parse_npy(fortran), "npy: fortran_order arrays are not supported",
                       npy_error);
  std::string huge = good;
  huge.replace(huge.find("(2, 3)"), 6, "(99999999999, 99999999999)");
  CHECK_THROWS_AS(parse_npy(huge), npy_error);
  CHECK_THROWS_WITH_AS(read_npy("/nonexistent/x.npy"), "npy: cannot open /nonexistent/x.npy",
                       npy_error);
  const std::array<float, 1> one = {1};
  CHECK_THROWS_AS(serialize_npy<float>(one, shape), npy_error);
}
