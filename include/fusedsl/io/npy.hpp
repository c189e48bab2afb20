#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0, little-endian, C order), as specified in
// numpy/lib/format.py ("A Simple File Format for NumPy Arrays", NEP 1). The reader checks every
// field and size before it trusts it, so malformed bytes give an npy_error naming the problem,
// never undefined behaviour.

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fusedsl/io/read_file.hpp"

namespace fusedsl::io {

class npy_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The array types read and written: bool, signed integers and IEEE floats, little-endian.
enum class npy_dtype : std::uint8_t { b1, i4, i8, f2, f4, f8 };

constexpr std::string_view npy_descr(npy_dtype t) {
  switch (t) {
    case npy_dtype::b1:
      return "|b1";
    case npy_dtype::i4:
      return "<i4";
    case npy_dtype::i8:
      return "<i8";
    case npy_dtype::f2:
      return "<f2";
    case npy_dtype::f4:
      return "<f4";
    case npy_dtype::f8:
      return "<f8";
  }
  return "?";
}
constexpr std::size_t npy_item_size(npy_dtype t) {
  switch (t) {
    case npy_dtype::b1:
      return 1;
    case npy_dtype::f2:
      return 2;
    case npy_dtype::i4:
    case npy_dtype::f4:
      return 4;
    case npy_dtype::i8:
    case npy_dtype::f8:
      return 8;
  }
  return 0;
}

template <class T>
constexpr npy_dtype npy_dtype_of() {
  if constexpr (std::is_same_v<T, bool>)
    return npy_dtype::b1;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return npy_dtype::i4;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return npy_dtype::i8;
  else if constexpr (std::is_same_v<T, float>)
    return npy_dtype::f4;
  else if constexpr (std::is_same_v<T, double>)
    return npy_dtype::f8;
  else
    static_assert(sizeof(T) == 0,
                  "npy: element type has no .npy dtype (bool, int32, int64, float, double)");
}

struct npy_array {
  npy_dtype dtype = npy_dtype::f4;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;  // C order, little-endian

  std::int64_t element_count() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
  // The elements as T; T must be the stored type.
  template <class T>
  std::vector<T> values() const {
    if (npy_dtype_of<T>() != dtype)
      throw npy_error("npy: array holds " + std::string(npy_descr(dtype)) + ", not " +
                      std::string(npy_descr(npy_dtype_of<T>())));
    std::vector<T> out(data.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
    return out;
  }
  // Any float or integer array as doubles (f2 decoded from IEEE binary16).
  std::vector<double> as_doubles() const;
};

static_assert(std::endian::native == std::endian::little,
              "npy: only little-endian hosts are supported");

namespace detail {

inline double half_to_double(std::uint16_t h) {
  int exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v = exp == 0    ? std::ldexp(frac, -24)
             : exp == 31 ? (frac ? std::numeric_limits<double>::quiet_NaN()
                                 : std::numeric_limits<double>::infinity())
                         : std::ldexp(frac + 1024, exp - 25);
  return (h & 0x8000) ? -v : v;
}

// Reads the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class header_reader {
 public:
  explicit header_reader(std::string_view s) : s_(s) {}

  void parse(npy_array& a) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (accept('}')) break;
      std::string key = read_quoted();
      expect(':');
      if (key == "descr") {
        std::string d = read_quoted();
        a.dtype = dtype_from(d);
        have_descr = true;
      } else if (key == "fortran_order") {
        skip_space();
        if (take("False")) {
        } else if (take("True")) {
          throw npy_error("npy: fortran_order arrays are not supported");
        } else {
          fail("expected True or False for fortran_order");
        }
        have_order = true;
      } else if (key == "shape") {
        a.shape = read_shape();
        have_shape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      skip_space();
      if (accept('}')) break;
      expect(',');
    }
    if (!have_descr || !have_order || !have_shape)
      fail("header must have 'descr', 'fortran_order' and 'shape'");
    skip_space();
    if (i_ != s_.size()) fail("unexpected text after the header dict");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw npy_error("npy: bad header at offset " + std::to_string(i_) + ": " + what);
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool accept(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  bool take(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  std::string read_quoted() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a quoted string");
    char q = s_[i_++];
    std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) ++i_;
    if (i_ >= s_.size()) fail("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  std::vector<std::int64_t> read_shape() {
    expect('(');
    std::vector<std::int64_t> shape;
    std::int64_t count = 1;
    for (;;) {
      skip_space();
      if (accept(')')) break;
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') fail("expected a dimension");
      std::int64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
      if (v != 0 && count > std::numeric_limits<std::int64_t>::max() / v)
        fail("element count overflows");
      count *= v;
      shape.push_back(v);
      if (shape.size() > 64) fail("more than 64 dimensions");
      skip_space();
      if (accept(')')) break;
      expect(',');
    }
    return shape;
  }
  npy_dtype dtype_from(const std::string& d) const {
    for (npy_dtype t :
         {npy_dtype::b1, npy_dtype::i4, npy_dtype::i8, npy_dtype::f2, npy_dtype::f4, npy_dtype::f8})
      if (npy_descr(t) == d) return t;
    fail("unsupported dtype '" + d + "' (supported: |b1, <i4, <i8, <f2, <f4, <f8)");
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace detail

inline std::vector<double> npy_array::as_doubles() const {
  std::vector<double> out;
  const std::size_t n = data.size() / npy_item_size(dtype);
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::byte* p = data.data() + i * npy_item_size(dtype);
    switch (dtype) {
      case npy_dtype::b1:
        out.push_back(static_cast<double>(*p != std::byte{0}));
        break;
      case npy_dtype::i4: {
        std::int32_t v;
        std::memcpy(&v, p, 4);
        out.push_back(v);
        break;
      }
      case npy_dtype::i8: {
        std::int64_t v;
        std::memcpy(&v, p, 8);
        out.push_back(static_cast<double>(v));
        break;
      }
      case npy_dtype::f2: {
        std::uint16_t v;
        std::memcpy(&v, p, 2);
        out.push_back(detail::half_to_double(v));
        break;
      }
      case npy_dtype::f4: {
        float v;
        std::memcpy(&v, p, 4);
        out.push_back(v);
        break;
      }
      case npy_dtype::f8: {
        double v;
        std::memcpy(&v, p, 8);
        out.push_back(v);
        break;
      }
    }
  }
  return out;
}

// Parses the bytes of a whole .npy file.
inline npy_array parse_npy(std::string_view bytes) {
  static constexpr std::string_view magic = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.substr(0, 6) != magic)
    throw npy_error("npy: not an .npy file (bad magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0, offset = 0;
  auto byte = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned char>(bytes[i]));
  };
  if (major == 1) {
    header_len = byte(8) | byte(9) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw npy_error("npy: truncated header length");
    header_len = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    offset = 12;
  } else {
    throw npy_error("npy: unsupported format version " + std::to_string(major));
  }
  if (header_len > bytes.size() - offset)
    throw npy_error("npy: header length " + std::to_string(header_len) + " exceeds the file size");
  npy_array a;
  detail::header_reader(bytes.substr(offset, header_len)).parse(a);
  const std::string_view body = bytes.substr(offset + header_len);
  const auto count = static_cast<std::uint64_t>(a.element_count());
  const std::uint64_t item = npy_item_size(a.dtype);
  if (count > std::numeric_limits<std::uint64_t>::max() / item || count * item != body.size())
    throw npy_error("npy: data is " + std::to_string(body.size()) +
                    " bytes, shape and dtype need " + std::to_string(count) + " x " +
                    std::to_string(item));
  a.data.resize(body.size());
  if (!body.empty()) std::memcpy(a.data.data(), body.data(), body.size());
  return a;
}

inline npy_array read_npy(const std::string& path) {
  const std::optional<std::string> bytes = read_file(path);
  if (!bytes) throw npy_error("npy: cannot open " + path);
  try {
    return parse_npy(*bytes);
  } catch (const npy_error& e) {
    throw npy_error(std::string(e.what()) + " (in " + path + ")");
  }
}

// The bytes of a version 1.0 .npy file (header padded to a multiple of 64 bytes).
inline std::string serialize_npy(npy_dtype dtype, std::span<const std::int64_t> shape,
                                 std::span<const std::byte> data) {
  std::uint64_t count = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw npy_error("npy: negative dimension " + std::to_string(d));
    count *= static_cast<std::uint64_t>(d);
  }
  if (count * npy_item_size(dtype) != data.size())
    throw npy_error("npy: " + std::to_string(data.size()) + " data bytes for " +
                    std::to_string(count) + " elements of " + std::string(npy_descr(dtype)));
  std::string dict =
      "{'descr': '" + std::string(npy_descr(dtype)) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 0xffff) throw npy_error("npy: header too long");
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  return out;
}

template <class T>
std::string serialize_npy(std::span<const T> values, std::span<const std::int64_t> shape) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<std::byte> b(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      b[i] = std::byte{values[i] ? std::uint8_t{1} : std::uint8_t{0}};
    return serialize_npy(npy_dtype::b1, shape, b);
  } else {
    return serialize_npy(npy_dtype_of<T>(), shape, std::as_bytes(values));
  }
}

template <class T>
void write_npy(const std::string& path, std::span<const T> values,
               std::span<const std::int64_t> shape) {
  const std::string bytes = serialize_npy(values, shape);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw npy_error("npy: cannot write " + path);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw npy_error("npy: write failed for " + path);
}

}  // namespace fusedsl::io
