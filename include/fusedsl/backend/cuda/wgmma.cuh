#pragma once
// wgmma.mma_async wrappers for the Hopper (sm_90a) kernels: f32 accumulators, scale-d = 1, A and B
// from shared-memory descriptors (wgmma_ss) or A from registers (wgmma_rs). PTX ISA 8.x,
// "wgmma.mma_async". The instructions exist only in an sm_90a cubin, hence the guard.

#include <cstdint>
#include <fusedsl/backend/cuda/numeric.cuh>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace fusedsl::cuda::sm90::detail {

// D(64 x N) += A(64 x 16) B(16 x N). TnspB = 0: B's rows are its N index (K contiguous, like K in
// Q K^T); 1: B's rows are its K index (N contiguous, a row-major [K, N] matrix).
template <int N, half_type T, int TnspB>
__device__ void wgmma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b);

// D(64 x N) += A(64 x 16, registers: mma.sync's A fragment per warp) B(16 x N, N contiguous).
template <int N, half_type T>
__device__ void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b);

// The instantiations differ in N, the type's name and operand numbers; the register lists are
// spelled once, each extending the one before.
// clang-format off
#define FUSEDSL_WGMMA_REGS_32                                                        \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"             \
  ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"

#define FUSEDSL_WGMMA_OUTS_32                                                                      \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),         \
  "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),       \
  "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),       \
  "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

#define FUSEDSL_WGMMA_REGS_64                                                        \
  FUSEDSL_WGMMA_REGS_32                                                              \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

#define FUSEDSL_WGMMA_OUTS_64                                                                      \
  FUSEDSL_WGMMA_OUTS_32,                                                                           \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]),       \
  "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),       \
  "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]),       \
  "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),       \
  "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define FUSEDSL_WGMMA_REGS_128                                                                     \
  FUSEDSL_WGMMA_REGS_64                                                                            \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"               \
  ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"               \
  ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"   \
  ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

#define FUSEDSL_WGMMA_OUTS_128                                                                     \
  FUSEDSL_WGMMA_OUTS_64,                                                                           \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),       \
  "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),       \
  "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),       \
  "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),       \
  "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),       \
  "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), \
  "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),              \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]),              \
  "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),              \
  "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

#define FUSEDSL_WGMMA_SS(N, R, T, PTX_T, TNSP_B, IA, IB, IP)                               \
  template <>                                                                              \
  __device__ inline void wgmma_ss<N, T, TNSP_B>(float(&d)[R], std::uint64_t desc_a,        \
                                                std::uint64_t desc_b) {                    \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " IP ", 0;\n"                           \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " {"    \
                 FUSEDSL_WGMMA_REGS_##R "}, " IA ", " IB ", p, 1, 1, 0, " #TNSP_B ";\n}\n" \
                 : FUSEDSL_WGMMA_OUTS_##R                                                  \
                 : "l"(desc_a), "l"(desc_b), "r"(1));                                      \
  }

#define FUSEDSL_WGMMA_RS(N, R, T, PTX_T, IA, IB, IP)                                    \
  template <>                                                                           \
  __device__ inline void wgmma_rs<N, T>(float(&d)[R], const std::uint32_t(&a)[4],       \
                                        std::uint64_t desc_b) {                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " IP ", 0;\n"                        \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " {" \
                 FUSEDSL_WGMMA_REGS_##R "}, " IA ", " IB ", p, 1, 1, 1;\n}\n"           \
                 : FUSEDSL_WGMMA_OUTS_##R                                               \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));    \
  }

FUSEDSL_WGMMA_SS(64, 32, bf16, "bf16", 0, "%32", "%33", "%34")
FUSEDSL_WGMMA_SS(128, 64, bf16, "bf16", 1, "%64", "%65", "%66")
FUSEDSL_WGMMA_SS(256, 128, bf16, "bf16", 1, "%128", "%129", "%130")
FUSEDSL_WGMMA_RS(64, 32, bf16, "bf16", "{%32, %33, %34, %35}", "%36", "%37")
FUSEDSL_WGMMA_RS(128, 64, bf16, "bf16", "{%64, %65, %66, %67}", "%68", "%69")
FUSEDSL_WGMMA_SS(64, 32, f16, "f16", 0, "%32", "%33", "%34")
FUSEDSL_WGMMA_SS(128, 64, f16, "f16", 1, "%64", "%65", "%66")
FUSEDSL_WGMMA_SS(256, 128, f16, "f16", 1, "%128", "%129", "%130")
FUSEDSL_WGMMA_RS(64, 32, f16, "f16", "{%32, %33, %34, %35}", "%36", "%37")
FUSEDSL_WGMMA_RS(128, 64, f16, "f16", "{%64, %65, %66, %67}", "%68", "%69")

#undef FUSEDSL_WGMMA_SS
#undef FUSEDSL_WGMMA_RS
#undef FUSEDSL_WGMMA_REGS_32
#undef FUSEDSL_WGMMA_OUTS_32
#undef FUSEDSL_WGMMA_REGS_64
#undef FUSEDSL_WGMMA_OUTS_64
#undef FUSEDSL_WGMMA_REGS_128
#undef FUSEDSL_WGMMA_OUTS_128

// clang-format on

}  // namespace fusedsl::cuda::sm90::detail
#endif
