#pragma once
// Build settings every fusedsl header checks.
//
// IEEE special values are part of fusedsl's semantics: attention masks of -inf (or of the lowest
// float, which the kernels must keep finite), softmax rows that are entirely masked, NaN that
// propagates to the rows it touches (docs/ops.md, docs/performance.md "Special values"). The
// compiler option -ffinite-math-only, which -ffast-math includes, lets the compiler assume there
// are no infinities and no NaNs and delete the checks for them; then even finite inputs can come
// out wrong (measured: a mask of -FLT_MAX gives a fully masked row zeros instead of the mean of
// its V rows, and 10 of the 35 row and attention kernel test cases fail). With the rest of
// -ffast-math (-ffast-math -fno-finite-math-only: reassociation, reciprocal math, no signed zeros)
// those tests pass but one, the bitwise equality of a norm row computed alone and in a batch.
// The message is one logical line (joined by the backslashes), which the compiler prints whole.
// clang-format off
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__ && !defined(FUSEDSL_ALLOW_FINITE_MATH)
#error "fusedsl: -ffinite-math-only (part of -ffast-math) would drop the inf and NaN checks that \
masks and NaN propagation need; add -fno-finite-math-only after -ffast-math, or define \
FUSEDSL_ALLOW_FINITE_MATH to accept wrong results for masked and non-finite inputs"
#endif
// clang-format on

// FUSEDSL_HD marks functions that compile for the host and for CUDA devices: __host__ __device__
// under nvcc (and clang's CUDA mode), nothing for a host compiler. The op table's bodies
// (graph/ops.hpp) carry it, so the CUDA backend instantiates them with its device math policy and
// the host emulation of its kernels runs the same code.
#if defined(__CUDACC__)
#define FUSEDSL_HD __host__ __device__
#else
#define FUSEDSL_HD
#endif
