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

// CUtensorMap and its enums (types only: the driver function is fetched at run time).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <fusedsl/backend/cuda/epilogue.cuh>
#include <fusedsl/backend/cuda/error.hpp>
#include <fusedsl/backend/cuda/numeric.cuh>
#include <fusedsl/backend/cuda/ptx.cuh>
#include <fusedsl/backend/cuda/wgmma.cuh>
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

// 128 x 256 blocks once there are two waves of them (H200, run 4: 8192^3 647 against 584
// TFLOP/s, the large config's FFN-up 399 against 367); 128 x 128 below that, where the wider
// blocks leave SMs idle in the last wave (the large config's Q/K/V: 349 against 400).
template <int M, int N>
inline constexpr bool wide_blocks = N % 256 == 0 && (M / 128) * (N / 256) >= 256;

namespace detail {

#if defined(FUSEDSL_SM90A_DEVICE)
__device__ inline void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(ptx::smem_address(bar)),
               "r"(count));
}
// A producer/consumer ring of S stages: full[s] completes when the producer's copies land (its
// one arrive plus the bytes), empty[s] when all `consumers` warpgroups have released the stage.
// One thread initialises; the fence makes the barriers visible to the async (TMA) proxy.
template <int S>
__device__ inline void init_ring(std::uint64_t (&full)[S], std::uint64_t (&empty)[S],
                                 unsigned consumers) {
  for (int s = 0; s < S; ++s) {
    mbar_init(&full[s], 1);
    mbar_init(&empty[s], consumers);
  }
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
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

  if (threadIdx.x == 0) init_ring(full, empty, Tile::consumers);
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
      wgmma_ss<BN, In, 1>(acc, smem_desc(a_st + k * 32, 16, 1024),
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

// A Rank-dimensional bf16/f16 tensor (dims innermost first, byte strides of the outer dims) read
// in `box`-shaped tiles with the 128-byte swizzle; `what` names the operand in errors.
template <half_type T, int Rank>
CUtensorMap tensor_map(const T* base, const cuuint64_t (&dims)[Rank],
                       const cuuint64_t (&strides)[Rank - 1], const cuuint32_t (&box)[Rank],
                       const char* what) {
  CUtensorMap map{};
  cuuint32_t element_strides[Rank];
  for (int i = 0; i < Rank; ++i) element_strides[i] = 1;
  const CUresult r = tensor_map_encoder()(
      &map,
      std::same_as<T, bf16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      Rank, const_cast<T*>(base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(std::string("sm_90 TMA: cuTensorMapEncodeTiled failed for ") + what +
                             " (CUresult " + std::to_string(int(r)) +
                             "; addresses and strides must be 16-byte aligned)");
  return map;
}

// A row-major [outer, inner] matrix read in [box_outer, box_inner] boxes.
template <half_type T>
CUtensorMap tensor_map_2d(const T* base, int inner, int outer, int box_inner, int box_outer,
                          const char* what) {
  return tensor_map<T, 2>(base, {cuuint64_t(inner), cuuint64_t(outer)},
                          {cuuint64_t(inner) * sizeof(T)},
                          {cuuint32_t(box_inner), cuuint32_t(box_outer)}, what);
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
