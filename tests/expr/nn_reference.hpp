#pragma once
// Hand-written transformer formulas in double over plain loops, the expected values of the nn
// tests, and a store of random weights bound by name.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../common/test_util.hpp"

namespace nnref {

using mat = std::vector<double>;  // row-major [rows, cols]

// One random f32 tensor per binding the program needs (gammas near 1), bound by name.
struct weights {
  std::map<std::string, fd::dynamic_tensor> t;

  weights(const std::vector<fd::reference::binding_spec>& specs, unsigned seed) {
    std::mt19937 gen(seed);
    for (const auto& s : specs) {
      if (s.kind != fd::graph::op_kind::param) continue;
      fd::dynamic_tensor v(s.type, s.shape);
      const bool gamma = s.name.size() >= 5 && s.name.compare(s.name.size() - 5, 5, "gamma") == 0;
      std::uniform_real_distribution<float> d(gamma ? 0.5f : -0.5f, gamma ? 1.5f : 0.5f);
      for (std::int64_t i = 0; i < s.shape.size(); ++i) v.data<float>()[i] = d(gen);
      t.emplace(s.name, std::move(v));
    }
  }
  void bind(fd::reference::evaluator& ev) {
    for (auto& [name, v] : t) ev.bind(name, v.ref());
  }
  mat get(const std::string& name) const {
    const fd::dynamic_tensor& v = t.at(name);
    return mat(v.data<float>(), v.data<float>() + v.shape().size());
  }
};

inline mat linear(const mat& x, int rows, int in, int out, const weights& w, const std::string& p,
                  bool bias = true) {
  const mat W = w.get(p + ".w");
  const mat B = bias ? w.get(p + ".b") : mat(std::size_t(out), 0.0);
  mat y(std::size_t(rows * out));
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double acc = B[std::size_t(o)];
      for (int i = 0; i < in; ++i) acc += x[std::size_t(r * in + i)] * W[std::size_t(i * out + o)];
      y[std::size_t(r * out + o)] = acc;
    }
  return y;
}

inline mat layernorm(const mat& x, int rows, int d, const weights& w, const std::string& p,
                     double eps = 1e-5) {
  const mat g = w.get(p + ".gamma"), b = w.get(p + ".beta");
  mat y(x.size());
  for (int r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int j = 0; j < d; ++j) mu += x[std::size_t(r * d + j)] / d;
    for (int j = 0; j < d; ++j) var += std::pow(x[std::size_t(r * d + j)] - mu, 2) / d;
    for (int j = 0; j < d; ++j)
      y[std::size_t(r * d + j)] =
          (x[std::size_t(r * d + j)] - mu) / std::sqrt(var + eps) * g[std::size_t(j)] +
          b[std::size_t(j)];
  }
  return y;
}

inline double gelu_tanh(double v) {
  const double pi = 3.14159265358979323846;
  return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
}

// Attention as nn::attention_options describe it, on `batch` sequences: queries from x [Lq, D]
// per sequence, keys and values from ctx [Lk, Dc]; bias(b, h, i, j) added to the scaled scores;
// query i stands at key position i + Lk - Lq; causal: keys j at or before it; window w > 0: keys
// less than w positions from it (causal: before it). scale 0: 1 / sqrt(dh).
struct score_rule {
  bool causal = false;
  double scale = 0;
  int window = 0;
};
template <class Bias>
mat attention_with(const mat& x, const mat& ctx, int batch, int Lq, int Lk, int D, int Dc, int H,
                   int Hkv, score_rule r, Bias bias, const weights& w, const std::string& p) {
  const int dh = D / H;
  const double scale = r.scale == 0 ? 1.0 / std::sqrt(double(dh)) : r.scale;
  const mat q = linear(x, batch * Lq, D, D, w, p + ".q");
  const mat k = linear(ctx, batch * Lk, Dc, Hkv * dh, w, p + ".k");
  const mat v = linear(ctx, batch * Lk, Dc, Hkv * dh, w, p + ".v");
  mat o(std::size_t(batch * Lq * D));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < H; ++h) {
      const int kv = h / (H / Hkv);
      for (int i = 0; i < Lq; ++i) {
        const int pos = i + Lk - Lq;
        const auto sees = [&](int j) {
          if (r.causal && j > pos) return false;
          return r.window <= 0 || std::abs(pos - j) < r.window;
        };
        std::vector<double> s(static_cast<std::size_t>(Lk));
        double m = -1e300;
        for (int j = 0; j < Lk; ++j) {
          double acc = 0;
          for (int d = 0; d < dh; ++d)
            acc += q[std::size_t((b * Lq + i) * D + h * dh + d)] *
                   k[std::size_t((b * Lk + j) * Hkv * dh + kv * dh + d)];
          s[std::size_t(j)] = acc * scale + bias(b, h, i, j);
          if (sees(j)) m = std::max(m, s[std::size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j < Lk; ++j) {
          s[std::size_t(j)] = sees(j) ? std::exp(s[std::size_t(j)] - m) : 0.0;
          sum += s[std::size_t(j)];
        }
        for (int d = 0; d < dh; ++d) {
          double acc = 0;
          for (int j = 0; j < Lk; ++j)
            acc += s[std::size_t(j)] / sum * v[std::size_t((b * Lk + j) * Hkv * dh + kv * dh + d)];
          o[std::size_t((b * Lq + i) * D + h * dh + d)] = acc;
        }
      }
    }
  return linear(o, batch * Lq, D, D, w, p + ".o");
}

// Multi-head attention on `batch` sequences of L rows: head h reads key/value head h / (H / Hkv);
// causal: row i sees keys j <= i.
inline mat attention(const mat& x, int batch, int L, int D, int H, int Hkv, bool causal,
                     const weights& w, const std::string& p) {
  return attention_with(
      x, x, batch, L, L, D, D, H, Hkv, {.causal = causal}, [](int, int, int, int) { return 0.0; },
      w, p);
}

template <class Act>
mat ffn(const mat& x, int rows, int D, int F, const weights& w, const std::string& p, Act act) {
  mat h = linear(x, rows, D, F, w, p + ".fc1");
  for (double& e : h) e = act(e);
  return linear(h, rows, F, D, w, p + ".fc2");
}

inline mat add(mat a, const mat& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// One transformer block on [L, D] with params under prefix p ("" or "layers.3."), GELU (tanh).
inline mat block(const mat& x, int L, int D, int H, int Hkv, int F, bool pre, bool causal,
                 const weights& w, const std::string& p) {
  auto act = [](double v) { return gelu_tanh(v); };
  if (pre) {
    const mat h =
        add(x, attention(layernorm(x, L, D, w, p + "ln1"), 1, L, D, H, Hkv, causal, w, p + "attn"));
    return add(h, ffn(layernorm(h, L, D, w, p + "ln2"), L, D, F, w, p + "ffn", act));
  }
  const mat h =
      layernorm(add(x, attention(x, 1, L, D, H, Hkv, causal, w, p + "attn")), L, D, w, p + "ln1");
  return layernorm(add(h, ffn(h, L, D, F, w, p + "ffn", act)), L, D, w, p + "ln2");
}

}  // namespace nnref
