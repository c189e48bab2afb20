// Compile-fail cases for the device executor: a program with a group that no CUDA launch computes
// does not compile, and the error names the reason, the group, its kind and its anchor's shape.
// Built once per FUSEDSL_FAILTEST value: 0 must compile; each other value must fail with the
// message registered in CMakeLists.txt.
#include <fusedsl/backend/cuda/executor.hpp>
#include <fusedsl/fusedsl.hpp>

namespace fd = fusedsl;

#if FUSEDSL_FAILTEST == 1
// A matmul with an f16 result: the lowering refuses the group.
constexpr auto h = fd::input<"h", fd::f16, 32, 32>();
constexpr auto program = fd::compile(fd::matmul(h, h));
#elif FUSEDSL_FAILTEST == 2
// Attention with head_dim 512.
constexpr auto q = fd::input<"q", fd::bf16, 2, 64, 512>();
constexpr auto program =
    fd::compile(fd::matmul(fd::softmax(fd::matmul<false, true>(q, q) * fd::lit<0.0441941738>), q));
#else
constexpr auto x = fd::input<"x", float, 8, 32>();
constexpr auto program = fd::compile(fd::exp(x) * fd::lit<2.0>);
#endif

void instantiate(cudaStream_t stream) {
  fd::cuda::executor<std::remove_const_t<decltype(program)>> ex(program, stream);
  ex.run();
}
