// Compile-fail cases for the CUDA kernels' shape checks. Built once per FUSEDSL_FAILTEST value:
// 0 must compile; each other value must fail with the message registered in CMakeLists.txt.
#include <fusedsl/backend/cuda/attention.cuh>
#include <fusedsl/backend/cuda/gemm.cuh>
#include <fusedsl/backend/cuda/row_kernels.cuh>

namespace fc = fusedsl::cuda;

void instantiate(fc::bf16* p, float* f) {
#if FUSEDSL_FAILTEST == 1
  fc::gemm<100, 128, 128, fc::bf16, fc::epilogue<fc::bf16>>(nullptr, p, p, p,
                                                            {});  // M is no tile multiple
#elif FUSEDSL_FAILTEST == 2
  fc::flash_attention<fc::bf16, 64, 1, 6, 4, 128, 128, false>(nullptr,
                                                              {});  // 6 heads over 4 kv heads
#elif FUSEDSL_FAILTEST == 3
  fc::launch_row<fc::row_op::softmax, 4, 8192>(nullptr, f, f);  // a row longer than a warp holds
#elif FUSEDSL_FAILTEST == 4
  fc::gemm<128, 128, 128, float, fc::epilogue<float>, fc::gemm_math::tensor_core>(nullptr, f, f, f,
                                                                                  {});
#else
  fc::gemm<128, 128, 128, fc::bf16, fc::epilogue<fc::bf16>>(nullptr, p, p, p, {});
  fc::flash_attention<fc::bf16, 64, 1, 8, 4, 128, 128, false>(nullptr, {});
  fc::launch_row<fc::row_op::softmax, 4, 4096>(nullptr, f, f);
#endif
}
