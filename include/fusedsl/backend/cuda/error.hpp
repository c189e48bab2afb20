#pragma once
// Errors from the CUDA runtime, turned into exceptions that name the call at fault.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace fusedsl::cuda {

class cuda_error : public std::runtime_error {
 public:
  cuda_error(const std::string& what, cudaError_t code)
      : std::runtime_error(what + ": " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) +
                           ")"),
        code_(code) {}
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }

  // The same error with `context` put in front (for wrappers that add where it happened).
  [[nodiscard]] cuda_error in(const std::string& context) const {
    return cuda_error(context + ": " + what(), code_, 0);
  }

 private:
  cuda_error(const std::string& full, cudaError_t code, int)
      : std::runtime_error(full), code_(code) {}

  cudaError_t code_;
};

// Throws cuda_error naming `what` when `code` is not cudaSuccess.
inline void check(cudaError_t code, const char* what) {
  if (code != cudaSuccess) throw cuda_error(what, code);
}

// Lets `kernel` take `bytes` of dynamic shared memory (above the 48 KiB default); returns true so
// a call site can run it once per kernel: `static const bool ok = allow_dynamic_smem(...)`.
template <class Kernel>
bool allow_dynamic_smem(Kernel* kernel, std::size_t bytes, const char* what) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes)),
        what);
  return true;
}

// After a kernel launch: catches bad launch configurations at the launch site.
inline void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
}

}  // namespace fusedsl::cuda
