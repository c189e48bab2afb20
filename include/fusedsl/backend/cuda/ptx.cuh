#pragma once
// Thin wrappers over the sm_80+ instructions the tiled kernels use: cp.async, ldmatrix, mma.sync.
// PTX ISA 8.x, sections "cp.async", "ldmatrix" and "mma.m16n8k16".

#include <cstdint>
#include <fusedsl/backend/cuda/numeric.cuh>

namespace fusedsl::cuda::ptx {

__device__ inline std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous global->shared copy that bypasses L1 (.cg).
__device__ inline void cp_async_16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_address(smem)), "l"(gmem));
}

__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most `Pending` committed groups are still in flight.
template <int Pending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Four 8x8 16-bit matrices: lane l gives the row address of matrix l/8; lane l receives row l/4,
// columns 2(l%4) and 2(l%4)+1 of each.
__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(smem_row)));
}

// Four 8x8 16-bit matrices, transposed on load: lane l gives the row address of matrix l/8.
__device__ inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(smem_row)));
}

// D = A(16x16, row) * B(16x8, col) + D, f32 accumulators; T is bf16 or f16.
template <half_type T>
__device__ inline void mma_16816(float (&d)[4], const std::uint32_t (&a)[4],
                                 const std::uint32_t (&b)[2]) {
  if constexpr (std::same_as<T, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

}  // namespace fusedsl::cuda::ptx
