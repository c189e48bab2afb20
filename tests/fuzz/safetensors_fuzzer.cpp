// libFuzzer target for the safetensors reader: any bytes either parse or throw safetensors_error
// (never crash, read out of bounds, leak or throw anything else). Whatever parses must satisfy the
// format's invariants (tensors cover the data region exactly, sizes match shapes), convert to f32
// where the dtype allows, and write back to bytes that parse to the same tensors and metadata.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/io/safetensors_writer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fusedsl::io;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::optional<safetensors_file> f;
  try {
    f.emplace(safetensors_file::parse(bytes, "fuzz"));
  } catch (const safetensors_error&) {
    return 0;
  }
  std::uint64_t covered = 0;
  std::vector<safetensors_entry> entries;
  for (const safetensors_tensor& t : f->tensors()) {
    std::uint64_t count = 1;
    for (std::int64_t d : t.shape) count *= static_cast<std::uint64_t>(d);
    if (t.end > f->data().size() || t.byte_size() != count * size_of(t.dtype)) std::abort();
    covered += t.byte_size();
    const safetensors_view v = f->view(t.name);
    if (v.bytes.data() < f->data().data() || v.bytes.size() != t.byte_size()) std::abort();
    if (reads_as_f32(t.dtype) && f->to_f32(t.name).size() != count) std::abort();
    entries.push_back({t.name, t.dtype, t.shape, v.bytes});
  }
  if (covered != f->data().size()) std::abort();

  const std::map<std::string, std::string> meta(f->metadata().begin(), f->metadata().end());
  const std::string again = serialize_safetensors(entries, meta);
  const safetensors_file g = safetensors_file::parse(
      std::as_bytes(std::span<const char>(again.data(), again.size())), "fuzz-again");
  if (g.tensors().size() != f->tensors().size() || g.metadata() != f->metadata()) std::abort();
  for (std::size_t i = 0; i < g.tensors().size(); ++i) {
    const safetensors_tensor &a = f->tensors()[i], &b = g.tensors()[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape) std::abort();
    const auto va = f->view(a.name).bytes, vb = g.view(b.name).bytes;
    if (!std::equal(va.begin(), va.end(), vb.begin(), vb.end())) std::abort();
  }
  return 0;
}
