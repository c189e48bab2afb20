// doctest main for the CUDA tests: without a usable device the suite is skipped (exit 77, which
// CMake registers as SKIP_RETURN_CODE) and says why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdio>

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device: %s\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices found");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("device 0: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount);
  doctest::Context context(argc, argv);
  return context.run();
}
