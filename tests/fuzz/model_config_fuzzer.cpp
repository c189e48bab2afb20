// libFuzzer target for models::read_sentence_model_config: the input, split at NUL bytes, is the
// config.json, sentence_bert_config.json, modules.json and 1_Pooling/config.json of a model
// directory (a missing part: the file is absent). Any contents either give a configuration that
// holds together or a model_error naming one of the directory's files; nothing else may be
// thrown, and nothing may crash or leak.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/io/sentence_model.hpp"

namespace fs = std::filesystem;

namespace {

// A directory of this process with an (empty) vocab.txt and model.safetensors, removed at exit.
struct scratch_directory {
  fs::path path =
      fs::temp_directory_path() / ("fusedsl-model-config-fuzz-" + std::to_string(::getpid()));
  scratch_directory() {
    fs::create_directories(path / "1_Pooling");
    for (const char* f : {"vocab.txt", "model.safetensors"})
      std::ofstream(path / f, std::ios::binary);
  }
  ~scratch_directory() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

const fs::path& directory() {
  static const scratch_directory dir;
  return dir.path;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const fs::path& d = directory();
  const char* files[] = {"config.json", "sentence_bert_config.json", "modules.json",
                         "1_Pooling/config.json"};
  std::size_t at = 0;
  for (const char* name : files) {
    const fs::path p = d / name;
    if (at > in.size()) {
      fs::remove(p);
      continue;
    }
    const std::size_t end = std::min(in.find('\0', at), in.size());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << in.substr(at, end - at);
    at = end + 1;
  }
  try {
    const fusedsl::models::sentence_model_config c = fusedsl::models::read_sentence_model_config(d);
    check(c.model_type == "bert" && c.layers > 0 && c.heads > 0 && c.hidden_size % c.heads == 0);
    check(c.max_seq_length >= 2 && std::int64_t(c.max_seq_length) <= c.max_positions);
    check(c.layer_norm_eps > 0 && c.pooling == "mean" && !c.describe().empty());
  } catch (const fusedsl::models::model_error& e) {
    check(std::string_view(e.what()).starts_with("model directory: '"));
  }
  return 0;
}
