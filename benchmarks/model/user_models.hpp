#pragma once
// Transformer variants as a user writes them with the public API (expressions, nn::linear,
// nn::attention and its options, layernorm/rmsnorm), one program each; benchmarks/model/
// user_models.py holds the same functions in PyTorch and races them (user_model_peer.cpp serves
// one program to it). Shapes are those of small production models; everything is f32.
//
//   gptj_interleaved  GPT-J's parallel block: y = x + attn(ln(x)) + ffn(ln(x)), causal, rotary on
//                     the first 32 dims of each 64-dim head as interleaved pairs (a reshape to
//                     [..., 16, 2], slices of extent 1, a concat), angles from iota
//   gptj_halves       the same block with the rotated dims split in halves (GPT-NeoX's
//                     rotate_half): the reference for the interleaved form's cost
//   t5_decoder        a T5 decoder layer: RMSNorm, causal unscaled self-attention with the
//                     bucketed relative-position bias (buckets from iota, a learned [32, heads]
//                     table gathered), unscaled cross-attention to an encoder output of another
//                     length, a ReLU feed-forward without biases
//   moe_dense         a mixture-of-experts SwiGLU FFN (models/moe.hpp), 8 experts stacked
//                     [E, K, N], every expert weighted by the softmax gate
//   moe_top2          the same with the gate cut to each token's two largest weights,
//                     renormalised (every expert still computed on every token)
//   moe_top2_routed   top-2 with each expert computed on the tokens routed to it only, at most
//                     40 (its capacity: GShard's factor 1.25 of an even share)
//   alibi             a BLOOM-style pre-LN block: causal attention with ALiBi (slope_h * key
//                     position, slopes from iota), GELU-tanh feed-forward
//   vit               a ViT-S/8 front end and block on a 3 x 64 x 64 image: 8 x 8 patches cut with
//                     reshape/permute, a class token, position embeddings, a pre-LN block with
//                     GELU, the final LayerNorm and the class token's row
#include <cmath>
#include <cstdint>

#include "fusedsl/fusedsl.hpp"
#include "fusedsl/models/moe.hpp"

namespace fusedsl_user {

namespace fd = fusedsl;
namespace nn = fusedsl::nn;

// ---- GPT-J ----
namespace gptj {
inline constexpr std::int64_t L = 128, D = 512, H = 8, Dh = 64, R = 32, F = 2048;
constexpr auto x = fd::input<"x", float, L, D>();
constexpr auto ln =
    fd::layernorm(x, fd::param<"ln.gamma", float, D>(), fd::param<"ln.beta", float, D>());

// The rotary angles p * 10000^(-2i / R) of position p and frequency i < R / 2, from iota.
constexpr auto angles() {
  constexpr auto p = fd::iota<float, 0, L, R / 2>();
  constexpr auto i = fd::iota<float, 1, L, R / 2>();
  return p * fd::exp(i * fd::lit<-2.0 * 9.210340371976184 / double(R)>);  // ln(10000)
}

// t [L, H, Dh] with its first R dims rotated as interleaved pairs (x0, x1), (x2, x3), ...
template <class T>
constexpr auto rotate_interleaved(T t) {
  constexpr auto c = fd::reshape<L, 1, R / 2, 1>(fd::cos(angles()));
  constexpr auto s = fd::reshape<L, 1, R / 2, 1>(fd::sin(angles()));
  constexpr auto pairs = fd::reshape<L, H, R / 2, 2>(fd::slice<2, 0, R>(t));
  constexpr auto even = fd::slice<3, 0, 1>(pairs);
  constexpr auto odd = fd::slice<3, 1, 2>(pairs);
  constexpr auto rotated = fd::concat<3>(even * c - odd * s, odd * c + even * s);
  return fd::concat<2>(fd::reshape<L, H, R>(rotated), fd::slice<2, R, Dh>(t));
}

// The same with the rotated dims as two halves (rotate_half).
template <class T>
constexpr auto rotate_halves(T t) {
  constexpr auto c = fd::reshape<L, 1, R / 2>(fd::cos(angles()));
  constexpr auto s = fd::reshape<L, 1, R / 2>(fd::sin(angles()));
  constexpr auto t1 = fd::slice<2, 0, R / 2>(t);
  constexpr auto t2 = fd::slice<2, R / 2, R>(t);
  return fd::concat<2>(t1 * c - t2 * s, t2 * c + t1 * s, fd::slice<2, R, Dh>(t));
}

template <bool Interleaved>
constexpr auto block() {
  constexpr auto heads = [](auto t) {
    constexpr auto r = fd::reshape<L, H, Dh>(decltype(t){});
    if constexpr (Interleaved)
      return fd::permute<1, 0, 2>(rotate_interleaved(r));
    else
      return fd::permute<1, 0, 2>(rotate_halves(r));
  };
  constexpr auto q = heads(nn::linear<"attn.q", D, false>(ln));
  constexpr auto k = heads(nn::linear<"attn.k", D, false>(ln));
  constexpr auto v =
      fd::permute<1, 0, 2>(fd::reshape<L, H, Dh>(nn::linear<"attn.v", D, false>(ln)));
  constexpr auto s = fd::matmul<false, true>(q, k) * fd::lit<0.125>;  // 1 / sqrt(64)
  constexpr auto causal =
      fd::iota<std::int32_t, 1, H, L, L>() >= fd::iota<std::int32_t, 2, H, L, L>();
  constexpr auto p = fd::softmax(fd::where(causal, s, fd::neg_inf));
  constexpr auto o = fd::reshape<L, D>(fd::permute<1, 0, 2>(fd::matmul(p, v)));
  constexpr auto attn = nn::linear<"attn.o", D, false>(o);
  constexpr auto ffn = nn::feed_forward<"ffn", F>(ln);
  return fd::compile(x + attn + ffn);
}
}  // namespace gptj

// ---- T5 decoder layer ----
namespace t5 {
inline constexpr std::int64_t L = 128, Le = 96, D = 512, H = 8, F = 2048, Buckets = 32;
constexpr auto x = fd::input<"x", float, L, D>();
constexpr auto enc = fd::input<"enc", float, Le, D>();

// T5's decoder bucket of query i and key j (unidirectional, 32 buckets, max distance 128): the
// distance n = max(i - j, 0) below 16 as it is, beyond that log-spaced up to bucket 31.
constexpr auto buckets() {
  constexpr auto n =
      fd::max(fd::iota<std::int32_t, 0, L, L>() - fd::iota<std::int32_t, 1, L, L>(), fd::lit<0.0>);
  constexpr auto nf = fd::cast<float>(fd::max(n, fd::lit<1.0>));
  // 16 + log(n / 16) / log(128 / 16) * 16, truncated (PyTorch's .to(long)), at most 31.
  constexpr auto large = fd::min(
      fd::cast<std::int32_t>(fd::log(nf * fd::lit<1.0 / 16>) * fd::lit<16.0 / 2.0794415416798357>) +
          fd::lit<16.0>,
      fd::lit<31.0>);
  return fd::where(n < fd::lit<16.0>, n, large);
}

constexpr auto layer() {
  constexpr auto table = fd::param<"rel_bias", float, Buckets, H>();
  constexpr auto bias = fd::permute<2, 0, 1>(fd::gather(table, buckets()));  // [H, L, L]
  constexpr auto n1 = fd::rmsnorm(x, fd::param<"ln1", float, D>());
  constexpr auto h1 =
      x + nn::attention<"self",
                        nn::attention_options{
                            .heads = int(H), .causal = true, .scale = 1.0, .bias = true}>(n1, bias);
  constexpr auto n2 = fd::rmsnorm(h1, fd::param<"ln2", float, D>());
  constexpr auto h2 =
      h1 +
      nn::attention<"cross", nn::attention_options{.heads = int(H), .scale = 1.0, .context = true}>(
          n2, enc);
  constexpr auto n3 = fd::rmsnorm(h2, fd::param<"ln3", float, D>());
  constexpr auto ffn = nn::linear<"ffn.wo", D, false>(fd::relu(nn::linear<"ffn.wi", F, false>(n3)));
  return fd::compile(h2 + ffn);
}
}  // namespace t5

// ---- mixture of experts (models/moe.hpp) ----
namespace moe {
inline constexpr std::int64_t T = 128, D = 512, E = 8, F = 1024;
// GShard's capacity factor 1.25 of an even share of the 2 x 128 routed rows: 40 per expert
inline constexpr std::int64_t Capacity = 40;
constexpr auto x = fd::input<"x", float, T, D>();

constexpr auto dense() {
  return fd::compile(fd::models::moe_dense<E, F>(
      x, fd::softmax(fd::matmul(x, fd::param<"router.w", float, D, E>()))));
}
constexpr auto top2() {
  return fd::compile(fd::models::moe_dense<E, F>(x, fd::models::moe_top2_gates<E>(x)));
}
constexpr auto routed() {
  return fd::compile(fd::models::moe_routed<E, F, Capacity>(x, fd::models::moe_top2_gates<E>(x)));
}
}  // namespace moe

// ---- ALiBi (BLOOM-style) ----
namespace alibi {
inline constexpr std::int64_t L = 128, D = 512, H = 8, F = 2048;
constexpr auto x = fd::input<"x", float, L, D>();

constexpr auto block() {
  // slope_h = 2^(-8 (h + 1) / H) times the key's position: [H, 1, L]
  constexpr auto slope = fd::exp((fd::iota<float, 0, H, 1, L>() +
                                  fd::lit<1.0>)*fd::lit<-8.0 * 0.6931471805599453 / double(H)>);
  constexpr auto bias = slope * fd::iota<float, 2, H, 1, L>();
  constexpr auto n1 =
      fd::layernorm(x, fd::param<"ln1.gamma", float, D>(), fd::param<"ln1.beta", float, D>());
  constexpr auto h =
      x +
      nn::attention<"attn", nn::attention_options{.heads = int(H), .causal = true, .bias = true}>(
          n1, bias);
  constexpr auto n2 =
      fd::layernorm(h, fd::param<"ln2.gamma", float, D>(), fd::param<"ln2.beta", float, D>());
  return fd::compile(h + nn::feed_forward<"ffn", F>(n2));
}
}  // namespace alibi

// ---- ViT ----
namespace vit {
inline constexpr std::int64_t C = 3, Img = 64, P = 8, G = Img / P, N = G * G, D = 384, H = 6,
                              F = 1536;
constexpr auto image = fd::input<"image", float, C, Img, Img>();

constexpr auto model() {
  // [C, G, P, G, P] -> [G, G, C, P, P] -> one row of C * P * P values per patch
  constexpr auto patches =
      fd::reshape<N, C * P * P>(fd::permute<1, 3, 0, 2, 4>(fd::reshape<C, G, P, G, P>(image)));
  constexpr auto tokens =
      fd::concat<0>(fd::param<"cls", float, 1, D>(), nn::linear<"patch", D>(patches)) +
      fd::param<"pos", float, N + 1, D>();
  constexpr auto n1 =
      fd::layernorm(tokens, fd::param<"ln1.gamma", float, D>(), fd::param<"ln1.beta", float, D>());
  constexpr auto h = tokens + nn::attention<"attn", int(H)>(n1);
  constexpr auto n2 =
      fd::layernorm(h, fd::param<"ln2.gamma", float, D>(), fd::param<"ln2.beta", float, D>());
  constexpr auto y = h + nn::feed_forward<"ffn", F, nn::activation::gelu>(n2);
  constexpr auto out =
      fd::layernorm(y, fd::param<"norm.gamma", float, D>(), fd::param<"norm.beta", float, D>());
  return fd::compile(fd::slice<0, 0, 1>(out));
}
}  // namespace vit

// The programs, by the names user_models.py uses.
using gptj_interleaved = decltype(gptj::block<true>());
using gptj_halves = decltype(gptj::block<false>());
using t5_decoder = decltype(t5::layer());
using moe_dense = decltype(moe::dense());
using moe_top2 = decltype(moe::top2());
using moe_top2_routed = decltype(moe::routed());
using alibi_block = decltype(alibi::block());
using vit_block = decltype(vit::model());

}  // namespace fusedsl_user
