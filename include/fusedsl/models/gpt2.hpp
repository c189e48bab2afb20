#pragma once
// GPT-2 (Radford et al., 2019) as fusedsl programs, with the parameter names and layouts of
// Hugging Face's GPT2LMHeadModel checkpoints (without the "transformer." prefix), so that a
// checkpoint binds by name as it is:
//
//   h = wte[ids] + wpe[positions]                                   "wte.weight", "wpe.weight"
//   per layer i (pre-LN):                                           "h.<i>.*"
//     a = LN_1(h); q, k, v = columns of a @ attn.c_attn.weight + bias   (Conv1D: W is [in, out])
//     h += attention(q, k, v) @ attn.c_proj.weight + bias
//     h += gelu_tanh(LN_2(h) @ mlp.c_fc.weight + bias) @ mlp.c_proj.weight + bias
//   logits = LN_f(h) @ wte^T                                        the tied LM head, "ln_f.*"
//
// Two programs share the weights:
//   gpt2_prefill<Cfg, T>: the prompt padded to a bucket of T tokens ("input_ids" [T] i32) and the
//     index of its last real token ("last" i32 scalar). Causal attention over the T tokens, so the
//     padding after the prompt changes nothing before it. Outputs: 0 the logits of the last real
//     token [1, V]; 1 + 2i and 2 + 2i layer i's keys and values [H, T, Dh]; last, the argmax of
//     the logits [1] i32.
//   gpt2_decode<Cfg>: one token ("input_ids" [1] i32) at a run-time position ("pos" i32 scalar).
//     Layer i keeps its keys and values in the states "h.<i>.attn.k_cache" and
//     "h.<i>.attn.v_cache" [H, n_positions, Dh]; the step writes its key and value at row pos (a
//     dynamic update slice, in place) and attends over rows 0..pos only: the attention kernel
//     stops at pos + 1, whatever the capacity. Outputs: 0 the logits [1, V]; 1 .. 2L the new
//     values of the caches; last, the argmax [1] i32.
// A model of L layers is written out layer by layer (states cannot live in a repeated block), so
// the node table grows linearly with L.
#include <array>
#include <cstdint>
#include <limits>
#include <string_view>

#include "fusedsl/compile.hpp"
#include "fusedsl/models/bert.hpp"

namespace fusedsl::models {

// The hyper-parameters of a GPT-2: n_layer, n_embd, n_head, vocab_size, n_positions, the weights'
// dtype (float, bf16, f16: narrower weights are widened where they are read), n_inner and
// layer_norm_epsilon.
template <int Layers, std::int64_t D, int Heads, std::int64_t Vocab, std::int64_t Positions,
          class W = float, std::int64_t Inner = 4 * D, double Eps = 1e-5>
struct gpt2_config {
  static_assert(Layers >= 1, "gpt2_config: at least one layer");
  static_assert(Heads >= 1 && D % Heads == 0, "gpt2_config: the heads must divide n_embd");
  static_assert(Vocab >= 1 && Positions >= 1 && Inner >= 1, "gpt2_config: sizes must be positive");
  static constexpr int layers = Layers, heads = Heads;
  static constexpr std::int64_t d = D, vocab = Vocab, positions = Positions, inner = Inner,
                                head_dim = D / Heads;
  static constexpr double eps = Eps;
  using weight_type = W;
  static constexpr dtype weight_dtype = dtype_of<W>;
  // Bytes of weights read per decoded token (the embedding table once, as the LM head) and of one
  // cached position over all layers (keys and values, f32).
  static constexpr double weight_bytes() {
    const double dd = double(D), f = double(Inner);
    const double per_layer = dd * 3 * dd + 3 * dd + dd * dd + dd + dd * f + f + f * dd + dd + 4 * dd;
    return (double(Layers) * per_layer + double(Vocab) * dd + 2 * dd) * double(sizeof(W));
  }
  static constexpr double cache_bytes_per_position() { return 2.0 * Layers * double(D) * 4; }
};

// GPT-2 small and medium (the released checkpoints' shapes).
using gpt2_small_config = gpt2_config<12, 768, 12, 50257, 1024>;
using gpt2_medium_config = gpt2_config<24, 1024, 16, 50257, 1024>;

// ---- graph-level definitions ----

// "h.<i>".
constexpr node_name gpt2_layer_prefix(int i) {
  char buf[16]{'h', '.'};
  std::size_t n = 2;
  char digits[12]{};
  int k = 0;
  do {
    digits[k++] = char('0' + i % 10);
    i /= 10;
  } while (i > 0);
  while (k > 0) buf[n++] = digits[--k];
  return node_name(std::string_view(buf, n));
}

// Conv1D: x @ weight + bias with weight [in, out], params "<prefix>.weight" and "<prefix>.bias".
constexpr int emit_gpt2_conv1d(builder& b, int x, std::string_view prefix, std::int64_t out,
                               dtype wt) {
  const dtype t = b.at(x).type;
  const std::int64_t in = b.at(x).shape.back();
  const int w = nn::param_as(b, join(prefix, "weight").view(), wt, t, make_dims(in, out));
  const int y = b.matmul(x, w);
  const int bias = nn::param_as(b, join(prefix, "bias").view(), wt, t, make_dims(out));
  return b.binary(op_kind::add, y, bias);
}

struct gpt2_heads {
  int q, k, v;  // [H, T, Dh] each
};

// LN_1 and the fused c_attn projection of layer `prefix` over x [T, D], split into heads.
constexpr gpt2_heads emit_gpt2_qkv(builder& b, int x, std::string_view prefix, int heads,
                                   double eps, dtype wt) {
  const std::int64_t d = b.at(x).shape.back();
  const int a = emit_bert_layernorm(b, x, join(prefix, "ln_1").view(), eps, wt);
  const int qkv = emit_gpt2_conv1d(b, a, join(prefix, "attn.c_attn").view(), 3 * d, wt);
  const int q = b.slice(qkv, 1, 0, d);
  const int k = b.slice(qkv, 1, d, 2 * d);
  const int v = b.slice(qkv, 1, 2 * d, 3 * d);
  const int qh = nn::split_heads(b, q, heads);
  const int kh = nn::split_heads(b, k, heads);
  const int vh = nn::split_heads(b, v, heads);
  return {qh, kh, vh};
}

// The rest of a layer once attention gave ctx [T, D]: the projection, the residual, the MLP.
constexpr int emit_gpt2_block_tail(builder& b, int x, int ctx, std::string_view prefix,
                                   std::int64_t inner, double eps, dtype wt) {
  const std::int64_t d = b.at(x).shape.back();
  const int o = emit_gpt2_conv1d(b, ctx, join(prefix, "attn.c_proj").view(), d, wt);
  const int h = b.binary(op_kind::add, o, x);
  const int m = emit_bert_layernorm(b, h, join(prefix, "ln_2").view(), eps, wt);
  const int f = emit_gpt2_conv1d(b, m, join(prefix, "mlp.c_fc").view(), inner, wt);
  const int g = b.unary(op_kind::gelu_tanh, f);
  const int p = emit_gpt2_conv1d(b, g, join(prefix, "mlp.c_proj").view(), d, wt);
  return b.binary(op_kind::add, p, h);
}

// wte[ids] + wpe[positions]: positions 0..T-1 (pos < 0) or the one run-time position pos.
constexpr int emit_gpt2_embeddings(builder& b, int ids, int pos, std::int64_t vocab,
                                   std::int64_t positions, std::int64_t d, dtype wt) {
  const std::int64_t len = b.at(ids).shape.back();
  const int wte = b.param("wte.weight", wt, make_dims(vocab, d));
  const int words = b.gather(wte, ids);
  const int w = b.cast(words, dtype::f32);
  const int wpe = b.param("wpe.weight", wt, make_dims(positions, d));
  const int rows = pos < 0 ? b.slice(wpe, 0, 0, len) : b.dynamic_slice(wpe, pos, 0, 1);
  const int p = b.cast(rows, dtype::f32);
  return b.binary(op_kind::add, w, p);
}

// LN_f and the tied LM head over x [1, D]: the logits [1, V].
constexpr int emit_gpt2_head(builder& b, int x, std::int64_t vocab, double eps, dtype wt) {
  const std::int64_t d = b.at(x).shape.back();
  const int f = emit_bert_layernorm(b, x, "ln_f", eps, wt);
  const int wte = nn::param_as(b, "wte.weight", wt, dtype::f32, make_dims(vocab, d));
  return b.matmul(f, wte, false, true);
}

// The prefill program's graph (see the top of this file); returns the argmax's id.
template <class Cfg, std::int64_t T>
constexpr int emit_gpt2_prefill(builder& b, int ids, int last) {
  const dtype wt = Cfg::weight_dtype;
  int h = emit_gpt2_embeddings(b, ids, -1, Cfg::vocab, Cfg::positions, Cfg::d, wt);
  std::array<int, 2 * Cfg::layers> kv{};
  for (int i = 0; i < Cfg::layers; ++i) {
    const node_name prefix = gpt2_layer_prefix(i);
    const gpt2_heads a = emit_gpt2_qkv(b, h, prefix.view(), Cfg::heads, Cfg::eps, wt);
    const int ctx = nn::emit_attention_core(b, a.q, a.k, a.v, true);
    kv[std::size_t(2 * i)] = a.k;
    kv[std::size_t(2 * i + 1)] = a.v;
    h = emit_gpt2_block_tail(b, h, ctx, prefix.view(), Cfg::inner, Cfg::eps, wt);
  }
  const int row = b.dynamic_slice(h, last, 0, 1);
  const int logits = emit_gpt2_head(b, row, Cfg::vocab, Cfg::eps, wt);
  b.mark_output(logits);
  for (int o : kv) b.mark_output(o);
  return b.reduce(op_kind::argmax, logits, 1, false);
}

// The decode step's graph (see the top of this file); returns the argmax's id.
template <class Cfg>
constexpr int emit_gpt2_decode(builder& b, int ids, int pos) {
  const dtype wt = Cfg::weight_dtype;
  const std::int64_t cap = Cfg::positions;
  int h = emit_gpt2_embeddings(b, ids, pos, Cfg::vocab, cap, Cfg::d, wt);
  std::array<int, 2 * Cfg::layers> next{}, cache{};
  const int keys = b.iota(dtype::i32, make_dims(1, cap), 1);
  const int visible = b.binary(op_kind::le, keys, pos);
  const int ninf = b.constant(-std::numeric_limits<double>::infinity());
  const int scale = b.constant(1.0 / nn::sqrt_of(double(Cfg::head_dim)));
  const dims cache_shape = make_dims(Cfg::heads, cap, Cfg::head_dim);
  for (int i = 0; i < Cfg::layers; ++i) {
    const node_name prefix = gpt2_layer_prefix(i);
    const gpt2_heads a = emit_gpt2_qkv(b, h, prefix.view(), Cfg::heads, Cfg::eps, wt);
    const int kc = b.state(join(prefix.view(), "attn.k_cache").view(), dtype::f32, cache_shape);
    const int vc = b.state(join(prefix.view(), "attn.v_cache").view(), dtype::f32, cache_shape);
    const int k2 = b.dynamic_update_slice(kc, a.k, pos, 1);
    const int v2 = b.dynamic_update_slice(vc, a.v, pos, 1);
    const int s = b.matmul(a.q, k2, false, true);  // [H, 1, cap]
    const int ss = b.binary(op_kind::mul, s, scale);
    const int masked = b.select(visible, ss, ninf);
    const int p = b.softmax(masked, 2);
    const int o = b.matmul(p, v2);  // [H, 1, Dh]
    const int ctx = nn::merge_heads(b, o);
    next[std::size_t(2 * i)] = k2, cache[std::size_t(2 * i)] = kc;
    next[std::size_t(2 * i + 1)] = v2, cache[std::size_t(2 * i + 1)] = vc;
    h = emit_gpt2_block_tail(b, h, ctx, prefix.view(), Cfg::inner, Cfg::eps, wt);
  }
  const int logits = emit_gpt2_head(b, h, Cfg::vocab, Cfg::eps, wt);
  b.mark_output(logits);
  for (std::size_t j = 0; j < next.size(); ++j) b.mark_output(next[j], cache[j]);
  return b.reduce(op_kind::argmax, logits, 1, false);
}

// ---- expression-level front doors ----

namespace detail {

template <class Cfg, std::int64_t T>
struct gpt2_prefill_node : expr::node_base<expr::input_t<"input_ids", std::int32_t, T>,
                                           expr::input_t<"last", std::int32_t>> {
  static constexpr dtype type = dtype::i32;
  static constexpr dims shape = make_dims(1);
  static constexpr int emit(builder& b, std::array<int, 2> x) {
    return emit_gpt2_prefill<Cfg, T>(b, x[0], x[1]);
  }
};

template <class Cfg>
struct gpt2_decode_node : expr::node_base<expr::input_t<"input_ids", std::int32_t, 1>,
                                          expr::input_t<"pos", std::int32_t>> {
  static constexpr dtype type = dtype::i32;
  static constexpr dims shape = make_dims(1);
  static constexpr int emit(builder& b, std::array<int, 2> x) {
    return emit_gpt2_decode<Cfg>(b, x[0], x[1]);
  }
};

}  // namespace detail

// The output indices of both programs.
template <class Cfg>
struct gpt2_outputs {
  static constexpr int logits = 0;
  static constexpr int key(int layer) { return 1 + 2 * layer; }
  static constexpr int value(int layer) { return 2 + 2 * layer; }
  static constexpr int argmax = 1 + 2 * Cfg::layers;
};

template <class Cfg, std::int64_t T>
using gpt2_prefill_program = program<detail::gpt2_prefill_node<Cfg, T>>;
template <class Cfg>
using gpt2_decode_program = program<detail::gpt2_decode_node<Cfg>>;

template <class Cfg, std::int64_t T>
constexpr gpt2_prefill_program<Cfg, T> gpt2_prefill() {
  static_assert(T >= 1 && T <= Cfg::positions,
                "gpt2_prefill: the bucket must hold 1 to n_positions tokens");
  return {};
}
template <class Cfg>
constexpr gpt2_decode_program<Cfg> gpt2_decode() {
  return {};
}

}  // namespace fusedsl::models
