#pragma once
// A plain Eigen implementation of fusedsl::models::transformer (post-LN or pre-LN blocks, GELU-tanh
// FFN, multi-head attention, causal or not, f32): what an Eigen user writes by hand. One Eigen
// statement per step, nothing fused across steps, buffers allocated once at construction, Eigen's
// own GEMM and vectorised exp/tanh; one thread, unless the program is built with OpenMP and
// Eigen::setNbThreads gives the GEMMs more. It is the plain unfused Eigen baseline of the CPU
// targets: model_bench reports the fused executor's speedup over it next to the one over the
// reference backend (an op-by-op interpreter, much slower), benchmarks/race races it against the
// executor and other runtimes, and tests/backend/cpu/executor checks it against the reference
// backend.
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "fusedsl/models/transformer.hpp"

namespace fusedsl_bench {

// The transformers this implementation covers: f32 models::transformer stacks, post-LN or pre-LN,
// causal or not.
template <class Model>
struct eigen_transformer_traits {
  static constexpr bool f32_transformer = false;
};
template <std::int64_t S, std::int64_t D, int H, std::int64_t F, int L, class Norm, bool Causal>
struct eigen_transformer_traits<fusedsl::models::transformer<S, D, H, F, L, Norm, Causal, float>> {
  static constexpr bool f32_transformer = true;
  static constexpr bool pre_ln = std::is_same_v<Norm, fusedsl::nn::pre_ln>;
  static constexpr bool causal = Causal;
};

template <class Model>
class eigen_transformer {
  static_assert(eigen_transformer_traits<Model>::f32_transformer,
                "eigen_transformer: only f32 models::transformer stacks");
  static constexpr bool pre_ln = eigen_transformer_traits<Model>::pre_ln;
  static constexpr bool causal = eigen_transformer_traits<Model>::causal;

 public:
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using row = Eigen::RowVectorXf;
  using col = Eigen::VectorXf;
  static constexpr Eigen::Index seq = Model::seq, d = Model::d_model, hidden = Model::hidden;
  static constexpr int heads = Model::heads, layers = Model::layers;
  static constexpr Eigen::Index dh = d / heads;

  // `param(name)` returns a pointer to the f32 values of the binding `name`, row-major as the
  // executor takes them (a linear's weight is [in, out]).
  template <class Lookup>
  explicit eigen_transformer(Lookup&& param) {
    for (int l = 0; l < layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      layer w;
      w.wq = matrix_param(param, p + "attn.q.w", d, d);
      w.wk = matrix_param(param, p + "attn.k.w", d, d);
      w.wv = matrix_param(param, p + "attn.v.w", d, d);
      w.wo = matrix_param(param, p + "attn.o.w", d, d);
      w.w1 = matrix_param(param, p + "ffn.fc1.w", d, hidden);
      w.w2 = matrix_param(param, p + "ffn.fc2.w", hidden, d);
      w.bq = row_param(param, p + "attn.q.b", d);
      w.bk = row_param(param, p + "attn.k.b", d);
      w.bv = row_param(param, p + "attn.v.b", d);
      w.bo = row_param(param, p + "attn.o.b", d);
      w.b1 = row_param(param, p + "ffn.fc1.b", hidden);
      w.b2 = row_param(param, p + "ffn.fc2.b", d);
      w.g1 = row_param(param, p + "ln1.gamma", d);
      w.beta1 = row_param(param, p + "ln1.beta", d);
      w.g2 = row_param(param, p + "ln2.gamma", d);
      w.beta2 = row_param(param, p + "ln2.beta", d);
      w_.push_back(std::move(w));
    }
  }

  // y = the model applied to x (both seq x d_model, row-major).
  void run(const float* x, float* y) {
    x_ = Eigen::Map<const mat>(x, seq, d);
    for (const layer& w : w_) {
      if constexpr (pre_ln) {  // x += attn(LN1(x)); x += ffn(LN2(x))
        layernorm(x_, w.g1, w.beta1, h_);
        attention(h_, w);
        x_ += a_;
        layernorm(x_, w.g2, w.beta2, h_);
        ffn(h_, w);
        x_ += a_;
      } else {  // h = LN1(x + attn(x)); x = LN2(h + ffn(h))
        attention(x_, w);
        a_ += x_;
        layernorm(a_, w.g1, w.beta1, h_);
        ffn(h_, w);
        a_ += h_;
        layernorm(a_, w.g2, w.beta2, x_);
      }
    }
    Eigen::Map<mat>(y, seq, d) = x_;
  }

 private:
  struct layer {
    mat wq, wk, wv, wo, w1, w2;
    row bq, bk, bv, bo, b1, b2, g1, beta1, g2, beta2;
  };

  template <class Lookup>
  static mat matrix_param(Lookup& param, const std::string& name, Eigen::Index r, Eigen::Index c) {
    return Eigen::Map<const mat>(param(name), r, c);
  }
  template <class Lookup>
  static row row_param(Lookup& param, const std::string& name, Eigen::Index n) {
    return Eigen::Map<const row>(param(name), n);
  }

  // a_ = the attention sublayer applied to in (output projection and its bias included).
  void attention(const mat& in, const layer& w) {
    const float scale = 1.0f / std::sqrt(float(dh));
    q_.noalias() = in * w.wq;
    q_.rowwise() += w.bq;
    k_.noalias() = in * w.wk;
    k_.rowwise() += w.bk;
    v_.noalias() = in * w.wv;
    v_.rowwise() += w.bv;
    for (int h = 0; h < heads; ++h) {
      s_.noalias() = q_.middleCols(h * dh, dh) * k_.middleCols(h * dh, dh).transpose();
      s_ *= scale;
      if constexpr (causal)  // query i sees keys 0..i
        s_.template triangularView<Eigen::StrictlyUpper>().setConstant(
            -std::numeric_limits<float>::infinity());
      rmax_ = s_.rowwise().maxCoeff();
      s_.colwise() -= rmax_;
      s_ = s_.array().exp().matrix();
      rsum_ = s_.rowwise().sum();
      s_.array().colwise() /= rsum_.array();
      o_.middleCols(h * dh, dh).noalias() = s_ * v_.middleCols(h * dh, dh);
    }
    a_.noalias() = o_ * w.wo;
    a_.rowwise() += w.bo;
  }

  // a_ = fc2(gelu_tanh(fc1(in))).
  void ffn(const mat& in, const layer& w) {
    f_.noalias() = in * w.w1;
    f_.rowwise() += w.b1;
    constexpr float c = 0.7978845608028654f;  // sqrt(2 / pi)
    f_.array() =
        0.5f * f_.array() * (1.0f + (c * (f_.array() + 0.044715f * f_.array().cube())).tanh());
    a_.noalias() = f_ * w.w2;
    a_.rowwise() += w.b2;
  }

  // out = gamma * (in - mean) / sqrt(var + 1e-5) + beta, per row (biased variance).
  void layernorm(const mat& in, const row& gamma, const row& beta, mat& out) {
    mean_ = in.rowwise().mean();
    out = in.colwise() - mean_;
    inv_std_ = out.array().square().rowwise().mean().matrix();
    inv_std_ = (inv_std_.array() + 1e-5f).rsqrt().matrix();
    out.array().colwise() *= inv_std_.array();
    out.array().rowwise() *= gamma.array();
    out.rowwise() += beta;
  }

  std::vector<layer> w_;
  mat x_ = mat(seq, d), q_ = mat(seq, d), k_ = mat(seq, d), v_ = mat(seq, d), o_ = mat(seq, d),
      s_ = mat(seq, seq), a_ = mat(seq, d), h_ = mat(seq, d), f_ = mat(seq, hidden);
  col rmax_ = col(seq), rsum_ = col(seq), mean_ = col(seq), inv_std_ = col(seq);
};

}  // namespace fusedsl_bench
