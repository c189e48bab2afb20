#pragma once
// The GEMM problems of the gemm_amx tests (amx_test.cpp, amx_tiles_test.cpp): operands in the
// kernel's storage, the double product of their bf16-rounded values, and a run of gemm_amx.
// First: it includes the intrinsics' headers with GCC 12's false uninitialised warnings silenced
// (kernels/simd.hpp), which Eigen would otherwise include first.
#include "fusedsl/backend/cpu/kernels/amx.hpp"
// Then the rest.
#include <Eigen/Core>
#include <vector>

#include "reference_activation.hpp"
#include "test_util.hpp"

namespace fusedsl_test::amx {

namespace k = fusedsl::cpu::kernels;

inline float bf16_round(float x) {
  return k::from_bf16(k::to_bf16(x));
}

using matd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// One problem: operands in the kernel's storage (with padded leading dimensions), and the double
// product of their bf16-rounded values with its error scale, computed by Eigen.
struct problem {
  std::ptrdiff_t m, n, kk;
  bool trans_a, trans_b;
  std::ptrdiff_t lda, ldb, ldc;
  std::vector<float> a, b, bias, res;
  matd product, magnitude;  // sum_p A B, and sum_p |A B|, on the rounded operands

  problem(std::ptrdiff_t m_, std::ptrdiff_t n_, std::ptrdiff_t k_, bool ta = false, bool tb = false,
          unsigned seed = 1)
      : m(m_), n(n_), kk(k_), trans_a(ta), trans_b(tb) {
    lda = (ta ? m : kk) + 3;
    ldb = (tb ? kk : n) + 5;
    ldc = n + 2;
    a = random_floats(std::size_t((ta ? kk : m) * lda), seed);
    b = random_floats(std::size_t((tb ? n : kk) * ldb), seed + 1);
    bias = random_floats(std::size_t(n), seed + 2);
    res = random_floats(std::size_t(m * ldc), seed + 3);
    update_reference();
  }
  float A(std::ptrdiff_t i, std::ptrdiff_t p) const {
    return trans_a ? a[std::size_t(p * lda + i)] : a[std::size_t(i * lda + p)];
  }
  float B(std::ptrdiff_t p, std::ptrdiff_t j) const {
    return trans_b ? b[std::size_t(j * ldb + p)] : b[std::size_t(p * ldb + j)];
  }
  // The operands as doubles, bf16-rounded (rounded = true) or as stored.
  matd a_matrix(bool rounded) const {
    matd x(m, kk);
    for (std::ptrdiff_t i = 0; i < m; ++i)
      for (std::ptrdiff_t p = 0; p < kk; ++p) x(i, p) = rounded ? bf16_round(A(i, p)) : A(i, p);
    return x;
  }
  matd b_matrix(bool rounded) const {
    matd x(kk, n);
    for (std::ptrdiff_t p = 0; p < kk; ++p)
      for (std::ptrdiff_t j = 0; j < n; ++j) x(p, j) = rounded ? bf16_round(B(p, j)) : B(p, j);
    return x;
  }
  void update_reference() {
    const matd ar = a_matrix(true), br = b_matrix(true);
    product = ar * br;
    magnitude = ar.cwiseAbs() * br.cwiseAbs();
  }
  // Reference C(i, j) through the epilogue, in double.
  double want(std::ptrdiff_t i, std::ptrdiff_t j, const k::gemm_epilogue& ep) const {
    double x = ep.scale * product(i, j) + (ep.bias ? ep.bias[j] : 0.0);
    x = fusedsl_test::reference_activation(ep.act, x);
    if (ep.residual) x += ep.residual[i * ep.ld_residual + j];
    return x;
  }
};

// Runs gemm_amx; C starts filled with 7 so untouched columns past n can be checked.
template <class OutT>
std::vector<OutT> run(const problem& pr, const k::gemm_epilogue& ep, k::amx_mode mode,
                      k::thread_pool* pool = nullptr) {
  std::vector<k::bf16_bits> packed(k::packed_b_bf16_elements(pr.kk, pr.n));
  const auto pb = k::pack_b_bf16(pr.kk, pr.n, pr.b.data(), pr.ldb, pr.trans_b, packed.data());
  std::vector<k::bf16_bits> ws(k::gemm_amx_workspace_elements(pr.m, pr.kk));
  std::vector<OutT> c(std::size_t(pr.m * pr.ldc), OutT(7));
  k::gemm_amx(pr.m, pr.n, pr.kk, pr.a.data(), pr.lda, pr.trans_a, pb, c.data(), pr.ldc, ep,
              ws.data(), pool, mode);
  return c;
}

}  // namespace fusedsl_test::amx
