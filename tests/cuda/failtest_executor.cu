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
#elif FUSEDSL_FAILTEST == 3
// A KV-cache decode step: attention to the cache's filled rows, a run-time key length.
constexpr auto kc = fd::state<"k_cache", float, 4, 40, 16>();
constexpr auto q = fd::input<"q", float, 4, 1, 16>();
constexpr auto k = fd::input<"k", float, 4, 1, 16>();
constexpr auto pos = fd::input<"pos", std::int32_t>();
constexpr auto k2 = fd::dynamic_update_slice<1>(kc, k, pos);
constexpr auto keys = fd::iota<std::int32_t, 1, 1, 40>();
constexpr auto s = fd::matmul<false, true>(q, k2) * fd::lit<0.25>;
constexpr auto program = fd::compile(
    fd::matmul(fd::softmax(fd::where(keys <= pos, s, fd::neg_inf)), k2), fd::update(kc, k2));
#else
constexpr auto x = fd::input<"x", float, 8, 32>();
constexpr auto program = fd::compile(fd::exp(x) * fd::lit<2.0>);
#endif

void instantiate(cudaStream_t stream) {
  fd::cuda::executor<std::remove_const_t<decltype(program)>> ex(program, stream);
  ex.run();
}
