#pragma once
// A post-LN transformer encoder stack in bf16, composed two ways from the same weights:
//  fused:   GEMMs with fused epilogues, flash attention, layernorm: 7 launches per layer, 5 when
//           d_model <= 256 lets the layernorms join the GEMM epilogues;
//  unfused: cuBLAS GEMMs and separate bias / activation / residual / softmax kernels (15 per
//  layer),
//           the way a framework without fusion runs it.
// Each way is a list of launches in a graph_runner, so it runs eagerly or as one CUDA graph.

#include <cmath>
#include <fusedsl/backend/cuda/cuda.cuh>
#include <span>
#include <vector>

#include "bench_util.hpp"
#include "cuda_test_util.hpp"
#include "reference.hpp"

namespace fusedsl::cuda::bench {

// Separate elementwise kernels of the unfused baseline.
template <int Cols>
struct add_bias_rows {
  bf16* y;
  const bf16* bias;
  __device__ void operator()(long i) const {
    y[i] = from_f32<bf16>(to_f32(y[i]) + to_f32(bias[i % Cols]));
  }
};
struct add_inplace {
  bf16* y;
  const bf16* x;
  __device__ void operator()(long i) const { y[i] = from_f32<bf16>(to_f32(y[i]) + to_f32(x[i])); }
};
struct gelu_inplace {
  bf16* y;
  __device__ void operator()(long i) const {
    y[i] = from_f32<bf16>(apply_op<graph::op_kind::gelu_erf>(to_f32(y[i])));
  }
};

template <int L, int D, int H, int F, int Layers, int AttnBlockM = 64>
class transformer {
 public:
  static constexpr int DH = D / H;
  static_assert(D % H == 0, "transformer: d_model must be a multiple of heads");

  struct weights {
    bf16 *wqkv, *bqkv, *wo, *bo, *g1, *be1, *w1, *b1, *w2, *b2, *g2, *be2;
  };
  struct activations {
    bf16 *qkv, *attn, *h, *x1, *f, *h2, *scores;
    bf16* out[Layers];
  };

  static constexpr double flops_per_call() {
    const double gemm = 2.0 * L * D * (3.0 * D + D + 2.0 * F);
    return Layers * (gemm + 4.0 * L * static_cast<double>(L) * D);
  }

  transformer(cudaStream_t stream, std::uint32_t seed) : stream_(stream), arena_(arena_bytes()) {
    testing::rng().seed(seed);
    x_ = upload(L * D, host_x_, -1.0f, 1.0f);
    for (int l = 0; l < Layers; ++l) {
      auto& w = w_[l];
      auto& h = host_w_[l];
      const float sd = 1.0f / std::sqrt(static_cast<float>(D)),
                  sf = 1.0f / std::sqrt(static_cast<float>(F));
      w.wqkv = upload(D * 3 * D, h.wqkv, -sd, sd);
      w.bqkv = upload(3 * D, h.bqkv, -0.1f, 0.1f);
      w.wo = upload(D * D, h.wo, -sd, sd);
      w.bo = upload(D, h.bo, -0.1f, 0.1f);
      w.g1 = upload(D, h.g1, 0.8f, 1.2f);
      w.be1 = upload(D, h.be1, -0.1f, 0.1f);
      w.w1 = upload(D * F, h.w1, -sd, sd);
      w.b1 = upload(F, h.b1, -0.1f, 0.1f);
      w.w2 = upload(F * D, h.w2, -sf, sf);
      w.b2 = upload(D, h.b2, -0.1f, 0.1f);
      w.g2 = upload(D, h.g2, 0.8f, 1.2f);
      w.be2 = upload(D, h.be2, -0.1f, 0.1f);
    }
    fused_act_ = carve_activations();
    unfused_act_ = carve_activations();
    check(cudaStreamSynchronize(stream_), "transformer: weight upload");
  }

  // 7 launches per layer; the first layer reads the input, each later one the previous output.
  void add_fused(graph_runner& run) const {
    const activations a = fused_act_;
    for (int l = 0; l < Layers; ++l) {
      const weights w = w_[l];
      const bf16* x = l == 0 ? x_ : a.out[l - 1];
      bf16* y = a.out[l];
      run.add("qkv", [=](cudaStream_t s) {
        epilogue<bf16, void, true> e;
        e.bias = w.bqkv;
        gemm<L, 3 * D, D, bf16>(s, x, w.wqkv, a.qkv, e);
      });
      run.add("attention", [=](cudaStream_t s) {
        attention_args<bf16> args;
        args.q = a.qkv, args.k = a.qkv + D, args.v = a.qkv + 2 * D, args.o = a.attn;
        args.q_row_stride = args.k_row_stride = args.v_row_stride = 3 * D;
        args.o_row_stride = D;
        args.scale = 1.0f / std::sqrt(static_cast<float>(DH));
        flash_attention<bf16, DH, 1, H, H, L, L, false, true, AttnBlockM>(s, args);
      });
      // Rows of at most 256 fit one block: the layernorm joins the GEMM's epilogue.
      constexpr bool ln_in_gemm = D <= 256;
      if constexpr (ln_in_gemm) {
        run.add("out_proj+ln1", [=](cudaStream_t s) {
          epilogue<bf16, void, true, true> e;
          e.bias = w.bo, e.residual = x;
          gemm_layernorm<L, D, D, bf16>(s, a.attn, w.wo, a.x1, e, w.g1, w.be1);
        });
      } else {
        run.add("out_proj", [=](cudaStream_t s) {
          epilogue<bf16, void, true, true> e;
          e.bias = w.bo, e.residual = x;
          gemm<L, D, D, bf16>(s, a.attn, w.wo, a.h, e);
        });
        run.add("ln1", [=](cudaStream_t s) {
          row_params p;
          p.gamma = w.g1, p.beta = w.be1;
          launch_row<row_op::layernorm, L, D>(s, a.h, a.x1, p);
        });
      }
      run.add("ffn1", [=](cudaStream_t s) {
        epilogue<bf16, op<graph::op_kind::gelu_erf>, true> e;
        e.bias = w.b1;
        gemm<L, F, D, bf16>(s, a.x1, w.w1, a.f, e);
      });
      if constexpr (ln_in_gemm) {
        run.add("ffn2+ln2", [=](cudaStream_t s) {
          epilogue<bf16, void, true, true> e;
          e.bias = w.b2, e.residual = a.x1;
          gemm_layernorm<L, D, F, bf16>(s, a.f, w.w2, y, e, w.g2, w.be2);
        });
      } else {
        run.add("ffn2", [=](cudaStream_t s) {
          epilogue<bf16, void, true, true> e;
          e.bias = w.b2, e.residual = a.x1;
          gemm<L, D, F, bf16>(s, a.f, w.w2, a.h2, e);
        });
        run.add("ln2", [=](cudaStream_t s) {
          row_params p;
          p.gamma = w.g2, p.beta = w.be2;
          launch_row<row_op::layernorm, L, D>(s, a.h2, y, p);
        });
      }
    }
  }

  // 15 launches per layer: cuBLAS for every product, one kernel per elementwise step.
  void add_unfused(graph_runner& run, const cublas_api& cb) const {
    const activations a = unfused_act_;
    const cublas_api* c = &cb;
    for (int l = 0; l < Layers; ++l) {
      const weights w = w_[l];
      const bf16* x = l == 0 ? x_ : a.out[l - 1];
      bf16* y = a.out[l];
      run.add("qkv",
              [=](cudaStream_t) { c->gemm_bf16(L, 3 * D, D, x, D, w.wqkv, 3 * D, a.qkv, 3 * D); });
      run.add("qkv_bias", [=](cudaStream_t s) {
        launch_loop<static_cast<long>(L) * 3 * D>(s, add_bias_rows<3 * D>{a.qkv, w.bqkv});
      });
      // scores_h = scale Q_h K_h^T, row-major [L, L] per head (column-major: K_h^T^T Q_h^T).
      run.add("scores", [=](cudaStream_t) {
        c->gemm_bf16_batched(CUBLAS_OP_T, CUBLAS_OP_N, L, L, DH,
                             1.0f / std::sqrt(static_cast<float>(DH)), a.qkv + D, 3 * D, DH, a.qkv,
                             3 * D, DH, a.scores, L, static_cast<long long>(L) * L, H);
      });
      run.add("softmax", [=](cudaStream_t s) {
        launch_row<row_op::softmax, H * L, L>(s, a.scores, a.scores);
      });
      // attn_h = P_h V_h into columns h*DH of attn (column-major: V_h^T P_h^T).
      run.add("pv", [=](cudaStream_t) {
        c->gemm_bf16_batched(CUBLAS_OP_N, CUBLAS_OP_N, DH, L, L, 1.0f, a.qkv + 2 * D, 3 * D, DH,
                             a.scores, L, static_cast<long long>(L) * L, a.attn, D, DH, H);
      });
      run.add("out_proj", [=](cudaStream_t) { c->gemm_bf16(L, D, D, a.attn, D, w.wo, D, a.h, D); });
      run.add("out_bias", [=](cudaStream_t s) {
        launch_loop<static_cast<long>(L) * D>(s, add_bias_rows<D>{a.h, w.bo});
      });
      run.add("residual1", [=](cudaStream_t s) {
        launch_loop<static_cast<long>(L) * D>(s, add_inplace{a.h, x});
      });
      run.add("ln1", [=](cudaStream_t s) {
        row_params p;
        p.gamma = w.g1, p.beta = w.be1;
        launch_row<row_op::layernorm, L, D>(s, a.h, a.x1, p);
      });
      run.add("ffn1", [=](cudaStream_t) { c->gemm_bf16(L, F, D, a.x1, D, w.w1, F, a.f, F); });
      run.add("ffn1_bias", [=](cudaStream_t s) {
        launch_loop<static_cast<long>(L) * F>(s, add_bias_rows<F>{a.f, w.b1});
      });
      run.add("gelu",
              [=](cudaStream_t s) { launch_loop<static_cast<long>(L) * F>(s, gelu_inplace{a.f}); });
      run.add("ffn2", [=](cudaStream_t) { c->gemm_bf16(L, D, F, a.f, F, w.w2, D, a.h2, D); });
      run.add("ffn2_bias", [=](cudaStream_t s) {
        launch_loop<static_cast<long>(L) * D>(s, add_bias_rows<D>{a.h2, w.b2});
      });
      run.add("residual2", [=](cudaStream_t s) {
        launch_loop<static_cast<long>(L) * D>(s, add_inplace{a.h2, a.x1});
      });
      run.add("ln2", [=](cudaStream_t s) {
        row_params p;
        p.gamma = w.g2, p.beta = w.be2;
        launch_row<row_op::layernorm, L, D>(s, a.h2, y, p);
      });
    }
  }

  [[nodiscard]] std::vector<double> fused_output() const {
    return download(fused_act_.out[Layers - 1]);
  }
  [[nodiscard]] std::vector<double> unfused_output() const {
    return download(unfused_act_.out[Layers - 1]);
  }
  void poison_outputs() const {
    check(cudaMemsetAsync(fused_act_.out[Layers - 1], 0xff, sizeof(bf16) * L * D, stream_),
          "poison");
    check(cudaMemsetAsync(unfused_act_.out[Layers - 1], 0xff, sizeof(bf16) * L * D, stream_),
          "poison");
  }

  // The same stack in double on the CPU, from the same (bf16-rounded) input and weights.
  [[nodiscard]] std::vector<double> cpu_reference() const {
    std::vector<float> x = host_x_;
    auto id = [](double v) { return v; };
    auto to_f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    for (int l = 0; l < Layers; ++l) {
      const auto& w = host_w_[l];
      const auto qkv = to_f(reference::gemm(x, w.wqkv, L, 3 * D, D, 1.0, w.bqkv, {}, id));
      std::vector<float> k(qkv.begin() + D, qkv.end()), v(qkv.begin() + 2 * D, qkv.end());
      const auto attn = to_f(reference::attention(
          qkv, k, v, 1, H, H, L, L, DH, false, 1.0 / std::sqrt(double(DH)), 3 * D, 3 * D, 3 * D));
      const auto h = to_f(reference::gemm(attn, w.wo, L, D, D, 1.0, w.bo, x, id));
      const auto x1 = to_f(reference::norm_rows(h, L, D, w.g1, w.be1, 1e-5, true));
      const auto f = to_f(reference::gemm(x1, w.w1, L, F, D, 1.0, w.b1, {}, reference::gelu));
      const auto h2 = to_f(reference::gemm(f, w.w2, L, D, F, 1.0, w.b2, x1, id));
      x = to_f(reference::norm_rows(h2, L, D, w.g2, w.be2, 1e-5, true));
    }
    return std::vector<double>(x.begin(), x.end());
  }

 private:
  struct host_weights {
    std::vector<float> wqkv, bqkv, wo, bo, g1, be1, w1, b1, w2, b2, g2, be2;
  };

  static constexpr std::size_t arena_bytes() {
    const std::size_t wts = static_cast<std::size_t>(D) * 3 * D + 3 * D + D * D + D + 4 * D +
                            2 * static_cast<std::size_t>(D) * F + F + D;
    const std::size_t act = static_cast<std::size_t>(L) * (3 * D + 4 * D + F) +
                            static_cast<std::size_t>(H) * L * L +
                            static_cast<std::size_t>(Layers) * L * D;
    return sizeof(bf16) * (L * D + Layers * wts + 2 * act) +
           256 * (2 + 13 * Layers + 2 * (7 + Layers));
  }

  bf16* upload(std::size_t n, std::vector<float>& exact, float lo, float hi) {
    auto v = testing::random_values<bf16>(n, exact, lo, hi);
    bf16* p = arena_.carve<bf16>(n);
    check(cudaMemcpy(p, v.data(), n * sizeof(bf16), cudaMemcpyHostToDevice), "transformer: upload");
    return p;
  }
  activations carve_activations() {
    activations a{};
    a.qkv = arena_.carve<bf16>(static_cast<std::size_t>(L) * 3 * D, "qkv");
    a.attn = arena_.carve<bf16>(static_cast<std::size_t>(L) * D, "attn");
    a.h = arena_.carve<bf16>(static_cast<std::size_t>(L) * D, "h");
    a.x1 = arena_.carve<bf16>(static_cast<std::size_t>(L) * D, "x1");
    a.f = arena_.carve<bf16>(static_cast<std::size_t>(L) * F, "f");
    a.h2 = arena_.carve<bf16>(static_cast<std::size_t>(L) * D, "h2");
    a.scores = arena_.carve<bf16>(static_cast<std::size_t>(H) * L * L, "scores");
    for (int l = 0; l < Layers; ++l)
      a.out[l] = arena_.carve<bf16>(static_cast<std::size_t>(L) * D, "out");
    return a;
  }
  std::vector<double> download(const bf16* p) const {
    std::vector<bf16> h(static_cast<std::size_t>(L) * D);
    check(cudaStreamSynchronize(stream_), "transformer: sync");
    check(cudaMemcpy(h.data(), p, h.size() * sizeof(bf16), cudaMemcpyDeviceToHost),
          "transformer: download");
    return testing::widen(h);
  }

  cudaStream_t stream_;
  device_arena arena_;
  bf16* x_ = nullptr;
  std::vector<float> host_x_;
  weights w_[Layers]{};
  host_weights host_w_[Layers];
  activations fused_act_{}, unfused_act_{};
};

}  // namespace fusedsl::cuda::bench
