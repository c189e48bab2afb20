// A downstream program using fusedsl::text and the safetensors reader: writes a small
// safetensors file in memory, reads it back, and tokenizes a sentence with a tiny vocabulary.
#include <fusedsl/io/safetensors.hpp>
#include <fusedsl/io/safetensors_writer.hpp>
#include <fusedsl/text/wordpiece.hpp>
#include <iostream>
#include <span>
#include <vector>

namespace fd = fusedsl;

int main() {
  const std::vector<float> w = {1.5f, -2.0f};
  const std::vector<fd::io::safetensors_entry> entries = {
      fd::io::make_safetensors_entry<float>("w", w, {2})};
  const std::string bytes = fd::io::serialize_safetensors(entries);
  const auto f = fd::io::safetensors_file::parse(
      std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), "memory");
  const fd::text::wordpiece_tokenizer t(
      fd::text::vocabulary({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##s"}), {});
  const auto e = t.encode("Hellos!");
  std::cout << "w[1]=" << f.to_f32("w")[1] << " ids=";
  for (auto id : e.ids) std::cout << id << ' ';
  std::cout << '\n';
  return e.ids == std::vector<std::int32_t>{2, 5, 6, 1, 3} ? 0 : 1;
}
