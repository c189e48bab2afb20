// libFuzzer target for io::bind_checkpoint: any bytes either fail to parse as safetensors
// (safetensors_error), fail to fit the program (one checkpoint_error), or bind every parameter of
// a small BERT-named program exactly once, each to a tensor of the declared dtype and shape whose
// bytes can all be read (a view into the file or a converted copy the binding owns). Nothing
// else may be thrown, and nothing may crash, read out of bounds or leak.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusedsl/io/checkpoint.hpp"
#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/models/bert_names.hpp"

namespace {

using namespace fusedsl;

// Some of a BERT program's parameters, in f32, bf16 and f16, and an i32 one.
const std::vector<io::checkpoint_param>& params() {
  static const std::vector<io::checkpoint_param> p = {
      {"embeddings.word_embeddings.weight", dtype::f32, make_dims(5, 4)},
      {"embeddings.LayerNorm.weight", dtype::bf16, make_dims(4)},
      {"embeddings.LayerNorm.bias", dtype::f16, make_dims(4)},
      {"encoder.layer.0.attention.self.query.weight", dtype::f32, make_dims(4, 4)},
      {"encoder.layer.0.attention.self.query.bias", dtype::f32, make_dims(4)},
      {"ids", dtype::i32, make_dims(2)},
  };
  return p;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::optional<io::safetensors_file> f;
  try {
    f.emplace(io::safetensors_file::parse(bytes, "fuzz.safetensors"));
  } catch (const io::safetensors_error&) {
    return 0;
  }
  // The first byte picks the options: BERT renaming or none, conversion on or off.
  io::checkpoint_options o;
  if (size > 0 && (data[0] & 1)) o.rename = models::bert_checkpoint_name;
  o.convert = size == 0 || !(data[0] & 2);
  std::vector<std::string> seen;
  volatile std::uint64_t sum = 0;  // every byte bound is read (ASan checks the reads)
  const auto bind = [&](const std::string& name, tensor_ref t) {
    const io::checkpoint_param* want = nullptr;
    for (const io::checkpoint_param& p : params())
      if (p.name == name) want = &p;
    check(want != nullptr && t.type == want->type && t.shape == want->shape && t.data != nullptr);
    for (const std::string& s : seen) check(s != name);
    seen.push_back(name);
    const auto* b = static_cast<const unsigned char*>(t.data);
    for (std::size_t i = 0; i < t.bytes(); ++i) sum = sum + b[i];
  };
  try {
    const io::checkpoint_binding r = io::bind_checkpoint(params(), *f, bind, o);
    check(seen.size() == params().size() && r.bound == seen);
    check(r.storage.size() >= r.converted.size());
  } catch (const io::checkpoint_error& e) {
    check(seen.empty());  // nothing is bound when the checkpoint does not fit
    check(std::string(e.what()).find("fuzz.safetensors does not fit the program") !=
          std::string::npos);
  }
  return 0;
}
