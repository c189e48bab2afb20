#pragma once
// safetensors files (huggingface/safetensors, README "Format"): 8 bytes N, a little-endian u64;
// N bytes of UTF-8 JSON beginning with '{' (trailing spaces allowed), an object mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data
// region, end one past), plus an optional "__metadata__" object of string values; then the data
// region, which the tensors must cover exactly: no holes, no overlaps. Little-endian, C order.
//
// The file is memory-mapped (io/mapped_file.hpp) and nothing is trusted before it is checked: the
// header length against the file, the JSON (strict, no duplicate keys, at most 3 levels deep),
// each field's type, every dimension and offset (no negative or fractional numbers, no integer
// overflow), byte size == product(shape) * dtype size, and the coverage of the data region. Any
// failure is a safetensors_error naming the file, the tensor and the problem.
//
// Needs nlohmann-json (Debian nlohmann-json3-dev). The rest of fusedsl does not: CMake links
// nlohmann_json::nlohmann_json into fusedsl::fusedsl when it is found, and io/safetensors*.hpp
// and text/ are the headers that need it.

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/error.hpp"
#include "fusedsl/io/mapped_file.hpp"

namespace fusedsl::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors: only little-endian hosts are supported");

struct safetensors_error : error {
  using error::error;
};

// The element types the format names. Reading into f32 covers f32, f16 and bf16; the others are
// listed (name, size) and viewed as raw bytes.
enum class safetensors_dtype : std::uint8_t {
  boolean,
  u8,
  i8,
  i16,
  u16,
  i32,
  u32,
  i64,
  u64,
  f16,
  bf16,
  f32,
  f64,
  f8_e4m3,
  f8_e5m2
};

inline constexpr std::array<safetensors_dtype, 15> all_safetensors_dtypes = {
    safetensors_dtype::boolean, safetensors_dtype::u8,      safetensors_dtype::i8,
    safetensors_dtype::i16,     safetensors_dtype::u16,     safetensors_dtype::i32,
    safetensors_dtype::u32,     safetensors_dtype::i64,     safetensors_dtype::u64,
    safetensors_dtype::f16,     safetensors_dtype::bf16,    safetensors_dtype::f32,
    safetensors_dtype::f64,     safetensors_dtype::f8_e4m3, safetensors_dtype::f8_e5m2};

// The header's spelling ("F32", "BF16", "BOOL", ...).
constexpr std::string_view name_of(safetensors_dtype t) {
  switch (t) {
    case safetensors_dtype::boolean:
      return "BOOL";
    case safetensors_dtype::u8:
      return "U8";
    case safetensors_dtype::i8:
      return "I8";
    case safetensors_dtype::i16:
      return "I16";
    case safetensors_dtype::u16:
      return "U16";
    case safetensors_dtype::i32:
      return "I32";
    case safetensors_dtype::u32:
      return "U32";
    case safetensors_dtype::i64:
      return "I64";
    case safetensors_dtype::u64:
      return "U64";
    case safetensors_dtype::f16:
      return "F16";
    case safetensors_dtype::bf16:
      return "BF16";
    case safetensors_dtype::f32:
      return "F32";
    case safetensors_dtype::f64:
      return "F64";
    case safetensors_dtype::f8_e4m3:
      return "F8_E4M3";
    case safetensors_dtype::f8_e5m2:
      return "F8_E5M2";
  }
  return "?";
}

// Bytes per element.
constexpr std::size_t size_of(safetensors_dtype t) {
  switch (t) {
    case safetensors_dtype::boolean:
    case safetensors_dtype::u8:
    case safetensors_dtype::i8:
    case safetensors_dtype::f8_e4m3:
    case safetensors_dtype::f8_e5m2:
      return 1;
    case safetensors_dtype::i16:
    case safetensors_dtype::u16:
    case safetensors_dtype::f16:
    case safetensors_dtype::bf16:
      return 2;
    case safetensors_dtype::i32:
    case safetensors_dtype::u32:
    case safetensors_dtype::f32:
      return 4;
    case safetensors_dtype::i64:
    case safetensors_dtype::u64:
    case safetensors_dtype::f64:
      return 8;
  }
  return 0;
}

constexpr std::optional<safetensors_dtype> safetensors_dtype_named(std::string_view name) {
  for (safetensors_dtype t : all_safetensors_dtypes)
    if (name_of(t) == name) return t;
  return std::nullopt;
}

// The fusedsl element type with the same bits, where there is one.
constexpr std::optional<dtype> to_dtype(safetensors_dtype t) {
  switch (t) {
    case safetensors_dtype::f32:
      return dtype::f32;
    case safetensors_dtype::f16:
      return dtype::f16;
    case safetensors_dtype::bf16:
      return dtype::bf16;
    case safetensors_dtype::i32:
      return dtype::i32;
    case safetensors_dtype::boolean:
      return dtype::boolean;
    case safetensors_dtype::i8:
      return dtype::i8;
    case safetensors_dtype::u8:
      return dtype::u8;
    default:
      return std::nullopt;
  }
}

// Whether to_f32 reads the type (F32 as is, F16 and BF16 widened exactly).
constexpr bool reads_as_f32(safetensors_dtype t) {
  return t == safetensors_dtype::f32 || t == safetensors_dtype::f16 || t == safetensors_dtype::bf16;
}

// One tensor of the header; begin and end are byte offsets into the data region.
struct safetensors_tensor {
  std::string name;
  safetensors_dtype dtype = safetensors_dtype::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;

  std::uint64_t byte_size() const { return end - begin; }
  std::uint64_t element_count() const { return byte_size() / size_of(dtype); }
};

// A tensor's bytes in the mapped file, with its type and shape; valid while the file lives.
struct safetensors_view {
  std::string_view name;
  safetensors_dtype dtype = safetensors_dtype::f32;
  std::span<const std::int64_t> shape;
  std::span<const std::byte> bytes;
  std::string_view file;

  std::size_t element_count() const { return bytes.size() / size_of(dtype); }

  // The elements as T without a copy: T must be the stored type (float for F32, fusedsl::f16 for
  // F16, fusedsl::bf16 for BF16, the fixed-width integers, double for F64) and the bytes aligned
  // for T (writers align the data region to 8 bytes, but the format does not require it).
  template <class T>
  std::span<const T> as() const;
};

namespace detail {

template <class T>
constexpr std::optional<safetensors_dtype> safetensors_dtype_for() {
  if constexpr (std::is_same_v<T, float>)
    return safetensors_dtype::f32;
  else if constexpr (std::is_same_v<T, double>)
    return safetensors_dtype::f64;
  else if constexpr (std::is_same_v<T, f16>)
    return safetensors_dtype::f16;
  else if constexpr (std::is_same_v<T, bf16>)
    return safetensors_dtype::bf16;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return safetensors_dtype::i8;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return safetensors_dtype::u8;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return safetensors_dtype::i16;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return safetensors_dtype::u16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return safetensors_dtype::i32;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return safetensors_dtype::u32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return safetensors_dtype::i64;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return safetensors_dtype::u64;
  else
    return std::nullopt;
}

// Builds a JSON value from nlohmann's SAX events, refusing what a safetensors header can never
// hold before it is stored: duplicate keys in any object, and nesting deeper than the header's
// three levels (header object, tensor entry, shape array). The first problem ends the parse.
class header_builder : public nlohmann::json_sax<nlohmann::json> {
 public:
  using json = nlohmann::json;
  static constexpr std::size_t max_depth = 3;

  json root;
  std::string problem;  // empty on success

  bool null() override { return place(json(nullptr)); }
  bool boolean(bool v) override { return place(json(v)); }
  bool number_integer(number_integer_t v) override { return place(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return place(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return place(json(v)); }
  bool string(string_t& v) override { return place(json(std::move(v))); }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second) return fail("duplicate key \"" + k + "\"");
    slot_ = &(*stack_.back())[k];
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    return close();
  }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    return fail("invalid JSON at byte " + std::to_string(position) + ": " + e.what());
  }

 private:
  bool fail(std::string what) {
    if (problem.empty()) problem = std::move(what);
    return false;
  }
  json* slot() {
    if (stack_.empty()) return &root;
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(nullptr);
      return &parent.back();
    }
    return slot_;
  }
  bool place(json v) {
    *slot() = std::move(v);
    return true;
  }
  bool open(json container) {
    if (stack_.size() == max_depth)
      return fail("nested deeper than a safetensors header (" + std::to_string(max_depth) +
                  " levels)");
    json* p = slot();
    const bool is_object = container.is_object();
    *p = std::move(container);
    stack_.push_back(p);  // a container's address is stable while values are added inside it
    if (is_object) keys_.emplace_back();
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  std::vector<json*> stack_;
  std::vector<std::set<std::string>> keys_;
  json* slot_ = nullptr;
};

}  // namespace detail

// An open safetensors file: the mapping (or bytes the caller keeps alive), the checked header.
class safetensors_file {
 public:
  // The JSON header may be at most this long: the reference implementation's limit.
  static constexpr std::uint64_t max_header_bytes = 100'000'000;

  // Maps and checks the file at `path`.
  static safetensors_file open(const std::filesystem::path& path) {
    safetensors_file f;
    try {
      f.map_ = mapped_file(path);
    } catch (const file_error& e) {
      throw safetensors_error(std::string("safetensors: ") + e.what());
    }
    f.parse_bytes(f.map_.bytes(), path.string());
    return f;
  }

  // Checks `bytes` as a whole file; the caller keeps them alive as long as the result. `label`
  // names them in errors.
  static safetensors_file parse(std::span<const std::byte> bytes, std::string label) {
    safetensors_file f;
    f.parse_bytes(bytes, std::move(label));
    return f;
  }

  const std::string& label() const { return label_; }
  // The tensors in name order.
  std::span<const safetensors_tensor> tensors() const { return tensors_; }
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }
  std::span<const std::byte> data() const { return data_; }
  std::uint64_t header_bytes() const { return header_bytes_; }

  const safetensors_tensor* find(std::string_view name) const {
    auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const safetensors_tensor& t, std::string_view n) {
                                 return std::string_view(t.name) < n;
                               });
    return it != tensors_.end() && it->name == name ? &*it : nullptr;
  }
  bool contains(std::string_view name) const { return find(name) != nullptr; }

  // The tensor's header entry; a name the file lacks is an error naming both.
  const safetensors_tensor& tensor(std::string_view name) const {
    if (const safetensors_tensor* t = find(name)) return *t;
    fail(name, "no such tensor (the file has " + std::to_string(tensors_.size()) + ")");
  }

  safetensors_view view(std::string_view name) const {
    const safetensors_tensor& t = tensor(name);
    return {
        t.name, t.dtype, t.shape,
        data_.subspan(static_cast<std::size_t>(t.begin), static_cast<std::size_t>(t.byte_size())),
        label_};
  }

  // Copies an F32, F16 or BF16 tensor into `out` as floats (f16/bf16 widened exactly);
  // `out` must hold exactly its element count.
  void copy_to_f32(std::string_view name, std::span<float> out) const {
    const safetensors_view v = view(name);
    if (!reads_as_f32(v.dtype))
      fail(name, "is " + std::string(name_of(v.dtype)) + "; reading as f32 takes F32, F16 or BF16");
    if (out.size() != v.element_count())
      fail(name, "has " + std::to_string(v.element_count()) + " elements, the output " +
                     std::to_string(out.size()));
    const std::byte* p = v.bytes.data();
    switch (v.dtype) {
      case safetensors_dtype::f32:
        if (!out.empty()) std::memcpy(out.data(), p, out.size() * 4);
        break;
      case safetensors_dtype::f16:
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = f16::to_float(load_u16(p + 2 * i));
        break;
      case safetensors_dtype::bf16:
        for (std::size_t i = 0; i < out.size(); ++i)
          out[i] = static_cast<float>(bf16::from_bits(load_u16(p + 2 * i)));
        break;
      default:
        break;
    }
  }
  std::vector<float> to_f32(std::string_view name) const {
    std::vector<float> out(static_cast<std::size_t>(tensor(name).element_count()));
    copy_to_f32(name, out);
    return out;
  }

 private:
  using json = nlohmann::json;

  static std::uint16_t load_u16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }

  [[noreturn]] void fail(std::string_view what) const {
    throw safetensors_error("safetensors: " + label_ + ": " + std::string(what));
  }
  [[noreturn]] void fail(std::string_view tensor, std::string_view what) const {
    fail("tensor '" + std::string(tensor) + "' " + std::string(what));
  }

  void parse_bytes(std::span<const std::byte> bytes, std::string label) {
    label_ = std::move(label);
    if (bytes.size() < 8)
      fail("file is " + std::to_string(bytes.size()) +
           " bytes, shorter than the 8-byte header length");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | std::to_integer<std::uint64_t>(bytes[i]);
    const std::uint64_t rest = bytes.size() - 8;
    if (n > max_header_bytes)
      fail("header length " + std::to_string(n) + " exceeds the limit of " +
           std::to_string(max_header_bytes) + " bytes");
    if (n > rest)
      fail("header length " + std::to_string(n) + " runs past the end of the file (" +
           std::to_string(rest) + " bytes follow the length; truncated file?)");
    header_bytes_ = n;
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8,
                                static_cast<std::size_t>(n));
    data_ = bytes.subspan(8 + static_cast<std::size_t>(n));
    if (text.empty() || text.front() != '{') fail("header does not begin with '{'");

    detail::header_builder builder;
    if (!json::sax_parse(text, &builder) || !builder.problem.empty())
      fail("bad header: " +
           (builder.problem.empty() ? std::string("invalid JSON") : builder.problem));
    if (!builder.root.is_object()) fail("header is not a JSON object");

    for (auto& [name, entry] : builder.root.items()) {
      if (name == "__metadata__")
        read_metadata(entry);
      else
        tensors_.push_back(read_entry(name, entry));
    }
    check_coverage();
    std::sort(
        tensors_.begin(), tensors_.end(),
        [](const safetensors_tensor& a, const safetensors_tensor& b) { return a.name < b.name; });
  }

  void read_metadata(const json& m) {
    if (!m.is_object()) fail("__metadata__ is not an object");
    for (auto& [k, v] : m.items()) {
      if (!v.is_string()) fail("__metadata__ value for \"" + k + "\" is not a string");
      metadata_.emplace(k, v.get<std::string>());
    }
  }

  // A JSON number that is a non-negative integer, or nothing.
  static std::optional<std::uint64_t> natural(const json& v) {
    if (!v.is_number_unsigned()) return std::nullopt;
    return v.get<std::uint64_t>();
  }
  static std::string describe(const json& v) { return v.dump().substr(0, 40); }

  safetensors_tensor read_entry(const std::string& name, const json& e) const {
    if (!e.is_object()) fail(name, "is not an object");
    safetensors_tensor t;
    t.name = name;
    const auto field = [&](const char* key) -> const json& {
      auto it = e.find(key);
      if (it == e.end()) fail(name, std::string("has no \"") + key + "\"");
      return *it;
    };
    const json& dt = field("dtype");
    if (!dt.is_string()) fail(name, "has a dtype that is not a string");
    const auto parsed = safetensors_dtype_named(dt.get_ref<const std::string&>());
    if (!parsed) fail(name, "has an unsupported dtype " + describe(dt));
    t.dtype = *parsed;

    const json& shape = field("shape");
    if (!shape.is_array()) fail(name, "has a shape that is not an array");
    std::uint64_t count = 1;
    for (const json& d : shape) {
      const auto v = natural(d);
      if (!v)
        fail(name, "has a shape entry " + describe(d) + " that is not a non-negative integer");
      if (*v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (*v != 0 && count > std::numeric_limits<std::uint64_t>::max() / *v))
        fail(name, "has a shape whose element count overflows 64 bits");
      count *= *v;
      t.shape.push_back(static_cast<std::int64_t>(*v));
    }
    const std::uint64_t item = size_of(t.dtype);
    if (count > std::numeric_limits<std::uint64_t>::max() / item)
      fail(name, "has a shape whose byte size overflows 64 bits");

    const json& offs = field("data_offsets");
    if (!offs.is_array() || offs.size() != 2)
      fail(name, "has data_offsets that are not a pair [begin, end]");
    const auto b = natural(offs[0]), en = natural(offs[1]);
    if (!b || !en)
      fail(name, "has data_offsets " + describe(offs) + " that are not non-negative integers");
    t.begin = *b;
    t.end = *en;
    const std::string range = "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
    if (t.begin > t.end) fail(name, "has data_offsets " + range + " with begin after end");
    if (t.end > data_.size())
      fail(name, "has data_offsets " + range + " past the end of the " +
                     std::to_string(data_.size()) + "-byte data region (truncated file?)");
    if (t.byte_size() != count * item)
      fail(name, "has data_offsets " + range + " spanning " + std::to_string(t.byte_size()) +
                     " bytes, but its shape and dtype " + std::string(name_of(t.dtype)) + " need " +
                     std::to_string(count * item));
    return t;
  }

  // The spec: the data region is entirely indexed, without holes or overlaps.
  void check_coverage() const {
    std::vector<const safetensors_tensor*> order;
    for (const safetensors_tensor& t : tensors_) order.push_back(&t);
    std::sort(order.begin(), order.end(),
              [](const safetensors_tensor* a, const safetensors_tensor* b) {
                return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
              });
    std::uint64_t at = 0;
    const safetensors_tensor* prev = nullptr;
    for (const safetensors_tensor* t : order) {
      if (t->begin < at)
        fail(t->name, "overlaps tensor '" + prev->name + "' (bytes " + std::to_string(t->begin) +
                          " to " + std::to_string(at) + ")");
      if (t->begin > at)
        fail("bytes " + std::to_string(at) + " to " + std::to_string(t->begin) +
             " of the data region belong to no tensor (a hole before '" + t->name + "')");
      at = t->end;
      prev = t;
    }
    if (at != data_.size())
      fail("bytes " + std::to_string(at) + " to " + std::to_string(data_.size()) +
           " of the data region belong to no tensor (trailing bytes)");
  }

  mapped_file map_;
  std::string label_;
  std::span<const std::byte> data_;
  std::uint64_t header_bytes_ = 0;
  std::vector<safetensors_tensor> tensors_;
  std::map<std::string, std::string, std::less<>> metadata_;
};

template <class T>
std::span<const T> safetensors_view::as() const {
  constexpr auto want = detail::safetensors_dtype_for<T>();
  static_assert(want.has_value(), "safetensors_view::as: T has no safetensors dtype");
  const auto fail = [&](const std::string& what) {
    throw safetensors_error("safetensors: " + std::string(file) + ": tensor '" + std::string(name) +
                            "' " + what);
  };
  if (*want != dtype)
    fail("is " + std::string(name_of(dtype)) + ", not " + std::string(name_of(*want)));
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(T) != 0)
    fail("starts at an address not aligned to " + std::to_string(alignof(T)) +
         " bytes; copy it (to_f32) instead of viewing it");
  return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
}

}  // namespace fusedsl::io
