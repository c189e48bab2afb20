#pragma once
// One device allocation, sized once (by the static plan), carved into aligned buffers. Nothing is
// allocated after construction, so replays of a captured graph never touch the allocator.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <fusedsl/backend/cuda/error.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace fusedsl::cuda {

class device_arena {
 public:
  static constexpr std::size_t alignment =
      256;  // cudaMalloc's own alignment: every carve is 16-byte vector safe

  explicit device_arena(std::size_t bytes) : capacity_(bytes) {
    if (bytes == 0) throw std::invalid_argument("device_arena: capacity must be positive");
    check(cudaMalloc(&base_, bytes), "device_arena: cudaMalloc");
  }
  device_arena(const device_arena&) = delete;
  device_arena& operator=(const device_arena&) = delete;
  device_arena(device_arena&& o) noexcept
      : base_(std::exchange(o.base_, nullptr)), capacity_(o.capacity_), used_(o.used_) {}
  ~device_arena() {
    if (base_) cudaFree(base_);
  }

  // The next `count` elements of T, aligned; throws when the arena is exhausted.
  template <class T>
  T* carve(std::size_t count, const char* name = "buffer") {
    const std::size_t start = (used_ + alignment - 1) / alignment * alignment;
    const std::size_t bytes = count * sizeof(T);
    if (start + bytes > capacity_)
      throw std::length_error(std::string("device_arena: '") + name + "' needs " +
                              std::to_string(bytes) + " bytes at offset " + std::to_string(start) +
                              ", capacity is " + std::to_string(capacity_));
    used_ = start + bytes;
    return reinterpret_cast<T*>(static_cast<unsigned char*>(base_) + start);
  }

  // Buffer at a planned byte offset (from plan::memory); checked against the capacity.
  template <class T>
  T* at(std::size_t offset, std::size_t count) const {
    if (offset % alignof(T) != 0 || offset + count * sizeof(T) > capacity_)
      throw std::out_of_range("device_arena: buffer [" + std::to_string(offset) + ", +" +
                              std::to_string(count * sizeof(T)) +
                              ") is misaligned or past the capacity " + std::to_string(capacity_));
    return reinterpret_cast<T*>(static_cast<unsigned char*>(base_) + offset);
  }

  // Asynchronous host->device copy (weights are uploaded once, before the first call).
  template <class T>
  void upload(T* dst, std::span<const T> src, cudaStream_t stream) const {
    check(cudaMemcpyAsync(dst, src.data(), src.size_bytes(), cudaMemcpyHostToDevice, stream),
          "device_arena: upload");
  }
  template <class T>
  void download(std::span<T> dst, const T* src, cudaStream_t stream) const {
    check(cudaMemcpyAsync(dst.data(), src, dst.size_bytes(), cudaMemcpyDeviceToHost, stream),
          "device_arena: download");
  }

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::size_t used() const noexcept { return used_; }
  [[nodiscard]] void* data() const noexcept { return base_; }

 private:
  void* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
};

}  // namespace fusedsl::cuda
