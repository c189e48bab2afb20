#pragma once
// A whole file read into memory: for the small files a parser then owns (vocabularies, merges,
// JSON configurations, .npy arrays). io/mapped_file.hpp maps large ones (checkpoints) instead.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace fusedsl::io {

// The bytes of the file; nullopt when it cannot be opened or read (the caller names the file in
// its own error).
inline std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  return bytes;
}

}  // namespace fusedsl::io
