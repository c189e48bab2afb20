#pragma once
// Timing, result records and an optional cuBLAS (loaded at run time) for the GPU benchmarks.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <fusedsl/backend/cuda/error.hpp>
#include <string>
#include <vector>

namespace fusedsl::cuda::bench {

// Datasheet dense tensor-core peaks of the H200 SXM (H100's rates; NVIDIA H200 datasheet).
inline constexpr double h200_bf16_peak_tflops = 989.4;
inline constexpr double h200_tf32_peak_tflops = 494.7;

// Median milliseconds per call of `fn` on `stream`: warm-up first, then `repeats` event-timed runs
// of `iters` calls each.
inline double median_ms(cudaStream_t stream, const std::function<void()>& fn, int iters = 20,
                        int repeats = 5) {
  for (int i = 0; i < 3; ++i) fn();
  check(cudaStreamSynchronize(stream), "bench: warm-up");
  cudaEvent_t start{}, stop{};
  check(cudaEventCreate(&start), "bench: event");
  check(cudaEventCreate(&stop), "bench: event");
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    check(cudaEventRecord(start, stream), "bench: record");
    for (int i = 0; i < iters; ++i) fn();
    check(cudaEventRecord(stop, stream), "bench: record");
    check(cudaEventSynchronize(stop), "bench: sync");
    float t = 0.0f;
    check(cudaEventElapsedTime(&t, start, stop), "bench: elapsed");
    ms.push_back(static_cast<double>(t) / iters);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// One line of JSON per measurement, also echoed as a table row.
class report {
 public:
  explicit report(const char* path) : f_(path ? std::fopen(path, "w") : nullptr) {}
  ~report() {
    if (f_) std::fclose(f_);
  }
  report(const report&) = delete;
  report& operator=(const report&) = delete;

  void add(const std::string& name, double ms, double flops, double bytes,
           const std::string& note = "") {
    const double tflops = flops > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0;
    const double gbs = bytes > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0;
    std::printf("%-58s %10.4f ms", name.c_str(), ms);
    if (flops > 0)
      std::printf(" %8.1f TFLOP/s (%4.1f%% of bf16 peak)", tflops,
                  100.0 * tflops / h200_bf16_peak_tflops);
    if (bytes > 0) std::printf(" %8.1f GB/s", gbs);
    if (!note.empty()) std::printf("  %s", note.c_str());
    std::printf("\n");
    std::fflush(stdout);
    if (f_) {
      std::fprintf(
          f_,
          "{\"name\": \"%s\", \"ms\": %.6f, \"tflops\": %.3f, \"gbps\": %.2f, \"note\": \"%s\"}\n",
          name.c_str(), ms, tflops, gbs, note.c_str());
      std::fflush(f_);
    }
  }
  void check_line(const std::string& name, double rel_err, double tol) {
    const bool ok = rel_err <= tol;
    std::printf("%-58s rel_err %.3e (tol %.0e) %s\n", name.c_str(), rel_err, tol,
                ok ? "PASS" : "FAIL");
    if (f_)
      std::fprintf(f_, "{\"check\": \"%s\", \"rel_err\": %.6e, \"tol\": %.1e, \"pass\": %s}\n",
                   name.c_str(), rel_err, tol, ok ? "true" : "false");
    failures_ += ok ? 0 : 1;
  }
  [[nodiscard]] int failures() const { return failures_; }

 private:
  std::FILE* f_;
  int failures_ = 0;
};

// cuBLAS loaded with dlopen, so the binaries run (without the cuBLAS comparison) where the
// library is absent.
struct cublas_api {
  void* lib = nullptr;
  cublasHandle_t handle = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // The C entry points (the header also declares C++ overloads, so decltype cannot name them).
  using gemm_ex_fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  using gemm_sb_fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        long long, const void*, cudaDataType, int, long long,
                                        const void*, void*, cudaDataType, int, long long, int,
                                        cublasComputeType_t, cublasGemmAlgo_t);
  gemm_ex_fn gemm_ex = nullptr;
  gemm_sb_fn gemm_strided_batched_ex = nullptr;
  std::string why_not;

  explicit cublas_api(cudaStream_t stream) {
    for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) {
      why_not = std::string("dlopen libcublas.so.13 failed: ") + dlerror();
      return;
    }
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "cublasCreate_v2"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "cublasDestroy_v2"));
    set_stream = reinterpret_cast<decltype(set_stream)>(dlsym(lib, "cublasSetStream_v2"));
    gemm_ex = reinterpret_cast<decltype(gemm_ex)>(dlsym(lib, "cublasGemmEx"));
    gemm_strided_batched_ex = reinterpret_cast<decltype(gemm_strided_batched_ex)>(
        dlsym(lib, "cublasGemmStridedBatchedEx"));
    if (!create || !destroy || !set_stream || !gemm_ex || !gemm_strided_batched_ex) {
      why_not = "libcublas lacks an expected symbol";
      return;
    }
    if (create(&handle) != CUBLAS_STATUS_SUCCESS ||
        set_stream(handle, stream) != CUBLAS_STATUS_SUCCESS) {
      why_not = "cublasCreate failed";
      handle = nullptr;
    }
  }
  ~cublas_api() {
    if (handle) destroy(handle);
  }
  cublas_api(const cublas_api&) = delete;
  cublas_api& operator=(const cublas_api&) = delete;
  [[nodiscard]] bool ok() const { return handle != nullptr; }

  // Row-major C[m,n] = alpha A[m,k] B[k,n] in bf16 with f32 accumulation (column-major C^T = B^T
  // A^T).
  void gemm_bf16(int m, int n, int k, const void* a, int lda, const void* b, int ldb, void* c,
                 int ldc, float alpha = 1.0f) const {
    const float beta = 0.0f;
    if (gemm_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a,
                CUDA_R_16BF, lda, &beta, c, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cublasGemmEx failed");
  }
  void gemm_bf16_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         float alpha, const void* a, int lda, long long sa, const void* b, int ldb,
                         long long sb, void* c, int ldc, long long sc, int batch) const {
    const float beta = 0.0f;
    if (gemm_strided_batched_ex(handle, ta, tb, m, n, k, &alpha, a, CUDA_R_16BF, lda, sa, b,
                                CUDA_R_16BF, ldb, sb, &beta, c, CUDA_R_16BF, ldc, sc, batch,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cublasGemmStridedBatchedEx failed");
  }
};

inline void print_device(std::FILE* out = stdout) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::fprintf(out, "device: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, driver %d, runtime %d\n",
               p.name, p.major, p.minor, p.multiProcessorCount,
               static_cast<double>(p.totalGlobalMem) / (1 << 30), p.l2CacheSize >> 20, driver,
               runtime);
}

// The shared main of the GPU benchmarks: exit 77 (skipped) without a device, else print it, make
// a stream and the report (JSON lines to argv[1] if given), run body(report, stream); exit 1 if a
// check failed, 2 on an exception.
template <class Body>
int bench_main(int argc, char** argv, Body body) {
  try {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::printf("SKIP: no CUDA device\n");
      return 77;
    }
    print_device();
    cudaStream_t stream{};
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    report rep(argc > 1 ? argv[1] : nullptr);
    body(rep, stream);
    check(cudaStreamSynchronize(stream), "final sync");
    return rep.failures() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

}  // namespace fusedsl::cuda::bench
