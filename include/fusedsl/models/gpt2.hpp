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
// Every layer is the same program (its parameter names are the layer's without the "h.<i>."
// prefix), instantiated once and run by one executor per layer with that layer's weights, so what
// the compiler builds does not grow with the number of layers:
//   prefill of a bucket of T tokens (the prompt padded after its end; causal attention keeps the
//   padding out of the real rows):
//     gpt2_prefill_embed_program<Cfg, T>  "input_ids" [T] i32 -> h [T, D] (positions 0..T-1)
//     gpt2_prefill_layer_program<Cfg, T>  "x" [T, D] -> keys, values [H, T, Dh] and y [T, D]
//     gpt2_head_program<Cfg, T>           "h" [T, D], "last" i32 -> the logits [1, V] of row
//                                         last, their argmax [1] i32
//   one decode step (one token at the run-time position "pos"):
//     gpt2_decode_embed_program<Cfg>      "input_ids" [1], "pos" -> h [1, D]
//     gpt2_decode_layer_program<Cfg>      "x" [1, D], "pos" -> y [1, D]; keeps the layer's keys
//                                         and values in the states "attn.k_cache" and
//                                         "attn.v_cache" [H, n_positions, Dh] (f32 or bf16: the
//                                         config's cache dtype), writes the step's
//                                         at row pos (a dynamic update slice, in place) and
//                                         attends over rows 0..pos only: the attention kernel
//                                         stops at pos + 1, whatever the capacity
//     gpt2_head_program<Cfg, 1>
// runtime/gpt2_generator.hpp chains them and binds a checkpoint.
#include <array>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "fusedsl/compile.hpp"
#include "fusedsl/expr/nn.hpp"

namespace fusedsl::models {

using graph::builder;
using graph::op_kind;

// The hyper-parameters of a GPT-2: n_layer, n_embd, n_head, vocab_size, n_positions, the weights'
// dtype (float, bf16, f16: narrower weights are widened where they are read; std::int8_t: the
// linear layers' and the tied embedding's matrices quantized per output channel, with f32 scales,
// biases, norms and position embeddings: nn::emit_linear), n_inner,
// layer_norm_epsilon and the KV cache's dtype (float or bf16: each new key and value rounded to
// bf16 as it is stored, read by the decode attention as bf16 and widened as loaded; half the
// cache's bytes). with_cache<C> is the same model with a cache of dtype C.
template <int Layers, std::int64_t D, int Heads, std::int64_t Vocab, std::int64_t Positions,
          class W = float, std::int64_t Inner = 4 * D, double Eps = 1e-5, class Cache = float>
struct gpt2_config {
  static_assert(Layers >= 1, "gpt2_config: at least one layer");
  static_assert(Heads >= 1 && D % Heads == 0, "gpt2_config: the heads must divide n_embd");
  static_assert(Vocab >= 1 && Positions >= 1 && Inner >= 1, "gpt2_config: sizes must be positive");
  static constexpr int layers = Layers, heads = Heads;
  static constexpr std::int64_t d = D, vocab = Vocab, positions = Positions, inner = Inner,
                                head_dim = D / Heads;
  static constexpr double eps = Eps;
  static_assert(std::is_same_v<Cache, float> || std::is_same_v<Cache, bf16>,
                "gpt2_config: the KV cache is float or bf16");
  using weight_type = W;
  using cache_type = Cache;
  static constexpr dtype weight_dtype = dtype_of<W>, cache_dtype = dtype_of<Cache>;
  template <class C>
  using with_cache = gpt2_config<Layers, D, Heads, Vocab, Positions, W, Inner, Eps, C>;
  // Bytes of weights read per decoded token (the embedding table once, as the LM head) and of one
  // cached position over all layers (keys and values, in the cache's dtype).
  // int8 weights: the matrices' values in bytes, their per-channel scales, biases and norms f32.
  static constexpr double weight_bytes() {
    const double dd = double(D), f = double(Inner), v = double(Vocab);
    const double wb = double(sizeof(W)), db = std::is_same_v<W, std::int8_t> ? 4.0 : wb;
    const double sb = std::is_same_v<W, std::int8_t> ? 4.0 : 0.0;  // a scale per output channel
    const double matrices = dd * 3 * dd + dd * dd + dd * f + f * dd,
                 channels = 3 * dd + dd + f + dd;
    const double per_layer = matrices * wb + channels * (db + sb) + 4 * dd * db;
    return double(Layers) * per_layer + v * (dd * wb + sb) + 2 * dd * db;
  }
  static constexpr double cache_bytes_per_position() {
    return 2.0 * Layers * double(D) * double(sizeof(Cache));
  }
};

// GPT-2 small and medium (the released checkpoints' shapes).
using gpt2_small_config = gpt2_config<12, 768, 12, 50257, 1024>;
using gpt2_medium_config = gpt2_config<24, 1024, 16, 50257, 1024>;

// ---- graph-level definitions ----

struct gpt2_heads {
  int q, k, v;  // [H, T, Dh] each
};

// LN_1 and the fused c_attn projection of layer `prefix` over x [T, D], split into heads.
constexpr gpt2_heads emit_gpt2_qkv(builder& b, int x, std::string_view prefix, int heads,
                                   double eps, dtype wt) {
  const std::int64_t d = b.at(x).shape.back();
  const int a =
      nn::emit_layernorm(b, x, join(prefix, "ln_1").view(), eps, int(wt), nn::conv1d_layers);
  const int qkv = nn::emit_linear(b, a, join(prefix, "attn.c_attn").view(), 3 * d, true, int(wt),
                                  nn::conv1d_layers);
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
  const int o = nn::emit_linear(b, ctx, join(prefix, "attn.c_proj").view(), d, true, int(wt),
                                nn::conv1d_layers);
  const int h = b.binary(op_kind::add, o, x);
  const int m =
      nn::emit_layernorm(b, h, join(prefix, "ln_2").view(), eps, int(wt), nn::conv1d_layers);
  const int f = nn::emit_linear(b, m, join(prefix, "mlp.c_fc").view(), inner, true, int(wt),
                                nn::conv1d_layers);
  const int g = b.unary(op_kind::gelu_tanh, f);
  const int p =
      nn::emit_linear(b, g, join(prefix, "mlp.c_proj").view(), d, true, int(wt), nn::conv1d_layers);
  return b.binary(op_kind::add, p, h);
}

// wte[ids] + wpe[positions]: positions 0..T-1 (pos < 0) or the one run-time position pos.
// An int8 wte: its rows' values times their scales ("wte.weight_scale" [V, 1], the LM head's per
// output channel scales).
constexpr int emit_gpt2_embeddings(builder& b, int ids, int pos, std::int64_t vocab,
                                   std::int64_t positions, std::int64_t d, dtype wt) {
  const std::int64_t len = b.at(ids).shape.back();
  const int wte = b.param("wte.weight", wt, make_dims(vocab, d));
  const int words = b.gather(wte, ids);
  int w = b.cast(words, dtype::f32);
  if (wt == dtype::i8) {
    const int ws = b.param("wte.weight_scale", dtype::f32, make_dims(vocab, 1));
    const int rows = b.gather(ws, ids);
    w = b.binary(op_kind::mul, w, rows);
  }
  const int wpe =
      b.param("wpe.weight", nn::dense_dtype(int(wt), dtype::f32), make_dims(positions, d));
  const int rows = pos < 0 ? b.slice(wpe, 0, 0, len) : b.dynamic_slice(wpe, pos, 0, 1);
  const int p = b.cast(rows, dtype::f32);
  return b.binary(op_kind::add, w, p);
}

// LN_f and the tied LM head over x [1, D]: the logits [1, V].
constexpr int emit_gpt2_head(builder& b, int x, std::int64_t vocab, double eps, dtype wt) {
  const std::int64_t d = b.at(x).shape.back();
  const int f = nn::emit_layernorm(b, x, "ln_f", eps, int(wt), nn::conv1d_layers);
  const int wte = nn::param_as(b, "wte.weight", wt, dtype::f32, make_dims(vocab, d));
  const int logits = b.matmul(f, wte, false, true);
  if (wt != dtype::i8) return logits;
  const int ws = b.param("wte.weight_scale", dtype::f32, make_dims(vocab, 1));
  const int row = b.reshape(ws, make_dims(vocab));
  return b.binary(op_kind::mul, logits, row);
}

// One layer over x [T, D] at positions 0..T-1 (prefill): marks its keys and values [H, T, Dh] as
// outputs 0 and 1; returns the layer's output [T, D].
template <class Cfg>
constexpr int emit_gpt2_prefill_layer(builder& b, int x) {
  const dtype wt = Cfg::weight_dtype;
  const gpt2_heads a = emit_gpt2_qkv(b, x, "", Cfg::heads, Cfg::eps, wt);
  const int ctx = nn::emit_attention_core(b, a.q, a.k, a.v, {.causal = true});
  b.mark_output(a.k);
  b.mark_output(a.v);
  return emit_gpt2_block_tail(b, x, ctx, "", Cfg::inner, Cfg::eps, wt);
}

// One layer over x [1, D] at the run-time position pos (decode): the key and value go into row
// pos of the states "attn.k_cache" and "attn.v_cache" [H, n_positions, Dh] (outputs 0 and 1, their
// new values) and the query attends over rows 0..pos; returns the layer's output [1, D].
template <class Cfg>
constexpr int emit_gpt2_decode_layer(builder& b, int x, int pos) {
  const dtype wt = Cfg::weight_dtype;
  const std::int64_t cap = Cfg::positions;
  const gpt2_heads a = emit_gpt2_qkv(b, x, "", Cfg::heads, Cfg::eps, wt);
  const dims cache_shape = make_dims(Cfg::heads, cap, Cfg::head_dim);
  const dtype ct = Cfg::cache_dtype;
  const int kc = b.state("attn.k_cache", ct, cache_shape);
  const int vc = b.state("attn.v_cache", ct, cache_shape);
  // A bf16 cache: the new row rounded as it is stored, the cache widened where it is read (the
  // attention reads it as bf16 through that cast).
  auto narrow = [&](int x) { return ct == dtype::f32 ? x : b.cast(x, ct); };
  auto widen = [&](int x) { return ct == dtype::f32 ? x : b.cast(x, dtype::f32); };
  const int k2 = b.dynamic_update_slice(kc, narrow(a.k), pos, 1);
  const int v2 = b.dynamic_update_slice(vc, narrow(a.v), pos, 1);
  const int s = b.matmul(a.q, widen(k2), false, true);  // [H, 1, cap]
  const int scale = b.constant(1.0 / nn::sqrt_of(double(Cfg::head_dim)));
  const int ss = b.binary(op_kind::mul, s, scale);
  const int keys = b.iota(dtype::i32, make_dims(1, cap), 1);
  const int visible = b.binary(op_kind::le, keys, pos);
  const int ninf = b.constant(-std::numeric_limits<double>::infinity());
  const int masked = b.select(visible, ss, ninf);
  const int p = b.softmax(masked, 2);
  const int o = b.matmul(p, widen(v2));  // [H, 1, Dh]
  const int ctx = nn::merge_heads(b, o);
  b.mark_output(k2, kc);
  b.mark_output(v2, vc);
  return emit_gpt2_block_tail(b, x, ctx, "", Cfg::inner, Cfg::eps, wt);
}

// ---- the programs ----

namespace detail {

template <class Cfg, std::int64_t T>
struct gpt2_prefill_embed_node : expr::node_base<expr::input_t<"input_ids", std::int32_t, T>> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape = make_dims(T, Cfg::d);
  static constexpr int emit(builder& b, std::array<int, 1> x) {
    return emit_gpt2_embeddings(b, x[0], -1, Cfg::vocab, Cfg::positions, Cfg::d, Cfg::weight_dtype);
  }
};

template <class Cfg>
struct gpt2_decode_embed_node : expr::node_base<expr::input_t<"input_ids", std::int32_t, 1>,
                                                expr::input_t<"pos", std::int32_t>> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape = make_dims(1, Cfg::d);
  static constexpr int emit(builder& b, std::array<int, 2> x) {
    return emit_gpt2_embeddings(b, x[0], x[1], Cfg::vocab, Cfg::positions, Cfg::d,
                                Cfg::weight_dtype);
  }
};

template <class Cfg, std::int64_t T>
struct gpt2_prefill_layer_node : expr::node_base<expr::input_t<"x", float, T, Cfg::d>> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape = make_dims(T, Cfg::d);
  static constexpr int emit(builder& b, std::array<int, 1> x) {
    return emit_gpt2_prefill_layer<Cfg>(b, x[0]);
  }
};

template <class Cfg>
struct gpt2_decode_layer_node
    : expr::node_base<expr::input_t<"x", float, 1, Cfg::d>, expr::input_t<"pos", std::int32_t>> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape = make_dims(1, Cfg::d);
  static constexpr int emit(builder& b, std::array<int, 2> x) {
    return emit_gpt2_decode_layer<Cfg>(b, x[0], x[1]);
  }
};

// LN_f and the LM head over row `last` of h [T, D]: marks the logits [1, V] as output 0; returns
// their argmax [1] i32.
template <class Cfg, std::int64_t T>
struct gpt2_head_node
    : expr::node_base<expr::input_t<"h", float, T, Cfg::d>, expr::input_t<"last", std::int32_t>> {
  static constexpr dtype type = dtype::i32;
  static constexpr dims shape = make_dims(1);
  static constexpr int emit(builder& b, std::array<int, 2> x) {
    const int row = T == 1 ? x[0] : b.dynamic_slice(x[0], x[1], 0, 1);
    const int logits = emit_gpt2_head(b, row, Cfg::vocab, Cfg::eps, Cfg::weight_dtype);
    b.mark_output(logits);
    return b.reduce(op_kind::argmax, logits, 1, false);
  }
};

}  // namespace detail

// The output indices of the programs.
struct gpt2_outputs {
  static constexpr int key = 0, value = 1, hidden = 2;  // a layer's
  static constexpr int logits = 0, argmax = 1;          // the head's
};

// The embeddings of a bucket of T tokens at positions 0..T-1: "input_ids" [T] -> [T, D].
template <class Cfg, std::int64_t T>
using gpt2_prefill_embed_program = program<detail::gpt2_prefill_embed_node<Cfg, T>>;
// The embedding of one token at the run-time position "pos": "input_ids" [1] -> [1, D].
template <class Cfg>
using gpt2_decode_embed_program = program<detail::gpt2_decode_embed_node<Cfg>>;
// One layer over a bucket, "x" [T, D]: outputs its keys, values (for the cache) and its output.
template <class Cfg, std::int64_t T>
using gpt2_prefill_layer_program = program<detail::gpt2_prefill_layer_node<Cfg, T>>;
// One layer's decode step, "x" [1, D] at "pos": updates its caches (outputs 0, 1), output 2.
template <class Cfg>
using gpt2_decode_layer_program = program<detail::gpt2_decode_layer_node<Cfg>>;
// LN_f and the tied LM head over row "last" of "h" [T, D] (T = 1: the decode step's, which has
// no "last").
template <class Cfg, std::int64_t T>
using gpt2_head_program = program<detail::gpt2_head_node<Cfg, T>>;

}  // namespace fusedsl::models
