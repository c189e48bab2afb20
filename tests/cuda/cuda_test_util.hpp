#pragma once
// Host side of the CUDA tests and the device check: device buffers, random inputs rounded to the
// storage type, and the norm-wise relative error (../common/compare.hpp's compare_rel_l2).

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <random>
#include <vector>

#include "../common/compare.hpp"

namespace fusedsl::cuda::testing {

using fusedsl::test::compare_rel_l2;

template <class T>
class device_buffer {
 public:
  explicit device_buffer(std::size_t n) : n_(n) {
    check(cudaMalloc(&p_, n * sizeof(T)), "device_buffer: cudaMalloc");
  }
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) { upload(host); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { cudaFree(p_); }
  void upload(const std::vector<T>& host) {
    check(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
          "device_buffer: upload");
  }
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> h(n_);
    check(cudaDeviceSynchronize(), "device_buffer: synchronize before download");
    check(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
          "device_buffer: download");
    return h;
  }
  // All bits set: NaN in f32, bf16 and f16, so an element the kernel skipped fails every check.
  void poison() { check(cudaMemset(p_, 0xff, n_ * sizeof(T)), "device_buffer: poison"); }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

// Fresh inputs each run (never zeros), seeded from the clock-independent random_device.
inline std::mt19937& rng() {
  static std::mt19937 gen{std::random_device{}()};
  return gen;
}

// Values drawn in [lo, hi) and rounded to T; `exact` receives the rounded values as f32.
template <storage_type T>
std::vector<T> random_values(std::size_t n, std::vector<float>& exact, float lo = -1.0f,
                             float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(n);
  exact.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = from_f32<T>(d(rng()));
    exact[i] = to_f32(v[i]);
  }
  return v;
}

template <storage_type T>
std::vector<double> widen(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<double>(to_f32(v[i]));
  return out;
}

// ||out - ref|| / ||ref||; a NaN or inf anywhere in out or ref gives +inf, so that it never passes.
inline double rel_l2(const std::vector<double>& out, const std::vector<double>& ref) {
  return compare_rel_l2(out, ref, 0.0).max_error;
}

// The required accuracy per output type: f32 within 1e-5, 16-bit within 1e-2 (docs/cuda.md).
template <storage_type T>
inline constexpr double tolerance = std::same_as<T, float> ? 1e-5 : 1e-2;

}  // namespace fusedsl::cuda::testing
