#pragma once
// Row kernels over a rows x cols f32 matrix (row-major, leading dimensions ldx / ldy; y may be x):
// softmax, log_softmax, layernorm, rmsnorm. Each row is reduced in vector lanes and then across
// lanes, so results are deterministic but summed in a different order than a plain loop.
//
// Special rows (the project's definitions):
//   softmax of a row that is entirely -inf (fully masked) is all zeros; log_softmax of it is all
//   -inf. A NaN anywhere in a row makes that row NaN. A +inf entry gives NaN (inf - inf).
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/vmath.hpp"

namespace fusedsl::cpu::kernels {

namespace detail {

inline void check_rows(const char* op, std::ptrdiff_t rows, std::ptrdiff_t cols, std::ptrdiff_t ldx,
                       std::ptrdiff_t ldy) {
  if (rows < 0 || cols < 0)
    throw std::invalid_argument(std::string(op) + ": rows and cols must be >= 0, got " +
                                std::to_string(rows) + "x" + std::to_string(cols));
  if (ldx < cols || ldy < cols)
    throw std::invalid_argument(std::string(op) + ": leading dimension less than cols " +
                                std::to_string(cols));
}

template <class Arch>
float row_max(const float* x, std::ptrdiff_t n) {
  using V = vec_t<Arch>;
  constexpr int W = simd<Arch>::width;
  V m(-std::numeric_limits<float>::infinity());
  std::ptrdiff_t j = 0;
  for (; j + W <= n; j += W) m = maximum(m, simd<Arch>::load(x + j));
  float r = simd<Arch>::reduce_max(m);
  for (int t = int(n - j); t > 0; --t, ++j) r = maximum(r, x[j]);  // the tail: < W
  return r;
}

// y = exp(x - shift) (y may be null: not stored), returns the sum of exp(x - shift); shift is the
// row maximum, so every argument is <= 0 (or NaN). Vector lanes take 2^((x - shift) log2(e)): a
// multiply more, three operations fewer than exp (vmath.hpp).
template <class Arch>
float exp_shifted(const float* x, float shift, float* y, std::ptrdiff_t n) {
  using V = vec_t<Arch>;
  constexpr int W = simd<Arch>::width;
  V s(0.0f);
  const V sh(shift), l2e = V(float(log2e));
  std::ptrdiff_t j = 0;
  for (; j + W <= n; j += W) {
    const V e = vexp2_nonpositive((simd<Arch>::load(x + j) - sh) * l2e);
    if (y) simd<Arch>::store(y + j, e);
    s = s + e;
  }
  float r = simd<Arch>::reduce_add(s);
  for (int t = int(n - j); t > 0; --t, ++j) {  // the tail: < W
    const float e = vexp(x[j] - shift);
    if (y) y[j] = e;
    r += e;
  }
  return r;
}

// sum of (x - c)^2
template <class Arch>
float row_sum_sq(const float* x, float c, std::ptrdiff_t n) {
  using V = vec_t<Arch>;
  constexpr int W = simd<Arch>::width;
  V s(0.0f);
  const V cv(c);
  std::ptrdiff_t j = 0;
  for (; j + W <= n; j += W) {
    const V d = simd<Arch>::load(x + j) - cv;
    s = fmadd(d, d, s);
  }
  float r = simd<Arch>::reduce_add(s);
  for (int t = int(n - j); t > 0; --t, ++j) r = fmadd(x[j] - c, x[j] - c, r);  // the tail: < W
  return r;
}

// layernorm reduces a group of rows side by side: one short row is two chains of dependent adds,
// lane reductions and divisions, which leave the vector unit idle; eight rows' independent chains
// fill it (8 measured best on AVX-512 and AVX2; rmsnorm, one pass, gained nothing from it; see
// docs/kernels.md). Long rows take smaller groups (layernorm_rows): each of the three passes
// streams the group's rows, and 8 rows of 2048 floats (8 KiB apart, so in the same L1 sets) with
// their 8 output rows overflow the sets' ways; 4 rows from 257 columns, 2 from 513
// (docs/design.md, "Kernel choices"). Each row is summed in
// the same order whatever the group size, so a row's result does not depend on the rows reduced
// with it. The unroll pragmas keep the per-row accumulators in registers (without them GCC 12
// spills them to the stack).

// mean[r] = mean of x[r, :n] for R rows x[r] = x + r * ldx.
template <class Arch, int R>
void rows_mean(const float* x, std::ptrdiff_t ldx, std::ptrdiff_t n, float* mean) {
  using V = vec_t<Arch>;
  constexpr int W = simd<Arch>::width;
  V s[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) s[r] = V(0.0f);
  // The body's end computed up front, not carried out of its loop: with the loop's own j, GCC 12
  // (SSE2, R = 1, constant n) misreads the tail loop's trip count and warns of overflow.
  const std::ptrdiff_t body = n - n % W;
  for (std::ptrdiff_t j = 0; j < body; j += W)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) s[r] = s[r] + simd<Arch>::load(x + r * ldx + j);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float t = simd<Arch>::reduce_add(s[r]);
    for (std::ptrdiff_t i = body; i < n; ++i) t += x[r * ldx + i];
    mean[r] = t / float(n);
  }
}

// inv[r] = 1 / sqrt(mean of (x[r, :n] - c[r])^2 + eps).
template <class Arch, int R>
void rows_inv_rms(const float* x, std::ptrdiff_t ldx, std::ptrdiff_t n, const float* c, float eps,
                  float* inv) {
  using V = vec_t<Arch>;
  constexpr int W = simd<Arch>::width;
  V s[R], cv[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) s[r] = V(0.0f), cv[r] = V(c[r]);
  const std::ptrdiff_t body = n - n % W;  // as in rows_mean
  for (std::ptrdiff_t j = 0; j < body; j += W)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V d = simd<Arch>::load(x + r * ldx + j) - cv[r];
      s[r] = fmadd(d, d, s[r]);
    }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float t = simd<Arch>::reduce_add(s[r]);
    for (std::ptrdiff_t i = body; i < n; ++i) {
      const float d = x[r * ldx + i] - c[r];
      t = fmadd(d, d, t);
    }
    inv[r] = 1.0f / std::sqrt(t / float(n) + eps);
  }
}

// y = (x - c) * s * gamma + beta (gamma, beta nullable).
template <class Arch>
void normalise(const float* x, float c, float s, const float* gamma, const float* beta, float* y,
               std::ptrdiff_t n) {
  using V = vec_t<Arch>;
  constexpr int W = simd<Arch>::width;
  const V cv(c), sv(s);
  std::ptrdiff_t j = 0;
  for (; j + W <= n; j += W) {
    V v = (simd<Arch>::load(x + j) - cv) * sv;
    if (gamma) v = v * simd<Arch>::load(gamma + j);
    if (beta) v = v + simd<Arch>::load(beta + j);
    simd<Arch>::store(y + j, v);
  }
  for (int t = int(n - j); t > 0; --t, ++j) {  // the tail: < W
    float v = (x[j] - c) * s;
    if (gamma) v *= gamma[j];
    if (beta) v += beta[j];
    y[j] = v;
  }
}

// y[r] = (x[r] - c[r]) * s[r] * gamma + beta for R rows (gamma, beta nullable), sharing the
// gamma and beta loads. The multiply-add is written out: left to GCC (-ffp-contract=fast), the
// scalar path fused it in some code paths of a loop and not in others, chosen by address, so a
// row's result depended on where it lay (row_test's bitwise test caught it).
template <class Arch, int R>
void rows_normalise(const float* x, std::ptrdiff_t ldx, const float* c, const float* s,
                    const float* gamma, const float* beta, float* y, std::ptrdiff_t ldy,
                    std::ptrdiff_t n) {
  auto rows = [&]<class S>(S, std::ptrdiff_t j) {
    using V = typename S::vec;
    const V g = gamma ? S::load(gamma + j) : V(1.0f), b = beta ? S::load(beta + j) : V(0.0f);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      S::store(y + r * ldy + j, fmadd((S::load(x + r * ldx + j) - V(c[r])) * V(s[r]), g, b));
  };
  constexpr int W = simd<Arch>::width;
  std::ptrdiff_t j = 0;
  for (; j + W <= n; j += W) rows(simd<Arch>{}, j);
  for (int t = int(n - j); t > 0; --t, ++j) rows(simd<scalar_arch>{}, j);  // the tail: < W
}

}  // namespace detail

// y[r, :] = softmax(x[r, :]) = exp(x - max) / sum exp(x - max).
template <class Arch = native_arch>
void softmax_rows(std::ptrdiff_t rows, std::ptrdiff_t cols, const float* x, std::ptrdiff_t ldx,
                  float* y, std::ptrdiff_t ldy) {
  detail::check_rows("softmax", rows, cols, ldx, ldy);
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    float* yr = y + r * ldy;
    const float m = detail::row_max<Arch>(xr, cols);
    if (m == -std::numeric_limits<float>::infinity()) {  // fully masked row
      for (std::ptrdiff_t j = 0; j < cols; ++j) yr[j] = 0.0f;
      continue;
    }
    const float inv = 1.0f / detail::exp_shifted<Arch>(xr, m, yr, cols);
    detail::normalise<Arch>(yr, 0.0f, inv, nullptr, nullptr, yr, cols);
  }
}

// y[r, :] = x - max - log(sum exp(x - max)).
template <class Arch = native_arch>
void log_softmax_rows(std::ptrdiff_t rows, std::ptrdiff_t cols, const float* x, std::ptrdiff_t ldx,
                      float* y, std::ptrdiff_t ldy) {
  detail::check_rows("log_softmax", rows, cols, ldx, ldy);
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    float* yr = y + r * ldy;
    const float m = detail::row_max<Arch>(xr, cols);
    if (m == -std::numeric_limits<float>::infinity()) {
      for (std::ptrdiff_t j = 0; j < cols; ++j) yr[j] = -std::numeric_limits<float>::infinity();
      continue;
    }
    const float lse = m + std::log(detail::exp_shifted<Arch>(xr, m, nullptr, cols));
    detail::normalise<Arch>(xr, lse, 1.0f, nullptr, nullptr, yr, cols);
  }
}

// y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance, two passes for stability.
template <class Arch = native_arch>
void layernorm_rows(std::ptrdiff_t rows, std::ptrdiff_t cols, const float* x, std::ptrdiff_t ldx,
                    const float* gamma, const float* beta, float eps, float* y,
                    std::ptrdiff_t ldy) {
  detail::check_rows("layernorm", rows, cols, ldx, ldy);
  if (cols == 0) return;
  auto group = [&]<int R>(std::ptrdiff_t r0) {
    const float* xr = x + r0 * ldx;
    float mean[R], inv[R];
    detail::rows_mean<Arch, R>(xr, ldx, cols, mean);
    detail::rows_inv_rms<Arch, R>(xr, ldx, cols, mean, eps, inv);
    detail::rows_normalise<Arch, R>(xr, ldx, mean, inv, gamma, beta, y + r0 * ldy, ldy, cols);
  };
  std::ptrdiff_t r = 0;
  auto groups_of = [&]<int R>() {
    for (; r + R <= rows; r += R) group.template operator()<R>(r);
  };
  if (cols <= 256)
    groups_of.template operator()<8>();
  else if (cols <= 512)
    groups_of.template operator()<4>();
  else
    groups_of.template operator()<2>();
  for (; r < rows; ++r) group.template operator()<1>(r);
}

// y = x / sqrt(mean(x^2) + eps) * gamma (Zhang & Sennrich 2019, eq. 4).
template <class Arch = native_arch>
void rmsnorm_rows(std::ptrdiff_t rows, std::ptrdiff_t cols, const float* x, std::ptrdiff_t ldx,
                  const float* gamma, float eps, float* y, std::ptrdiff_t ldy) {
  detail::check_rows("rmsnorm", rows, cols, ldx, ldy);
  if (cols == 0) return;
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    const float ms = detail::row_sum_sq<Arch>(xr, 0.0f, cols) / float(cols);
    detail::normalise<Arch>(xr, 0.0f, 1.0f / std::sqrt(ms + eps), gamma, nullptr, y + r * ldy,
                            cols);
  }
}

}  // namespace fusedsl::cpu::kernels
