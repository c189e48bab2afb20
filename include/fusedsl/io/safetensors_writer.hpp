#pragma once
// Writes safetensors files (io/safetensors.hpp has the format): tensors laid out in name order,
// contiguous, the JSON header padded with spaces to a multiple of 8 bytes so that the data region
// is 8-byte aligned in the file, as the reference writer does.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "fusedsl/io/safetensors.hpp"

namespace fusedsl::io {

// One tensor to write: its bytes (C order, little-endian) must be product(shape) * dtype size.
struct safetensors_entry {
  std::string name;
  safetensors_dtype dtype = safetensors_dtype::f32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
};

template <class T>
safetensors_entry make_safetensors_entry(std::string name, std::span<const T> values,
                                         std::vector<std::int64_t> shape) {
  constexpr auto dt = detail::safetensors_dtype_for<T>();
  static_assert(dt.has_value(), "make_safetensors_entry: T has no safetensors dtype");
  return {std::move(name), *dt, std::move(shape), std::as_bytes(values)};
}

// The bytes of a whole file.
inline std::string serialize_safetensors(std::span<const safetensors_entry> tensors,
                                         const std::map<std::string, std::string>& metadata = {}) {
  const auto fail = [](const std::string& what) -> void {
    throw safetensors_error("safetensors: cannot write: " + what);
  };
  std::map<std::string, const safetensors_entry*> by_name;
  for (const safetensors_entry& t : tensors) {
    if (t.name == "__metadata__") fail("'__metadata__' is reserved, not a tensor name");
    if (!by_name.emplace(t.name, &t).second) fail("tensor '" + t.name + "' is given twice");
    std::uint64_t count = 1;
    for (std::int64_t d : t.shape) {
      if (d < 0) fail("tensor '" + t.name + "' has a negative dimension " + std::to_string(d));
      const auto u = static_cast<std::uint64_t>(d);
      if (u != 0 && count > std::numeric_limits<std::uint64_t>::max() / u)
        fail("tensor '" + t.name + "' has an element count that overflows 64 bits");
      count *= u;
    }
    const std::size_t item = size_of(t.dtype);
    if (count > t.bytes.size() / item || count * item != t.bytes.size())
      fail("tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) + " bytes for " +
           std::to_string(count) + " elements of " + std::string(name_of(t.dtype)));
  }
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t at = 0;
  for (const auto& [name, t] : by_name) {
    header[name] = {{"dtype", name_of(t->dtype)},
                    {"shape", t->shape},
                    {"data_offsets", {at, at + t->bytes.size()}}};
    at += t->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out += text;
  for (const auto& [name, t] : by_name)
    out.append(reinterpret_cast<const char*>(t->bytes.data()), t->bytes.size());
  return out;
}

inline void write_safetensors(const std::filesystem::path& path,
                              std::span<const safetensors_entry> tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
  const std::string bytes = serialize_safetensors(tensors, metadata);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw safetensors_error("safetensors: cannot write '" + path.string() + "'");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw safetensors_error("safetensors: write failed for '" + path.string() + "'");
}

}  // namespace fusedsl::io
