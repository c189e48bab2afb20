#pragma once
// A whole file mapped read-only into memory (POSIX mmap), unmapped when its owner goes. The bytes
// stay at one address for the mapping's life, moves included, so views into them stay valid. As
// with any mapping, a file that another process truncates meanwhile faults (SIGBUS) when read.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <utility>

#include "fusedsl/core/error.hpp"

namespace fusedsl::io {

// A file that cannot be opened, is not a regular file, or cannot be mapped.
struct file_error : error {
  using error::error;
};

class mapped_file {
 public:
  mapped_file() = default;
  explicit mapped_file(const std::filesystem::path& path) : path_(path.string()) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open");
    struct ::stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      fail("cannot stat", e);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw file_error("'" + path_ + "' is not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {  // mmap of length 0 fails; an empty file is an empty span
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        fail("cannot map", e);
      }
      addr_ = p;
    }
    ::close(fd);  // the mapping keeps the file open
  }
  ~mapped_file() { unmap(); }

  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  mapped_file(mapped_file&& o) noexcept
      : path_(std::move(o.path_)),
        addr_(std::exchange(o.addr_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  mapped_file& operator=(mapped_file&& o) noexcept {
    if (this != &o) {
      unmap();
      path_ = std::move(o.path_);
      addr_ = std::exchange(o.addr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(addr_), addr_ ? size_ : 0};
  }
  std::size_t size() const { return addr_ ? size_ : 0; }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const char* what, int e = errno) const {
    throw file_error(std::string(what) + " '" + path_ + "': " + std::strerror(e));
  }
  void unmap() noexcept {
    if (addr_) ::munmap(addr_, size_);
    addr_ = nullptr;
    size_ = 0;
  }

  std::string path_;
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace fusedsl::io
