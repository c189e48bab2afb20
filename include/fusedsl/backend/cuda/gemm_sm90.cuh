#pragma once
// Hopper (sm_90a) GEMM main loop: the TMA copy engine fills a ring of 128-byte-swizzled shared
// memory stages, two consumer warpgroups multiply them with wgmma straight from shared memory, and
// one producer thread drives the copies; mbarriers hand each stage back and forth. Same contract as
// gemm.cuh's kernels: C[M,N] = epilogue(A[M,K] B[K,N]), row-major, bf16/f16 in, f32 accumulation.
// PTX ISA 8.x: "wgmma.mma_async", "Matrix Descriptor Format", "cp.async.bulk.tensor", "mbarrier";
// CUDA driver API: cuTensorMapEncodeTiled.
//
// The wgmma code exists only in an sm_90a cubin. Builds that include one define FUSEDSL_CUDA_WGMMA
// (the CMake targets do when FUSEDSL_CUDA_ARCHITECTURES holds 90a); gemm() then takes this path on
// a compute-capability 9.0 device for shapes that fill the chip, and the mma.sync path otherwise.

#include <cuda.h>  // CUtensorMap and its enums (types only: the driver function is fetched at run time)
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <fusedsl/backend/cuda/epilogue.cuh>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <fusedsl/backend/cuda/ptx.cuh>
#include <stdexcept>
#include <string>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FUSEDSL_SM90A_DEVICE 1
#endif

namespace fusedsl::cuda::sm90 {

// Block tile: 128 x BN outputs, K in steps of 64 (one 128-byte swizzle row of 16-bit values);
// warpgroup 0 produces, warpgroups 1 and 2 each own 64 rows.
template <int BN_, int Stages_>
struct wgmma_tile {
  static constexpr int BM = 128, BN = BN_, BK = 64, stages = Stages_, consumers = 2;
  static constexpr int threads = 128 * (consumers + 1);
  static constexpr int a_bytes = BM * BK * 2, b_bytes = BK * BN * 2;
  static constexpr int stage_bytes = a_bytes + b_bytes;
  // + 1 KiB so the ring can start on a 1024-byte boundary (the 128-byte swizzle's period).
  static constexpr std::size_t smem_bytes = std::size_t(stages) * stage_bytes + 1024;
  static_assert(BN % 64 == 0 && BN <= 256, "wgmma_tile: BN is a multiple of 64, at most 256");
};

// A shape takes this path when the tiles divide it and there are enough blocks to fill the chip.
template <int M, int N, int K>
inline constexpr bool fits = M % 128 == 0 && N % 128 == 0 && K % 64 == 0 &&
                             (M / 128) * (N / 128) >= 64;

namespace detail {

#if defined(FUSEDSL_SM90A_DEVICE)
__device__ inline void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(ptx::smem_address(bar)),
               "r"(count));
}
__device__ inline void mbar_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(ptx::smem_address(bar)),
      "r"(bytes)
      : "memory");
}
__device__ inline void mbar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(ptx::smem_address(bar))
               : "memory");
}
__device__ inline void mbar_wait(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(ptx::smem_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
// A 2-D box of the tensor `map` at (inner, outer) element coordinates into shared memory; the
// bytes count towards `bar`'s transaction.
__device__ inline void tma_load_2d(void* dst, const CUtensorMap* map, std::uint64_t* bar, int inner,
                                   int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%3, %4}], [%2];\n" ::"r"(ptx::smem_address(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(ptx::smem_address(bar)), "r"(inner), "r"(outer)
      : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: start, leading and stride byte offsets in
// 16-byte units (PTX "Matrix Descriptor Format"; layout type 1 = 128B swizzle in bits 62-63).
__device__ inline std::uint64_t smem_desc(const void* p, unsigned leading, unsigned stride) {
  return std::uint64_t((ptx::smem_address(p) & 0x3FFFF) >> 4) |
         (std::uint64_t((leading & 0x3FFFF) >> 4) << 16) |
         (std::uint64_t((stride & 0x3FFFF) >> 4) << 32) | (std::uint64_t(1) << 62);
}

__device__ inline void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int Pending>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// D(64 x N, f32) += A(64 x 16, K-major, from desc_a) * B(16 x N, N-major, from desc_b): one
// warpgroup, scale-d = 1, B transposed (its rows are contiguous along N).
template <int N, half_type T>
__device__ void wgmma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b);

// The four instantiations differ only in the operand type's name.
// clang-format off
#define FUSEDSL_WGMMA_M64N128(T, PTX_T)                                                                           \
  template <>                                                                                                     \
  __device__ inline void wgmma_ss<128, T>(float(&d)[64], std::uint64_t desc_a,                                    \
                                        std::uint64_t desc_b) {                                                   \
    asm volatile(                                                                                                 \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                              \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX_T "." PTX_T " {"                                       \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                                   \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"                         \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"                         \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                          \
        "}, %64, %65, p, 1, 1, 0, 1;\n}\n"                                                                        \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])  \
        : "l"(desc_a), "l"(desc_b), "r"(1));                                                                      \
  }
FUSEDSL_WGMMA_M64N128(bf16, "bf16")
FUSEDSL_WGMMA_M64N128(f16, "f16")
#undef FUSEDSL_WGMMA_M64N128

#define FUSEDSL_WGMMA_M64N256(T, PTX_T)                                                                                   \
  template <>                                                                                                             \
  __device__ inline void wgmma_ss<256, T>(float(&d)[128], std::uint64_t desc_a,                                           \
                                        std::uint64_t desc_b) {                                                           \
    asm volatile(                                                                                                         \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                                     \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." PTX_T "." PTX_T " {"                                               \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                                           \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"                                 \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"                                 \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"                                 \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"                                 \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"                                 \
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"                     \
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"                  \
        "}, %128, %129, p, 1, 1, 0, 1;\n}\n"                                                                              \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                 \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),           \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),         \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),         \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),         \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),         \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),         \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),         \
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),         \
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),         \
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),         \
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),         \
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),     \
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])  \
        : "l"(desc_a), "l"(desc_b), "r"(1));                                                                              \
  }
FUSEDSL_WGMMA_M64N256(bf16, "bf16")
FUSEDSL_WGMMA_M64N256(f16, "f16")
#undef FUSEDSL_WGMMA_M64N256
// clang-format on

#endif  // FUSEDSL_SM90A_DEVICE

// Blocks walk the output in groups of 8 block-rows, as in gemm.cuh, so shared B panels stay in L2.
template <half_type In, class Epi, int M, int N, int K, class Tile>
__global__ void __launch_bounds__(Tile::threads, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_a,
                      const __grid_constant__ CUtensorMap map_b,
                      typename Epi::out_type* __restrict__ c, Epi epi) {
#if defined(FUSEDSL_SM90A_DEVICE)
  constexpr int BM = Tile::BM, BN = Tile::BN, BK = Tile::BK, S = Tile::stages, KT = K / BK;
  constexpr int grid_m = M / BM, grid_n = N / BN, group_rows = 8;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) std::uint64_t full[S], empty[S];
  // The swizzle pattern repeats every 1024 bytes and is applied to absolute addresses.
  const unsigned raw = ptx::smem_address(smem_raw);
  unsigned char* ring = smem_raw + ((1024 - (raw & 1023)) & 1023);

  const int wg = static_cast<int>(threadIdx.x) / 128;
  const int pid = static_cast<int>(blockIdx.x);
  const int first_m = pid / (group_rows * grid_n) * group_rows;
  const int rows_here = grid_m - first_m < group_rows ? grid_m - first_m : group_rows;
  const int bm = first_m + (pid % (group_rows * grid_n)) % rows_here;
  const int bn = (pid % (group_rows * grid_n)) / rows_here;
  const int row0 = bm * BM, col0 = bn * BN;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], Tile::consumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every copy; stage s holds A [128 x 64] then B as BN/64 boxes
    // of [64 (K) x 64 (N)].
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % S;
        if (kt >= S) mbar_wait(&empty[s], static_cast<unsigned>((kt / S - 1) & 1));
        unsigned char* st = ring + std::size_t(s) * Tile::stage_bytes;
        mbar_expect_tx(&full[s], Tile::stage_bytes);
        tma_load_2d(st, &map_a, &full[s], kt * BK, row0);
#pragma unroll
        for (int j = 0; j < BN / 64; ++j)
          tma_load_2d(st + Tile::a_bytes + j * BK * 128, &map_b, &full[s], col0 + j * 64, kt * BK);
      }
    }
    return;
  }

  // Consumers: warpgroup w (1 or 2) owns rows 64(w-1) .. 64w-1 of the block.
  const int cw = wg - 1;
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % S;
    mbar_wait(&full[s], static_cast<unsigned>((kt / S) & 1));
    const unsigned char* a_st = ring + std::size_t(s) * Tile::stage_bytes + cw * 64 * 128;
    const unsigned char* b_st = ring + std::size_t(s) * Tile::stage_bytes + Tile::a_bytes;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k) {
      // A: K-major rows of 128 bytes, 8-row groups 1024 bytes apart, k16 step = 32 bytes.
      // B: N-major; 64-column boxes BK*128 bytes apart (leading), 8-row groups 1024 bytes apart
      // (stride), k16 step = two 8-row groups.
      wgmma_ss<BN, In>(acc, smem_desc(a_st + k * 32, 16, 1024),
                       smem_desc(b_st + k * 2048, BK * 128, 1024));
    }
    wgmma_commit();
    // Keep one group in flight; the stage read by the group before it is free again.
    wgmma_wait<1>();
    if (kt > 0 && threadIdx.x % 128 == 0) mbar_arrive(&empty[(kt - 1) % S]);
  }
  wgmma_wait<0>();

  // Accumulator layout of m64nN: register 4j + e of thread (warp w, lane l) is row
  // 16w + l/4 + 8(e/2), column 8j + 2(l%4) + e%2 of the warpgroup's 64 x BN tile.
  const int lane = static_cast<int>(threadIdx.x) % 32,
            warp = (static_cast<int>(threadIdx.x) % 128) / 32;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + cw * 64 + warp * 16 + g + 8 * h;
      const int col = col0 + j * 8 + 2 * t;
      store_pair(c + static_cast<long>(row) * N + col, epi.apply(acc[4 * j + 2 * h], row, col, N),
                 epi.apply(acc[4 * j + 2 * h + 1], row, col + 1, N));
    }
#else
  (void)map_a, (void)map_b, (void)c, (void)epi;
  __trap();  // never launched: gemm() takes this path only in builds with an sm_90a cubin
#endif
}

// cuTensorMapEncodeTiled from the driver, fetched once through the runtime (no libcuda link).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                           &q),
          "gemm (sm_90): looking up cuTensorMapEncodeTiled");
    if (q != cudaDriverEntryPointSuccess || p == nullptr)
      throw std::runtime_error("gemm (sm_90): the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A row-major [outer, inner] tensor read in [box_outer, box_inner] boxes with the 128-byte swizzle.
template <half_type T>
CUtensorMap tensor_map_2d(const T* base, int inner, int outer, int box_inner, int box_outer,
                          const char* what) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(inner), cuuint64_t(outer)};
  const cuuint64_t strides[1] = {cuuint64_t(inner) * sizeof(T)};
  const cuuint32_t box[2] = {cuuint32_t(box_inner), cuuint32_t(box_outer)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(
      &map,
      std::same_as<T, bf16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      const_cast<T*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(std::string("gemm (sm_90): cuTensorMapEncodeTiled failed for ") +
                             what + " (CUresult " + std::to_string(int(r)) +
                             "; the pointer must be 16-byte aligned)");
  return map;
}

}  // namespace detail

// Whether the current device runs the wgmma path: compute capability 9.0 (the sm_90a cubin
// runs on exactly that), in a build that has the cubin.
inline bool device_has_wgmma() {
#if defined(FUSEDSL_CUDA_WGMMA)
  static int cached[64] = {};  // 0 unknown, 1 yes, 2 no
  int dev = 0;
  check(cudaGetDevice(&dev), "gemm: cudaGetDevice");
  if (dev < 0 || dev >= 64) return false;
  if (cached[dev] == 0) {
    int major = 0, minor = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "gemm: cc");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "gemm: cc");
    cached[dev] = major == 9 && minor == 0 ? 1 : 2;
  }
  return cached[dev] == 1;
#else
  return false;
#endif
}

template <int M, int N, int K, half_type In, class Epi, class Tile = wgmma_tile<128, 4>>
void gemm(cudaStream_t stream, const In* a, const In* b, typename Epi::out_type* c, Epi epi) {
  static_assert(M % Tile::BM == 0 && N % Tile::BN == 0 && K % Tile::BK == 0,
                "gemm (wgmma): M, N, K must be multiples of the 128 x BN x 64 block tile");
  if (!device_has_wgmma())
    throw std::runtime_error(
        "gemm (wgmma): needs a compute-capability 9.0 device and a build with an sm_90a cubin "
        "(FUSEDSL_CUDA_ARCHITECTURES with 90a)");
  const CUtensorMap map_a = detail::tensor_map_2d(a, K, M, Tile::BK, Tile::BM, "A");
  const CUtensorMap map_b = detail::tensor_map_2d(b, N, K, 64, Tile::BK, "B");
  auto* kernel = &detail::gemm_wgmma_kernel<In, Epi, M, N, K, Tile>;
  static const bool configured =
      allow_dynamic_smem(kernel, Tile::smem_bytes, "gemm (wgmma): raising the shared-memory limit");
  (void)configured;
  kernel<<<(M / Tile::BM) * (N / Tile::BN), Tile::threads, Tile::smem_bytes, stream>>>(map_a, map_b,
                                                                                       c, epi);
  check_launch("gemm_wgmma_kernel");
}

}  // namespace fusedsl::cuda::sm90
