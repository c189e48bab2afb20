#pragma once
// Shared by the safetensors tests: a scratch file that removes itself, and raw files built from a
// header text, so that malformed headers can be written byte by byte.
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

namespace fusedsl::test {

class scratch_file {
 public:
  explicit scratch_file(const std::string& stem) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("fusedsl-" + stem + "-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter++) + ".safetensors");
  }
  ~scratch_file() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  scratch_file(const scratch_file&) = delete;
  scratch_file& operator=(const scratch_file&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void write(const std::string& bytes) const {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::filesystem::path path_;
};

// An 8-byte little-endian header length (`length`, whatever the header's real size), the header
// text, then the data bytes.
inline std::string raw_safetensors_with_length(std::uint64_t length, const std::string& header,
                                               const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header + data;
}
inline std::string raw_safetensors(const std::string& header, const std::string& data = "") {
  return raw_safetensors_with_length(header.size(), header, data);
}

inline std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

}  // namespace fusedsl::test
