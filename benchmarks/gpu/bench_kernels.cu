// Kernel benchmarks on one GPU: memory-bound loop and row kernels against copy bandwidth, GEMMs
// and attention against the tensor-core peak (and cuBLAS where it loads).
// Usage: fusedsl_gpu_kernels [results.jsonl]
#include <cstdio>
#include <exception>
#include <fusedsl/backend/cuda/cuda.cuh>
#include <random>

#include "bench_util.hpp"
#include "cuda_test_util.hpp"
#include "device_fill.cuh"

namespace fc = fusedsl::cuda;
using fusedsl::graph::op_kind;
namespace fb = fusedsl::cuda::bench;
namespace ft = fusedsl::cuda::testing;

namespace {

cudaStream_t g_stream{};

template <long N, class T>
T* make(std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  T* p = nullptr;
  fc::check(cudaMalloc(&p, N * sizeof(T)), "cudaMalloc");
  fb::fill<N>(g_stream, p, seed, lo, hi);
  return p;
}

void bandwidth(fb::report& rep) {
  constexpr long bytes = 1L << 30;
  void *a = nullptr, *b = nullptr;
  fc::check(cudaMalloc(&a, bytes), "cudaMalloc");
  fc::check(cudaMalloc(&b, bytes), "cudaMalloc");
  fc::check(cudaMemsetAsync(a, 1, bytes, g_stream), "memset");
  const double ms = fb::median_ms(
      g_stream, [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g_stream); }, 10);
  rep.add("copy d2d 1 GiB (ceiling for memory-bound kernels)", ms, 0, 2.0 * bytes);
  cudaFree(a);
  cudaFree(b);
}

struct mul_add_gelu {
  __device__ float operator()(float a, float b, float c) const {
    return fc::apply_op<op_kind::gelu_erf>(a * b + c);
  }
};

void loop_and_rows(fb::report& rep) {
  constexpr long N = 1L << 28;
  auto *a = make<N, fc::bf16>(1), *b = make<N, fc::bf16>(2), *c = make<N, fc::bf16>(3),
       *o = make<N, fc::bf16>(4);
  double ms = fb::median_ms(
      g_stream, [&] { fc::launch_map<N>(g_stream, mul_add_gelu{}, o, a, b, c); }, 10);
  rep.add("loop fusion gelu(a*b+c) bf16, 2^28 elements", ms, 0, 4.0 * N * 2);

  constexpr int R = 65536, C = 1024;
  auto *gamma = make<C, fc::bf16>(5, 0.5f, 1.5f), *beta = make<C, fc::bf16>(6);
  fc::row_params p;
  p.gamma = gamma, p.beta = beta;
  ms = fb::median_ms(
      g_stream, [&] { fc::launch_row<fc::row_op::layernorm, R, C>(g_stream, a, o, p); }, 10);
  rep.add("layernorm bf16 [65536, 1024]", ms, 0, 2.0 * R * C * 2);
  ms = fb::median_ms(
      g_stream, [&] { fc::launch_row<fc::row_op::rmsnorm, R, C>(g_stream, a, o, p); }, 10);
  rep.add("rmsnorm bf16 [65536, 1024]", ms, 0, 2.0 * R * C * 2);
  constexpr int R2 = 32768, C2 = 2048;
  ms = fb::median_ms(
      g_stream, [&] { fc::launch_row<fc::row_op::softmax, R2, C2>(g_stream, a, o, {}); }, 10);
  rep.add("softmax bf16 [32768, 2048]", ms, 0, 2.0 * R2 * C2 * 2);
  for (void* x : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(c),
                  static_cast<void*>(o), static_cast<void*>(gamma), static_cast<void*>(beta)})
    cudaFree(x);
}

// Spot check of C = A B at 512 random entries against double dot products on the CPU.
template <int M, int N, int K>
double spot_check(const fc::bf16* a, const fc::bf16* b, const fc::bf16* c) {
  std::vector<fc::bf16> ha(static_cast<std::size_t>(M) * K), hb(static_cast<std::size_t>(K) * N),
      hc(static_cast<std::size_t>(M) * N);
  fc::check(cudaDeviceSynchronize(), "sync");
  fc::check(cudaMemcpy(ha.data(), a, ha.size() * 2, cudaMemcpyDeviceToHost), "download");
  fc::check(cudaMemcpy(hb.data(), b, hb.size() * 2, cudaMemcpyDeviceToHost), "download");
  fc::check(cudaMemcpy(hc.data(), c, hc.size() * 2, cudaMemcpyDeviceToHost), "download");
  std::vector<double> got, want;
  std::uniform_int_distribution<int> rm(0, M - 1), cn(0, N - 1);
  for (int s = 0; s < 512; ++s) {
    const int i = rm(ft::rng()), j = cn(ft::rng());
    double acc = 0.0;
    for (int k = 0; k < K; ++k)
      acc += static_cast<double>(fc::to_f32(ha[static_cast<std::size_t>(i) * K + k])) *
             fc::to_f32(hb[static_cast<std::size_t>(k) * N + j]);
    want.push_back(acc);
    got.push_back(fc::to_f32(hc[static_cast<std::size_t>(i) * N + j]));
  }
  return ft::rel_l2(got, want);
}

template <int M, int N, int K, class Epi, fc::gemm_math Math = fc::gemm_math::tensor_core,
          class Tile = fc::default_tile_for<M, N, Math, fc::bf16>>
void gemm_bf16(fb::report& rep, const char* name, const fb::cublas_api& cublas, bool verify = false,
               bool with_cublas = true) {
  auto* a = make<static_cast<long>(M) * K, fc::bf16>(11, -1.0f, 1.0f);
  auto* b = make<static_cast<long>(K) * N, fc::bf16>(12, -1.0f, 1.0f);
  auto* bias = make<N, fc::bf16>(13);
  auto* res = make<static_cast<long>(M) * N, fc::bf16>(14);
  auto* c = make<static_cast<long>(M) * N, fc::bf16>(15);
  Epi epi;
  epi.bias = bias, epi.residual = res;
  const double flops = 2.0 * M * N * K;
  const double ms = fb::median_ms(
      g_stream, [&] { fc::gemm<M, N, K, fc::bf16, Epi, Math, Tile>(g_stream, a, b, c, epi); });
  std::string path;
  if constexpr (requires { Tile::consumers; })
    path = "wgmma+TMA 128x" + std::to_string(Tile::BN) + " s" + std::to_string(Tile::stages);
  else if (Math == fc::gemm_math::wgmma ||
           (Math == fc::gemm_math::tensor_core && fc::sm90::fits<M, N, K> &&
            fc::sm90::device_has_wgmma()))
    path = fc::sm90::wide_blocks<M, N> ? "wgmma+TMA 128x256 s4" : "wgmma+TMA 128x128 s4";
  else
    path = std::string(Math == fc::gemm_math::wmma ? "WMMA " : "mma.sync ") +
           std::to_string(Tile::BM) + "x" + std::to_string(Tile::BN) + " w" +
           std::to_string(Tile::WM) + "x" + std::to_string(Tile::WN) + " s" +
           std::to_string(Tile::stages);
  rep.add(std::string("gemm bf16 ") + name + " [" + path + "]", ms, flops, 0, path);
  if (verify) {
    fc::gemm<M, N, K, fc::bf16, fc::epilogue<fc::bf16>, Math, Tile>(g_stream, a, b, c, {});
    rep.check_line(std::string("gemm bf16 ") + name + " [" + path + "] vs CPU at 512 entries",
                   spot_check<M, N, K>(a, b, c), 1e-2);
  }
  if (cublas.ok() && with_cublas) {
    auto* c2 = make<static_cast<long>(M) * N, fc::bf16>(16);
    const double ms2 =
        fb::median_ms(g_stream, [&] { cublas.gemm_bf16(M, N, K, a, K, b, N, c2, N); });
    rep.add(std::string("gemm bf16 ") + name + " (cuBLAS, no epilogue)", ms2, flops, 0, "cuBLAS");
    if (verify) {
      // Same operands, plain epilogue: our output against cuBLAS's.
      fc::gemm<M, N, K, fc::bf16, fc::epilogue<fc::bf16>>(g_stream, a, b, c, {});
      std::vector<fc::bf16> h1(static_cast<std::size_t>(M) * N), h2(h1.size());
      fc::check(cudaMemcpy(h1.data(), c, h1.size() * 2, cudaMemcpyDeviceToHost), "download");
      fc::check(cudaMemcpy(h2.data(), c2, h2.size() * 2, cudaMemcpyDeviceToHost), "download");
      const auto w1 = ft::widen(h1), w2 = ft::widen(h2);
      std::size_t same = 0;
      for (std::size_t i = 0; i < w1.size(); ++i) same += w1[i] == w2[i];
      rep.check_line(std::string("gemm bf16 ") + name + " vs cuBLAS (" +
                         std::to_string(100.0 * same / w1.size()) + "% bitwise equal)",
                     ft::rel_l2(w1, w2), 1e-2);
      rep.check_line(std::string("cuBLAS ") + name + " vs CPU at 512 entries",
                     spot_check<M, N, K>(a, b, c2), 1e-2);
    }
    cudaFree(c2);
  }
  for (void* x : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(bias),
                  static_cast<void*>(res), static_cast<void*>(c)})
    cudaFree(x);
}

template <int M, int N, int K, fc::gemm_math Math>
void gemm_f32(fb::report& rep, const char* name) {
  auto* a = make<static_cast<long>(M) * K, float>(21);
  auto* b = make<static_cast<long>(K) * N, float>(22);
  auto* c = make<static_cast<long>(M) * N, float>(23);
  const double ms = fb::median_ms(
      g_stream, [&] { fc::gemm<M, N, K, float, fc::epilogue<float>, Math>(g_stream, a, b, c, {}); },
      10);
  rep.add(name, ms, 2.0 * M * N * K, 0,
          Math == fc::gemm_math::tf32 ? "TF32 peak 494.7" : "f32 CUDA cores, peak ~67");
  cudaFree(a), cudaFree(b), cudaFree(c);
}

template <int D, int B, int H, int S, bool Causal, int BlockM>
void attention(fb::report& rep) {
  constexpr long n = static_cast<long>(B) * S * H * D;
  auto *q = make<n, fc::bf16>(31, -2.0f, 2.0f), *k = make<n, fc::bf16>(32, -2.0f, 2.0f),
       *v = make<n, fc::bf16>(33);
  auto* o = make<n, fc::bf16>(34);
  const auto args = fc::dense_attention_args<fc::bf16, D, H, H, S, S>(q, k, v, o);
  const double ms = fb::median_ms(
      g_stream,
      [&] {
        fc::flash_attention<fc::bf16, D, B, H, H, S, S, Causal, true, BlockM>(g_stream, args);
      },
      10);
  char name[160];
  const bool wgmma = BlockM == 0 && fc::attention_takes_wgmma<D, S, S>();
  char path[48];
  if (wgmma)
    std::snprintf(path, sizeof path, "wgmma+TMA, 128 queries");
  else
    std::snprintf(path, sizeof path, "block_m %d", BlockM == 0 ? (D >= 128 ? 128 : 64) : BlockM);
  std::snprintf(name, sizeof name, "attention bf16 seq %d batch %d heads %d dim %d %s [%s]", S, B,
                H, D, Causal ? "causal" : "full", path);
  rep.add(name, ms, fc::attention_flops(B, H, S, S, D, Causal), 0);
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o);
}

}  // namespace

int main(int argc, char** argv) {
  return fb::bench_main(argc, argv, [](fb::report& rep, cudaStream_t stream) {
    g_stream = stream;
    fb::cublas_api cublas(g_stream);
    std::printf("cuBLAS: %s\n", cublas.ok() ? "loaded" : cublas.why_not.c_str());

    bandwidth(rep);
    loop_and_rows(rep);

    using plain = fc::epilogue<fc::bf16>;
    using bias_only = fc::epilogue<fc::bf16, void, true>;
    using bias_gelu = fc::epilogue<fc::bf16, fc::op<op_kind::gelu_erf>, true>;
    using bias_res = fc::epilogue<fc::bf16, void, true, true>;
    gemm_bf16<8192, 8192, 8192, plain>(rep, "8192^3", cublas, true);
    // Hopper: wgmma + TMA with 128x256 blocks; then the sm_80 paths on the same shape.
    using w256 = fc::sm90::wgmma_tile<256, 4>;
    constexpr auto wg = fc::gemm_math::wgmma;
    if (fc::sm90::device_has_wgmma()) {
      gemm_bf16<8192, 8192, 8192, plain, wg, fc::sm90::wgmma_tile<128, 4>>(rep, "8192^3", cublas,
                                                                           true, false);
      gemm_bf16<2048, 3072, 1024, bias_only, wg, w256>(rep, "large qkv 2048x3072x1024 +bias",
                                                       cublas, true, false);
      gemm_bf16<2048, 4096, 1024, bias_gelu, wg, fc::sm90::wgmma_tile<128, 4>>(
          rep, "large ffn1 2048x4096x1024 +bias+gelu", cublas, true, false);
      // Deeper rings on the mid-size shapes.
      using w128s6 = fc::sm90::wgmma_tile<128, 6>;
      gemm_bf16<2048, 3072, 1024, bias_only, wg, w128s6>(rep, "large qkv 2048x3072x1024 +bias",
                                                         cublas, true, false);
      gemm_bf16<2048, 1024, 4096, bias_res, wg, w128s6>(rep, "large ffn2 2048x1024x4096 +bias+res",
                                                        cublas, true, false);
    }
    gemm_bf16<8192, 8192, 8192, plain, fc::gemm_math::mma>(rep, "8192^3", cublas, true, false);
    gemm_bf16<8192, 8192, 8192, plain, fc::gemm_math::wmma>(rep, "8192^3", cublas, true, false);
    // Tile variants of the mma.sync path, each spot-checked.
    using t128x256 = fc::gemm_tile<128, 256, 32, 64, 64, 3>;
    using t256x128 = fc::gemm_tile<256, 128, 32, 64, 64, 3>;
    using t128x128w8 = fc::gemm_tile<128, 128, 32, 64, 32, 4>;
    using t128x128s3 = fc::gemm_tile<128, 128, 32, 64, 64, 3>;
    constexpr auto tc = fc::gemm_math::mma;
    gemm_bf16<8192, 8192, 8192, plain, tc, t128x256>(rep, "8192^3", cublas, true, false);
    gemm_bf16<8192, 8192, 8192, plain, tc, t256x128>(rep, "8192^3", cublas, true, false);
    gemm_bf16<8192, 8192, 8192, plain, tc, t128x128w8>(rep, "8192^3", cublas, true, false);
    gemm_bf16<8192, 8192, 8192, plain, tc, t128x128s3>(rep, "8192^3", cublas, true, false);
    gemm_bf16<2048, 3072, 1024, bias_only, tc, t128x256>(rep, "large qkv 2048x3072x1024 +bias",
                                                         cublas, true, false);
    gemm_bf16<2048, 3072, 1024, bias_only, tc, t128x128w8>(rep, "large qkv 2048x3072x1024 +bias",
                                                           cublas, true, false);
    gemm_bf16<2048, 1024, 4096, bias_res, tc, t128x128w8>(
        rep, "large ffn2 2048x1024x4096 +bias+res", cublas, true, false);
    gemm_bf16<2048, 1024, 4096, bias_res, tc, fc::gemm_tile<64, 128, 32, 32, 64, 4>>(
        rep, "large ffn2 2048x1024x4096 +bias+res", cublas, true, false);
    gemm_bf16<2048, 3072, 1024, bias_only>(rep, "large qkv 2048x3072x1024 +bias", cublas, true);
    gemm_bf16<2048, 1024, 1024, bias_res>(rep, "large out-proj 2048x1024x1024 +bias+res", cublas,
                                          true);
    gemm_bf16<2048, 4096, 1024, bias_gelu>(rep, "large ffn1 2048x4096x1024 +bias+gelu", cublas,
                                           true);
    gemm_bf16<2048, 1024, 4096, bias_res>(rep, "large ffn2 2048x1024x4096 +bias+res", cublas, true);
    gemm_f32<4096, 4096, 4096, fc::gemm_math::tf32>(rep, "gemm f32 as TF32 4096^3");
    gemm_f32<4096, 4096, 4096, fc::gemm_math::cuda_core>(rep, "gemm f32 CUDA cores 4096^3");

    attention<64, 8, 16, 2048, false, 64>(rep);
    attention<64, 8, 16, 2048, false, 128>(rep);
    attention<64, 8, 16, 2048, true, 64>(rep);
    attention<64, 8, 16, 2048, true, 128>(rep);
    attention<128, 8, 16, 2048, false, 64>(rep);
    attention<128, 8, 16, 2048, false, 128>(rep);
    attention<128, 8, 16, 2048, true, 64>(rep);
    attention<128, 8, 16, 2048, true, 128>(rep);
    attention<64, 2, 16, 8192, false, 64>(rep);
    attention<64, 2, 16, 8192, false, 128>(rep);
    attention<64, 2, 16, 8192, true, 64>(rep);
    attention<64, 2, 16, 8192, true, 128>(rep);
    attention<128, 2, 16, 8192, false, 64>(rep);
    attention<128, 2, 16, 8192, false, 128>(rep);
    attention<128, 2, 16, 8192, true, 64>(rep);
    attention<128, 2, 16, 8192, true, 128>(rep);
    // The default path: wgmma + TMA on Hopper.
    attention<64, 8, 16, 2048, false, 0>(rep);
    attention<64, 8, 16, 2048, true, 0>(rep);
    attention<128, 8, 16, 2048, false, 0>(rep);
    attention<128, 8, 16, 2048, true, 0>(rep);
    attention<64, 2, 16, 8192, false, 0>(rep);
    attention<64, 2, 16, 8192, true, 0>(rep);
    attention<128, 2, 16, 8192, false, 0>(rep);
    attention<128, 2, 16, 8192, true, 0>(rep);
  });
}
