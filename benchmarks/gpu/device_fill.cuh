#pragma once
// Device-side random fill (a hash of the index and a seed): benchmark data is never zeros.

#include <cstdint>
#include <fusedsl/backend/cuda/elementwise.cuh>

namespace fusedsl::cuda::bench {

template <storage_type T>
struct random_fill {
  T* out;
  std::uint32_t seed;
  float lo, hi;
  __device__ void operator()(long i) const {
    std::uint32_t h =
        static_cast<std::uint32_t>(i) * 0x9E3779B1u ^ seed;  // one round of a 32-bit integer hash
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    out[i] = from_f32<T>(lo + (hi - lo) * static_cast<float>(h >> 8) * (1.0f / 16777216.0f));
  }
};

template <long N, storage_type T>
void fill(cudaStream_t s, T* p, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  launch_loop<N>(s, random_fill<T>{p, seed, lo, hi});
}

}  // namespace fusedsl::cuda::bench
