#pragma once
// Plain CPU loops in double: the ground truth the CUDA kernels are checked against.

#include <algorithm>
#include <cmath>
#include <vector>

namespace fusedsl::cuda::reference {

inline double gelu(double x) {  // x/2 (1 + erf(x / sqrt 2)) without its cancellation for x < 0
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
}
inline double silu(double x) {
  return x / (1.0 + std::exp(-x));
}
inline double relu(double x) {
  return x > 0.0 ? x : 0.0;
}

// c = act(scale * a b + bias) + residual; a [m,k], b [k,n], all row-major; bias/residual may be
// empty.
template <class Act>
std::vector<double> gemm(const std::vector<float>& a, const std::vector<float>& b, int m, int n,
                         int k, double scale, const std::vector<float>& bias,
                         const std::vector<float>& residual, Act act) {
  std::vector<double> c(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0.0;
      for (int p = 0; p < k; ++p)
        s += static_cast<double>(a[i * static_cast<std::size_t>(k) + p]) *
             b[p * static_cast<std::size_t>(n) + j];
      s *= scale;
      if (!bias.empty()) s += bias[j];
      s = act(s);
      if (!residual.empty()) s += residual[i * static_cast<std::size_t>(n) + j];
      c[i * static_cast<std::size_t>(n) + j] = s;
    }
  return c;
}

inline std::vector<double> softmax_rows(const std::vector<float>& x, int rows, int cols,
                                        bool log_form) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + static_cast<std::size_t>(r) * cols;
    double m = -INFINITY, s = 0.0;
    for (int c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(row[c]));
    for (int c = 0; c < cols; ++c) s += std::exp(row[c] - m);
    for (int c = 0; c < cols; ++c)
      y[static_cast<std::size_t>(r) * cols + c] =
          log_form ? row[c] - m - std::log(s) : std::exp(row[c] - m) / s;
  }
  return y;
}

// layernorm when `centre`, else rmsnorm; beta may be empty.
inline std::vector<double> norm_rows(const std::vector<float>& x, int rows, int cols,
                                     const std::vector<float>& gamma,
                                     const std::vector<float>& beta, double eps, bool centre) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + static_cast<std::size_t>(r) * cols;
    double mean = 0.0, var = 0.0;
    if (centre) {
      for (int c = 0; c < cols; ++c) mean += row[c];
      mean /= cols;
    }
    for (int c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
    const double rstd = 1.0 / std::sqrt(var / cols + eps);
    for (int c = 0; c < cols; ++c)
      y[static_cast<std::size_t>(r) * cols + c] =
          (row[c] - mean) * rstd * gamma[c] + (beta.empty() ? 0.0 : beta[c]);
  }
  return y;
}

// o[b, i, h, :] = softmax_j(scale q.k_j [j <= i + sk - sq when causal]) v_j, with kv head h /
// (heads / kv_heads). q/o are [batch, sq, heads, d] with row strides qs/os, k/v [batch, sk,
// kv_heads, d] with row strides ks/vs.
inline std::vector<double> attention(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, int batch, int heads,
                                     int kv_heads, int sq, int sk, int d, bool causal, double scale,
                                     long q_stride, long k_stride, long v_stride) {
  std::vector<double> o(static_cast<std::size_t>(batch) * sq * heads * d);
  std::vector<double> p(sk);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int kh = h / (heads / kv_heads);
      for (int i = 0; i < sq; ++i) {
        const float* qi = q.data() + (static_cast<long>(b) * sq + i) * q_stride + h * d;
        const int visible = causal ? std::min(sk, i + (sk - sq) + 1) : sk;
        double m = -INFINITY;
        for (int j = 0; j < visible; ++j) {
          const float* kj = k.data() + (static_cast<long>(b) * sk + j) * k_stride + kh * d;
          double s = 0.0;
          for (int e = 0; e < d; ++e) s += static_cast<double>(qi[e]) * kj[e];
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        double l = 0.0;
        for (int j = 0; j < visible; ++j) l += (p[j] = std::exp(p[j] - m));
        double* oi = o.data() + ((static_cast<std::size_t>(b) * sq + i) * heads + h) * d;
        for (int e = 0; e < d; ++e) {
          double acc = 0.0;
          for (int j = 0; j < visible; ++j)
            acc += p[j] * v[(static_cast<long>(b) * sk + j) * v_stride + kh * d + e];
          oi[e] = acc / l;
        }
      }
    }
  return o;
}

}  // namespace fusedsl::cuda::reference
