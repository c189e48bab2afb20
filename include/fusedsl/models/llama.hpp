#pragma once
// A LLaMA-style decoder block (Touvron et al., 2023): pre-RMSNorm, rotary position embeddings on
// queries and keys, grouped-query causal attention without biases, and a SwiGLU feed-forward.
//
//   h = x + o(attention(rope(q(n1)), rope(k(n1)), v(n1)))      n1 = rmsnorm(x) * attn_norm
//   y = h + down(silu(gate(n2)) * up(n2))                      n2 = rmsnorm(h) * ffn_norm
//
// Params under the block's prefix: "attn_norm", "attn.q.w", "attn.k.w", "attn.v.w", "attn.o.w",
// "ffn_norm", "ffn.gate.w", "ffn.up.w", "ffn.down.w" (weights [in, out]). RoPE (Su et al., 2021)
// rotates the two halves of each head by the angles whose cos and sin the caller passes, [L, dh/2]
// (position p, frequency i: theta = p * base^(-2i/dh)), as Hugging Face's LLaMA does.
#include <string_view>

#include "fusedsl/compile.hpp"
#include "fusedsl/expr/nn.hpp"

namespace fusedsl::models {

using graph::builder;
using graph::op_kind;

// t [L, H, dh] rotated: (t1 cos - t2 sin, t2 cos + t1 sin) over the halves t1, t2 of dh.
constexpr int emit_rope(builder& b, int t, int cos, int sin) {
  const dims s = b.at(t).shape;
  const std::int64_t dh = s.back(), half = dh / 2;
  if (dh % 2 != 0) graph::fail("rope: the head size must be even");
  const dims cs = b.at(cos).shape;
  if (!(cs == make_dims(s[s.rank - 3], half)) || !(b.at(sin).shape == cs))
    graph::fail("rope: cos and sin must be [seq, head_dim / 2]");
  dims c3 = make_dims(cs[0], 1, half);  // over the heads
  const int c = b.reshape(cos, c3);
  const int sn = b.reshape(sin, c3);
  const int t1 = b.slice(t, -1, 0, half);
  const int t2 = b.slice(t, -1, half, dh);
  const int a1 = b.binary(op_kind::mul, t1, c);
  const int a2 = b.binary(op_kind::mul, t2, sn);
  const int lo = b.binary(op_kind::sub, a1, a2);
  const int b1 = b.binary(op_kind::mul, t2, c);
  const int b2 = b.binary(op_kind::mul, t1, sn);
  const int hi = b.binary(op_kind::add, b1, b2);
  const std::array<int, 2> parts{lo, hi};
  return b.concat(parts, -1);
}

constexpr int emit_rmsnorm(builder& b, int x, std::string_view name, double eps, int wt) {
  const dtype t = b.at(x).type, w_t = nn::dense_dtype(wt, t);
  const int g = nn::param_as(b, name, w_t, t, make_dims(b.at(x).shape.back()));
  return b.norm(op_kind::rmsnorm, x, g, -1, eps);
}

// x [L, D]; cos, sin [L, dh / 2].
constexpr int emit_llama_block(builder& b, int x, int cos, int sin, int heads, int kv_heads,
                               std::int64_t hidden, double eps, std::string_view prefix = "",
                               int wt = -1) {
  const auto name = [&](std::string_view n) { return join(prefix, n); };
  const dims xs = b.at(x).shape;
  const std::int64_t len = xs[0], d = xs.back(), dh = d / heads;
  const int n1 = emit_rmsnorm(b, x, name("attn_norm").view(), eps, wt);
  const int q = nn::emit_linear(b, n1, name("attn.q").view(), d, false, wt);
  const int k = nn::emit_linear(b, n1, name("attn.k").view(), kv_heads * dh, false, wt);
  const int v = nn::emit_linear(b, n1, name("attn.v").view(), kv_heads * dh, false, wt);
  const std::array<int, 3> to_heads{1, 0, 2};
  const int qr = emit_rope(b, b.reshape(q, make_dims(len, heads, dh)), cos, sin);
  const int kr = emit_rope(b, b.reshape(k, make_dims(len, kv_heads, dh)), cos, sin);
  const int qh = b.transpose(qr, to_heads);
  const int kh = b.transpose(kr, to_heads);
  const int vh = b.transpose(b.reshape(v, make_dims(len, kv_heads, dh)), to_heads);
  const int o = nn::emit_attention_core(b, qh, kh, vh, {.causal = true});
  const int h =
      b.binary(op_kind::add, x, nn::emit_linear(b, o, name("attn.o").view(), d, false, wt));
  const int n2 = emit_rmsnorm(b, h, name("ffn_norm").view(), eps, wt);
  const int gate = nn::emit_linear(b, n2, name("ffn.gate").view(), hidden, false, wt);
  const int up = nn::emit_linear(b, n2, name("ffn.up").view(), hidden, false, wt);
  const int act = b.binary(op_kind::mul, b.unary(op_kind::silu, gate), up);
  return b.binary(op_kind::add, h, nn::emit_linear(b, act, name("ffn.down").view(), d, false, wt));
}

template <int Heads, int KvHeads, std::int64_t Hidden, double Eps = 1e-5,
          class W = nn::same_as_input>
struct llama_block_fn {
  template <class X>
  static constexpr dims result_shape() {
    return X::shape;
  }
  template <class X, class C, class S>
  static constexpr bool valid() {
    return X::shape.rank == 2 && X::shape.back() % Heads == 0 && Heads % KvHeads == 0 &&
           C::shape == make_dims(X::shape[0], X::shape.back() / Heads / 2) && S::shape == C::shape;
  }
  static constexpr int emit(builder& b, int x, int cos, int sin) {
    return emit_llama_block(b, x, cos, sin, Heads, KvHeads, Hidden, Eps, "",
                            int(nn::weight_dtype<W>(b.at(x).type)));
  }
};

// The block on x [L, D] with the rotary angles' cos and sin [L, dh / 2].
template <int Heads, int KvHeads, std::int64_t Hidden, double Eps = 1e-5,
          class W = nn::same_as_input, expression X, expression C, expression S>
constexpr auto llama_block(X, C, S) {
  static_assert(X::shape.rank == 2, "llama_block: x must be [seq, d_model]");
  static_assert(X::shape.back() % Heads == 0 && Heads % KvHeads == 0,
                "llama_block: heads must divide d_model and kv heads must divide heads");
  static_assert(
      C::shape == make_dims(X::shape[0], X::shape.back() / Heads / 2) && S::shape == C::shape,
      "llama_block: cos and sin must be [seq, head_dim / 2]");
  return expr::composite_of_t<llama_block_fn<Heads, KvHeads, Hidden, Eps, W>, X, C, S>{};
}

// One block as a ready-made model, like models::transformer: inputs "x" [Seq, DModel] and the
// rotary angles' "cos" and "sin" [Seq, head_dim / 2].
template <std::int64_t Seq, std::int64_t DModel, int Heads, int KvHeads, std::int64_t Hidden>
struct llama_block_model {
  static constexpr std::int64_t seq = Seq, d_model = DModel, hidden = Hidden,
                                head_dim = DModel / Heads;
  static constexpr int heads = Heads, kv_heads = KvHeads;
  static constexpr auto x = input<"x", float, Seq, DModel>();
  static constexpr auto cos = input<"cos", float, Seq, head_dim / 2>();
  static constexpr auto sin = input<"sin", float, Seq, head_dim / 2>();
  using program_type = decltype(compile(llama_block<Heads, KvHeads, Hidden>(x, cos, sin)));
  // FLOPs of one call, matmuls only (2 per multiply-add): Q, K and V (K and V kv_heads wide), the
  // scores and P V (causal not halved), O, and SwiGLU's gate, up and down.
  static constexpr double flops() {
    const double l = double(Seq), d = double(DModel), kv = double(KvHeads * head_dim);
    return 2 * l * d * (d + 2 * kv) + 2 * 2 * l * l * d + 2 * l * d * d + 3 * 2 * l * d * Hidden;
  }
};

}  // namespace fusedsl::models
