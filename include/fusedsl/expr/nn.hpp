#pragma once
// Neural-network composites. Row composites (softmax, log_softmax, layernorm, rmsnorm) are one
// graph node each; graph::expand writes them as primitives. Larger composites (linear, attention,
// feed-forward, transformer blocks) are single expression nodes that name their input once; their
// graph is written by ordinary constexpr functions over a graph::builder, so a model's type stays
// small and tree-shaped however deep it is.
#include <limits>
#include <string_view>
#include <tuple>

#include "fusedsl/expr/ops.hpp"
#include "fusedsl/expr/flatten.hpp"

namespace fusedsl {
namespace expr {

template <class A, int Axis, bool Log>
struct softmax_t : node_base<A> {
  static constexpr dtype type = A::type;
  static constexpr dims shape = A::shape;
  static constexpr int emit(builder& b, std::array<int, 1> x) { return b.softmax(x[0], Axis, Log); }
  static constexpr bool well_formed = axis_in_range(Axis, A::shape.rank) && is_floating(A::type) &&
                                      node_base<A>::operands_well_formed;
};

template <op_kind K, double Eps, class X, class... GB>
struct norm_t : node_base<X, GB...> {
  static constexpr dtype type = X::type;
  static constexpr dims shape = X::shape;
  static constexpr int emit(builder& b, std::array<int, 1 + sizeof...(GB)> x) {
    return b.norm(K, x[0], x[1], sizeof...(GB) == 2 ? x[sizeof...(GB)] : -1, Eps);
  }
  static constexpr bool well_formed =
      ((GB::shape == make_dims(X::shape.back()) && GB::type == X::type) && ...) &&
      node_base<X, GB...>::operands_well_formed;
};

// A composite whose graph is written by Fn::emit(builder&, int x) -> int.
template <class Fn, class X>
struct composite_t : node_base<X> {
  static constexpr dtype type = X::type;
  static constexpr dims shape = Fn::template result_shape<X>();
  static constexpr int emit(builder& b, std::array<int, 1> x) { return Fn::emit(b, x[0]); }
  static constexpr bool well_formed = [] {
    if constexpr (requires { Fn::template valid<X>(); }) return Fn::template valid<X>();
    else return true;
  }() && node_base<X>::operands_well_formed;
};

// A composite of an input and a mask: Fn::emit(builder&, int x, int mask) -> int.
template <class Fn, class X, class M>
struct masked_composite_t : node_base<X, M> {
  static constexpr dtype type = X::type;
  static constexpr dims shape = Fn::template result_shape<X>();
  static constexpr int emit(builder& b, std::array<int, 2> x) { return Fn::emit(b, x[0], x[1]); }
  static constexpr bool well_formed = [] {
    if constexpr (requires { Fn::template valid<X>(); }) return Fn::template valid<X>();
    else return true;
  }() && M::shape.rank == X::shape.rank - 1 && M::shape.back() == X::shape[X::shape.rank - 2] &&
                                      node_base<X, M>::operands_well_formed;
};

// A composite of several operands: Fn::emit(builder&, int x, int y...) -> int, the result of x's
// dtype and of Fn::result_shape<X>(); Fn::template valid<X, Ys...>() (if present) says whether
// the operands fit.
template <class Fn, class X, class... Ys>
struct composite_of_t : node_base<X, Ys...> {
  static constexpr dtype type = X::type;
  static constexpr dims shape = Fn::template result_shape<X>();
  static constexpr int emit(builder& b, std::array<int, 1 + sizeof...(Ys)> x) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return Fn::emit(b, x[I]...);
    }(std::make_index_sequence<1 + sizeof...(Ys)>{});
  }
  static constexpr bool well_formed = [] {
    if constexpr (requires { Fn::template valid<X, Ys...>(); })
      return Fn::template valid<X, Ys...>();
    else
      return true;
  }() && node_base<X, Ys...>::operands_well_formed;
};

// A block body applied Count times, with parameters named "<Name>.<i>.<param>".
template <fixed_string Name, int Count, class Block, class X>
struct repeat_t : node_base<X> {
  static constexpr dtype type = X::type;
  static constexpr dims shape = X::shape;
  static constexpr int emit(builder& b, std::array<int, 1> x) {
    const int ph = b.begin_region(X::type, X::shape);
    const int result = Block::emit_body(b, ph);
    const int body = b.end_region(result);
    return b.repeat(x[0], body, Count, Name.view());
  }
  static constexpr bool well_formed =
      Count >= 1 && Block::template valid<X>() && node_base<X>::operands_well_formed;
};

}  // namespace expr

// ---- row composites ----

template <int Axis = -1, expression A>
constexpr auto softmax(A) {
  (void)diag::softmax_axis<axis_in_range(Axis, A::shape.rank), Axis, expr::shape_t<A>>{};
  (void)diag::needs_floating<is_floating(A::type), graph::op_kind::softmax, A::type>{};
  return expr::softmax_t<A, Axis, false>{};
}
template <int Axis = -1, expression A>
constexpr auto log_softmax(A) {
  (void)diag::softmax_axis<axis_in_range(Axis, A::shape.rank), Axis, expr::shape_t<A>>{};
  (void)diag::needs_floating<is_floating(A::type), graph::op_kind::log_softmax, A::type>{};
  return expr::softmax_t<A, Axis, true>{};
}

namespace expr {
template <class X, class P>
inline constexpr bool is_row_param = P::shape == make_dims(X::shape.back()) && P::type == X::type;
}

// Layer normalisation over the last axis (Ba, Kiros & Hinton, 2016).
template <double Eps = 1e-5, expression X, expression G, expression B>
constexpr auto layernorm(X, G, B) {
  (void)diag::norm_params<expr::is_row_param<X, G> && expr::is_row_param<X, B>, expr::shape_t<X>,
                          expr::shape_t<G>>{};
  return expr::norm_t<graph::op_kind::layernorm, Eps, X, G, B>{};
}
// RMS normalisation over the last axis (Zhang & Sennrich, 2019).
template <double Eps = 1e-6, expression X, expression G>
constexpr auto rmsnorm(X, G) {
  (void)diag::norm_params<expr::is_row_param<X, G>, expr::shape_t<X>, expr::shape_t<G>>{};
  return expr::norm_t<graph::op_kind::rmsnorm, Eps, X, G>{};
}

namespace nn {

using graph::builder;
using graph::node;
using graph::op_kind;

// Activations are unary ops of the op table (graph/ops.hpp); these are the usual names.
namespace activation {
inline constexpr op_kind relu = op_kind::relu;
inline constexpr op_kind gelu = op_kind::gelu_erf;  // the exact (erf) form
inline constexpr op_kind gelu_tanh = op_kind::gelu_tanh;
inline constexpr op_kind silu = op_kind::silu;
inline constexpr op_kind sigmoid = op_kind::sigmoid;
}  // namespace activation

// The dtype weights are declared with: the input's (the default), or one given by `Weights`
// (float, bf16, f16); narrower weights are widened where they are read (a GEMM packs them).
struct same_as_input {};
template <class W>
constexpr dtype weight_dtype(dtype input) {
  if constexpr (std::is_same_v<W, same_as_input>) return input;
  else return dtype_of<W>;
}

// A parameter of dtype wt read as dtype t (a widening cast when they differ).
constexpr int param_as(builder& b, std::string_view name, dtype wt, dtype t, dims shape) {
  const int p = b.param(name, wt, shape);
  return wt == t ? p : b.cast(p, t);
}

// ---- graph-level definitions (constexpr functions over a builder) ----

// Newton's method; exact to the last bit for the perfect squares used as head sizes.
constexpr double sqrt_of(double v) {
  if (v <= 0) return 0;
  double r = v > 1 ? v : 1;
  for (int i = 0; i < 64; ++i) r = 0.5 * (r + v / r);
  return r;
}

// How a checkpoint names and lays out a layer's parameters: the linear layer's weight and bias, a
// norm's gamma and beta, and whether the weight is [In, Out] (y = x @ w) or [Out, In] (y = x @ wᵀ,
// torch.nn.Linear's layout).
enum class weight_layout : std::uint8_t { in_out, out_in };
struct layer_style {
  std::string_view weight = "w", bias = "b", gamma = "gamma", beta = "beta";
  weight_layout layout = weight_layout::in_out;
};
// fusedsl's own names ("<prefix>.w", "<prefix>.b", "<prefix>.gamma", "<prefix>.beta"), [In, Out].
inline constexpr layer_style fusedsl_layers{};
// Hugging Face's torch.nn.Linear and LayerNorm (BERT, LLaMA's projections): "weight" and "bias"
// for both, the weight [Out, In].
inline constexpr layer_style torch_linear_layers{"weight", "bias", "weight", "bias",
                                                 weight_layout::out_in};
// GPT-2's Conv1D: "weight" and "bias", the weight [In, Out].
inline constexpr layer_style conv1d_layers{"weight", "bias", "weight", "bias",
                                           weight_layout::in_out};

// The dtype of a layer's parameters other than an int8 linear weight's values: wt, or the input's
// where wt is not given or is i8 (biases, norms and scales stay in the input's dtype).
constexpr dtype dense_dtype(int wt, dtype input) {
  return wt < 0 || dtype(wt) == dtype::i8 ? input : dtype(wt);
}

// "<name>_scale": the per-output-channel scales of the int8 weight <name> (how compressed-tensors
// and io/quantized_weights.hpp name them).
constexpr node_name scale_name(std::string_view weight) {
  char buf[max_name + 6]{};
  std::size_t n = 0;
  for (char c : weight) buf[n++] = c;
  for (char c : std::string_view("_scale")) buf[n++] = c;
  return node_name(std::string_view(buf, n));
}

// y = x @ w + b, x: [..., In], the weight and bias named and laid out as `style` says, of dtype wt
// (the input's when wt is not given), widened to the input's dtype where they differ. An i8
// weight is quantized per output channel: its values (i8, "<weight>") and their scales ("<weight>
// _scale", f32, [Out, 1] for an [Out, In] weight, [1, Out] for [In, Out]: shaped to broadcast
// against the weight), y = (x @ widen(w)) * scale + b; the scale is the GEMM's epilogue and the
// values are read as int8 (docs/quantization.md).
constexpr int emit_linear(builder& b, int x, std::string_view prefix, std::int64_t out,
                          bool bias = true, int wt = -1,
                          const layer_style& style = fusedsl_layers) {
  const node& xn = b.at(x);
  const std::int64_t in = xn.shape.back();
  const dtype t = xn.type, w_t = wt < 0 ? t : dtype(wt);
  const bool out_in = style.layout == weight_layout::out_in;
  const node_name wn = join(prefix, style.weight);
  const int w = param_as(b, wn.view(), w_t, t, out_in ? make_dims(out, in) : make_dims(in, out));
  int y = b.matmul(x, w, false, out_in);
  if (w_t == dtype::i8) {
    const int s =
        b.param(scale_name(wn.view()).view(), t, out_in ? make_dims(out, 1) : make_dims(1, out));
    const int row = out_in ? b.reshape(s, make_dims(out)) : s;
    y = b.binary(op_kind::mul, y, row);
  }
  if (bias) {
    const int bv =
        param_as(b, join(prefix, style.bias).view(), dense_dtype(wt, t), t, make_dims(out));
    y = b.binary(op_kind::add, y, bv);
  }
  return y;
}

// LayerNorm over the last axis with gamma and beta named as `style` says, of dtype wt.
constexpr int emit_layernorm(builder& b, int x, std::string_view prefix, double eps = 1e-5,
                             int wt = -1, const layer_style& style = fusedsl_layers) {
  const dims row = make_dims(b.at(x).shape.back());
  const dtype t = b.at(x).type, w_t = dense_dtype(wt, t);
  // One builder call per statement: argument order differs between constant evaluation and run
  // time in GCC, and node ids must not.
  const int gamma = param_as(b, join(prefix, style.gamma).view(), w_t, t, row);
  const int beta = param_as(b, join(prefix, style.beta).view(), w_t, t, row);
  return b.norm(op_kind::layernorm, x, gamma, beta, eps);
}

// An activation: any elementwise unary op of the op table.
constexpr int emit_activation(builder& b, int x, op_kind a) {
  if (!graph::is_unary(a)) graph::fail("nn: an activation must be a unary op of the op table");
  return b.unary(a, x);
}

// Feed-forward: fc2(act(fc1(x))), hidden size `hidden`.
constexpr int emit_ffn(builder& b, int x, std::string_view prefix, std::int64_t hidden, op_kind a,
                       int wt = -1) {
  const std::int64_t d = b.at(x).shape.back();
  const int h =
      emit_activation(b, emit_linear(b, x, join(prefix, "fc1").view(), hidden, true, wt), a);
  return emit_linear(b, h, join(prefix, "fc2").view(), d, true, wt);
}

// Split the last axis into heads: [..., L, H*dh] -> [..., H, L, dh].
constexpr int split_heads(builder& b, int x, int heads) {
  const dims s = b.at(x).shape;
  dims r = s;
  r.rank = s.rank + 1;
  r[s.rank - 1] = heads;
  r[s.rank] = s.back() / heads;
  const int y = b.reshape(x, r);
  std::array<int, 4> p3{};  // rank 3 (no batch) or 4 (batch)
  if (s.rank == 2) {
    return b.transpose(y, std::array<int, 3>{1, 0, 2});
  }
  p3 = {0, 2, 1, 3};
  return b.transpose(y, p3);
}

// Merge heads: [..., H, L, dh] -> [..., L, H*dh].
constexpr int merge_heads(builder& b, int x) {
  const dims s = b.at(x).shape;
  int y;
  if (s.rank == 3) y = b.transpose(x, std::array<int, 3>{1, 0, 2});
  else y = b.transpose(x, std::array<int, 4>{0, 2, 1, 3});
  dims r = b.at(y).shape;
  r.rank -= 1;
  r[r.rank - 1] = s[s.rank - 3] * s[s.rank - 1];
  return b.reshape(y, r);
}

// An additive bias that broadcasts to [.., H, L, Lk] (r axes), as a value that broadcasts to the
// scores' layout [.., Hkv, G*L, Lk]: axes padded on the left to rank r; with grouped heads (G > 1)
// its head and query axes widened to H and L (a broadcast the kernel reads as a view) and split.
constexpr int scores_layout(builder& b, int bias, std::int64_t heads, std::int64_t kv_heads,
                            std::int64_t len, std::int64_t len_kv, int r) {
  const dims bs = b.at(bias).shape;
  if (bs.rank > r) graph::fail("attention: the bias must broadcast to [batch, heads, Lq, Lk]");
  dims padded;
  padded.rank = r;
  for (int c = 0; c < r; ++c) padded[c] = c < r - bs.rank ? 1 : bs[c - (r - bs.rank)];
  const std::int64_t want[3] = {heads, len, len_kv};
  for (int c = 0; c < 3; ++c)
    if (padded[r - 3 + c] != 1 && padded[r - 3 + c] != want[c])
      graph::fail("attention: the bias must broadcast to [batch, heads, Lq, Lk]");
  int out = bs.rank < r ? b.reshape(bias, padded) : bias;
  if (heads == kv_heads) return out;
  dims wide = padded;
  wide[r - 3] = heads;
  wide[r - 2] = len;
  if (!(wide == padded)) out = b.broadcast(out, wide);
  dims grouped = wide;
  grouped[r - 3] = kv_heads;
  grouped[r - 2] = (heads / kv_heads) * len;
  return b.reshape(out, grouped);
}

// How attention scores are made and masked, besides the heads (nn::attention_options).
struct score_options {
  bool causal = false;
  double scale = 0;         // 0: 1 / sqrt(head_dim); 1: none (T5)
  std::int64_t window = 0;  // > 0: a query sees keys within `window` positions of it (see below)
};

// Scaled dot-product attention over split heads (Vaswani et al., 2017), with grouped/multi-query
// heads (Ainslie et al., 2023): q [.., H, L, dh], k and v [.., Hkv, Lk, dh]; head h reads key/value
// head h / (H / Hkv). Returns the heads merged, [.., L, H * dh]. `mask` (-1: none) is a
// key-padding mask over the keys, [Lk] or [B, Lk]: boolean (true: attend; a query whose keys are
// all masked gets zeros) or floating (added to the scores, as frameworks' extended masks). `bias`
// (-1: none) is added to the scaled scores, any shape that broadcasts to [.., H, L, Lk] (a
// relative-position bias, ALiBi). Query i stands at key position i + Lk - L (the last query with
// the last key). Causal: it sees keys j at or before its position; a window w: keys less than w
// positions from it (before it, when causal; on either side otherwise). The causal select comes
// last, next to the softmax, so the attention kernel skips the blocks it masks (plan/lower.hpp);
// the bias and the window are the kernel's score program.
constexpr int emit_attention_core(builder& b, int q, int k, int v, score_options o, int mask = -1,
                                  int bias = -1) {
  const dims qs = b.at(q).shape, ks = b.at(k).shape;
  const int r = qs.rank;
  const std::int64_t heads = qs[r - 3], kv_heads = ks[r - 3], len = qs[r - 2], len_kv = ks[r - 2],
                     dh = qs[r - 1];
  const std::int64_t group = heads / kv_heads;
  // Queries of one group share a key/value head: fold the group into the rows, [.., Hkv, G*L, dh].
  dims qg = qs;
  qg[r - 3] = kv_heads;
  qg[r - 2] = group * len;
  const int qf = b.reshape(q, qg);
  int s = b.matmul(qf, k, false, true);  // [.., Hkv, G*L, Lk]
  const double scale = o.scale == 0 ? 1.0 / sqrt_of(double(dh)) : o.scale;
  if (scale != 1.0) s = b.binary(op_kind::mul, s, b.constant(scale));
  if (bias >= 0)
    s = b.binary(op_kind::add, s, scores_layout(b, bias, heads, kv_heads, len, len_kv, r));
  if (mask >= 0) {
    // [..., Lk] -> [..., 1, 1, Lk]: one row of key flags per sequence, over heads and queries.
    const dims ms = b.at(mask).shape;
    if (!(ms.back() == len_kv) || ms.rank != r - 2)
      graph::fail("attention: the mask must be [L] or [B, L] for x [L, D] or [B, L, D]");
    dims m4 = b.at(s).shape;
    for (int c = ms.rank - 1; c < m4.rank - 1; ++c) m4[c] = 1;
    const int mr = b.reshape(mask, m4);
    if (b.at(mask).type == dtype::boolean) {
      const int neg_inf = b.constant(-std::numeric_limits<double>::infinity());
      s = b.select(mr, s, neg_inf);
    } else {
      s = b.binary(op_kind::add, s, mr);
    }
  }
  if (o.causal || o.window > 0) {
    // [.., Hkv, G, L, Lk] so that one [L, Lk] mask broadcasts over heads and groups.
    dims s5 = b.at(s).shape;
    s5.rank += 1;
    s5[s5.rank - 1] = len_kv;
    s5[s5.rank - 2] = len;
    s5[s5.rank - 3] = group;
    int masked = b.reshape(s, s5);
    const dims ll = make_dims(len, len_kv);
    int rows = b.iota(dtype::i32, ll, 0);  // the query's key position
    if (len_kv != len) {
      const int shift = b.constant(double(len_kv - len), dtype::i32);
      rows = b.binary(op_kind::add, rows, shift);
    }
    const int cols = b.iota(dtype::i32, ll, 1);
    const int neg_inf = b.constant(-std::numeric_limits<double>::infinity());
    if (o.window > 0) {  // row - col < w and, unless causal, col - row < w: one select each
      const int w = b.constant(double(o.window), dtype::i32);
      masked =
          b.select(b.binary(op_kind::lt, b.binary(op_kind::sub, rows, cols), w), masked, neg_inf);
      if (!o.causal)
        masked =
            b.select(b.binary(op_kind::lt, b.binary(op_kind::sub, cols, rows), w), masked, neg_inf);
    }
    if (o.causal) masked = b.select(b.binary(op_kind::ge, rows, cols), masked, neg_inf);
    s = b.reshape(masked, b.at(s).shape);
  }
  const int p = b.softmax(s, -1);
  const int pv = b.matmul(p, v);  // [.., Hkv, G*L, dh]
  dims oh = b.at(pv).shape;
  oh[r - 3] = heads;
  oh[r - 2] = len;
  return merge_heads(b, b.reshape(pv, oh));
}

// Multi-head attention: projections q, k, v, o (each .w and .b, under "<prefix>") around
// emit_attention_core. x: [L, D] or [B, L, D], the queries; context: [Lk, Dc] or [B, Lk, Dc], the
// keys and values (x itself for self-attention); mask and bias as emit_attention_core's (the mask
// over the context's positions).
constexpr int emit_attention_with(builder& b, int x, int context, std::string_view prefix,
                                  int heads, int kv_heads, score_options o, int mask = -1,
                                  int bias = -1, int wt = -1) {
  const dims xs = b.at(x).shape;
  const std::int64_t d = xs.back(), dh = d / heads;
  const int q = split_heads(b, emit_linear(b, x, join(prefix, "q").view(), d, true, wt), heads);
  const int k = split_heads(
      b, emit_linear(b, context, join(prefix, "k").view(), kv_heads * dh, true, wt), kv_heads);
  const int v = split_heads(
      b, emit_linear(b, context, join(prefix, "v").view(), kv_heads * dh, true, wt), kv_heads);
  const int a = emit_attention_core(b, q, k, v, o, mask, bias);
  return emit_linear(b, a, join(prefix, "o").view(), d, true, wt);
}

// Multi-head self-attention (emit_attention_with over x's own positions).
constexpr int emit_attention(builder& b, int x, std::string_view prefix, int heads, int kv_heads,
                             bool causal, int mask = -1, int wt = -1) {
  return emit_attention_with(b, x, x, prefix, heads, kv_heads, {.causal = causal}, mask, -1, wt);
}

struct post_ln {};  // y = LN(x + f(x)), the original Transformer
struct pre_ln {};   // y = x + f(LN(x)), GPT-2 and most current models

// One transformer block (pre- or post-LN); mask: a key-padding mask (see emit_attention) or -1;
// wt: the weights' dtype or -1 (the input's).
constexpr int emit_transformer_block(builder& b, int x, bool pre, int heads, int kv_heads,
                                     std::int64_t hidden, bool causal, op_kind act,
                                     double eps = 1e-5, int mask = -1, int wt = -1,
                                     std::string_view prefix = "") {
  const auto name = [&](std::string_view n) { return join(prefix, n); };
  if (pre) {
    const int a = emit_attention(b, emit_layernorm(b, x, name("ln1").view(), eps, wt),
                                 name("attn").view(), heads, kv_heads, causal, mask, wt);
    const int h = b.binary(op_kind::add, x, a);
    const int f = emit_ffn(b, emit_layernorm(b, h, name("ln2").view(), eps, wt), name("ffn").view(),
                           hidden, act, wt);
    return b.binary(op_kind::add, h, f);
  }
  const int a = emit_attention(b, x, name("attn").view(), heads, kv_heads, causal, mask, wt);
  const int h = emit_layernorm(b, b.binary(op_kind::add, x, a), name("ln1").view(), eps, wt);
  const int f = emit_ffn(b, h, name("ffn").view(), hidden, act, wt);
  return emit_layernorm(b, b.binary(op_kind::add, h, f), name("ln2").view(), eps, wt);
}

// ---- expression-level front doors ----

namespace detail {
template <class X>
inline constexpr bool is_sequence = (X::shape.rank == 2 || X::shape.rank == 3);

template <class X, int Heads, int KvHeads>
constexpr bool attention_valid() {
  return is_sequence<X> && Heads > 0 && X::shape.back() % Heads == 0 && KvHeads > 0 &&
         Heads % KvHeads == 0;
}

template <class X, int Heads, int KvHeads>
constexpr void check_attention() {
  (void)diag::sequence_input<is_sequence<X>, expr::shape_t<X>>{};
  (void)diag::heads_divide_model<(Heads > 0 && X::shape.back() % Heads == 0), X::shape.back(),
                                 Heads>{};
  (void)diag::kv_heads_divide_heads<(KvHeads > 0 && Heads % KvHeads == 0), Heads, KvHeads>{};
}
}  // namespace detail

template <fixed_string Prefix, std::int64_t Out, bool Bias, class W>
struct linear_fn {
  template <class X> static constexpr dims result_shape() {
    dims s = X::shape;
    s[s.rank - 1] = Out;
    return s;
  }
  static constexpr int emit(builder& b, int x) {
    return emit_linear(b, x, Prefix.view(), Out, Bias, int(weight_dtype<W>(b.at(x).type)));
  }
};

// y = x @ w + b with params "<Prefix>.w" [In, Out] and "<Prefix>.b" [Out], of dtype W (the
// input's by default).
template <fixed_string Prefix, std::int64_t Out, bool Bias = true, class W = same_as_input,
          expression X>
constexpr auto linear(X) {
  static_assert(X::shape.rank >= 1, "linear: the input must have rank 1 or more");
  return expr::composite_t<linear_fn<Prefix, Out, Bias, W>, X>{};
}

template <fixed_string Prefix, int Heads, int KvHeads, bool Causal, class W>
struct attention_fn {
  template <class X> static constexpr dims result_shape() { return X::shape; }
  template <class X>
  static constexpr bool valid() {
    return detail::attention_valid<X, Heads, KvHeads>();
  }
  static constexpr int emit(builder& b, int x, int mask = -1) {
    return emit_attention(b, x, Prefix.view(), Heads, KvHeads, Causal, mask,
                          int(weight_dtype<W>(b.at(x).type)));
  }
};

struct causal_t {};
inline constexpr bool causal = true;

namespace detail {
template <class X, class M>
constexpr void check_mask() {
  (void)diag::attention_mask<M::shape.rank == X::shape.rank - 1 &&
                                 M::shape.back() == X::shape[X::shape.rank - 2] &&
                                 (M::type == dtype::boolean || M::type == X::type),
                             expr::shape_t<X>, expr::shape_t<M>>{};
}
}  // namespace detail

// Multi-head self-attention with params under Prefix; KvHeads < Heads gives grouped/multi-query.
template <fixed_string Prefix, int Heads, int KvHeads = Heads, bool Causal = false,
          class W = same_as_input, expression X>
constexpr auto attention(X) {
  detail::check_attention<X, Heads, KvHeads>();
  return expr::composite_t<attention_fn<Prefix, Heads, KvHeads, Causal, W>, X>{};
}
// The same with a key-padding mask: [L] or [B, L] for x [L, D] or [B, L, D]; boolean (true:
// attend) or of x's dtype (added to the scores).
template <fixed_string Prefix, int Heads, int KvHeads = Heads, bool Causal = false,
          class W = same_as_input, expression X, expression M>
constexpr auto attention(X, M) {
  detail::check_attention<X, Heads, KvHeads>();
  detail::check_mask<X, M>();
  return expr::masked_composite_t<attention_fn<Prefix, Heads, KvHeads, Causal, W>, X, M>{};
}

// nn::attention's options, for attention beyond self-attention with a key-padding mask:
//   attention<"attn", attention_options{.heads = 8, .context = true, .bias = true}>(x, enc, bias)
// The operands are x (the queries), then in this order those the options name: the context (the
// keys' and values' sequence, cross-attention), the bias, the key-padding mask.
struct attention_options {
  int heads = 0;
  int kv_heads = 0;     // 0: heads (multi-head); fewer: grouped/multi-query
  bool causal = false;  // query i sees keys at or before its position (i + Lk - Lq)
  double scale = 0;     // the scores' factor; 0: 1 / sqrt(head_dim); 1: none (T5)
  std::int64_t window =
      0;                 // > 0: keys less than `window` positions from the query (sliding window)
  bool context = false;  // an operand [Lk, Dc] / [B, Lk, Dc] holds the keys' and values' sequence
  bool bias = false;     // an operand added to the scaled scores, broadcast to [B, H, Lq, Lk]
  bool mask = false;     // a key-padding mask over the keys, [Lk] or [B, Lk] (see attention)
  constexpr int kv() const { return kv_heads == 0 ? heads : kv_heads; }
  constexpr int operands() const { return 1 + int(context) + int(bias) + int(mask); }
};

namespace detail {
template <class X, class B>
constexpr bool bias_broadcasts(std::int64_t heads, std::int64_t len_kv) {
  const int r = X::shape.rank + 1;  // [batch..., H, Lq, Lk]
  if (B::shape.rank > r || B::type != X::type) return false;
  dims want;
  want.rank = r;
  for (int c = 0; c < r - 3; ++c) want[c] = X::shape[c];
  want[r - 3] = heads;
  want[r - 2] = X::shape[X::shape.rank - 2];
  want[r - 1] = len_kv;
  for (int c = 0; c < B::shape.rank; ++c) {
    const std::int64_t e = B::shape[c], w = want[r - B::shape.rank + c];
    if (e != 1 && e != w) return false;
  }
  return true;
}

template <attention_options O, class X, class... Ys>
constexpr void check_attention_roles() {
  using ops = std::tuple<X, Ys...>;
  check_attention<X, O.heads, O.kv()>();
  constexpr int ic = 1, ib = 1 + int(O.context), im = ib + int(O.bias);
  using C = std::tuple_element_t<O.context ? ic : 0, ops>;
  (void)diag::attention_context<C::shape.rank == X::shape.rank && C::type == X::type &&
                                    (X::shape.rank == 2 || C::shape[0] == X::shape[0]),
                                expr::shape_t<X>, expr::shape_t<C>>{};
  constexpr std::int64_t len_kv = C::shape[C::shape.rank - 2];
  if constexpr (O.bias) {
    using B = std::tuple_element_t<ib, ops>;
    (void)diag::attention_bias<bias_broadcasts<X, B>(O.heads, len_kv), expr::shape_t<B>>{};
  }
  if constexpr (O.mask) check_mask<C, std::tuple_element_t<im, ops>>();
}

template <attention_options O, class X, class... Ys>
constexpr void check_attention_operands() {
  static_assert(O.heads > 0, "attention: attention_options needs .heads");
  static_assert(sizeof...(Ys) + 1 == O.operands(),
                "attention: the operands must be x, then those the options name, in this order: "
                "the context (.context), the bias (.bias), the mask (.mask)");
  if constexpr (O.heads > 0 && sizeof...(Ys) + 1 == O.operands())
    check_attention_roles<O, X, Ys...>();
}

}  // namespace detail

template <fixed_string Prefix, attention_options O, class W>
struct attention_with_fn {
  template <class X>
  static constexpr dims result_shape() {
    return X::shape;
  }
  template <class X, class... Ys>
  static constexpr bool valid() {
    return detail::attention_valid<X, O.heads, O.kv()>();
  }
  template <class... I>
  static constexpr int emit(builder& b, int x, I... rest) {
    const int ids[] = {x, rest..., -1};
    int next = 1;
    const int context = O.context ? ids[next++] : x;
    const int bias = O.bias ? ids[next++] : -1;
    const int mask = O.mask ? ids[next] : -1;
    return emit_attention_with(b, x, context, Prefix.view(), O.heads, O.kv(),
                               {.causal = O.causal, .scale = O.scale, .window = O.window}, mask,
                               bias, int(weight_dtype<W>(b.at(x).type)));
  }
};

// Attention as the options say: cross-attention (keys and values from a context of its own length
// and width), an additive bias, no or another scale, causal and sliding-window masks, a key-padding
// mask, grouped/multi-query heads; params under Prefix as attention's ("<Prefix>.q.w", ...).
template <fixed_string Prefix, attention_options O, class W = same_as_input, expression X,
          expression... Ys>
constexpr auto attention(X, Ys...) {
  detail::check_attention_operands<O, X, Ys...>();
  return expr::composite_of_t<attention_with_fn<Prefix, O, W>, X, Ys...>{};
}

template <fixed_string Prefix, std::int64_t Hidden, op_kind Act, class W>
struct ffn_fn {
  template <class X> static constexpr dims result_shape() { return X::shape; }
  static constexpr int emit(builder& b, int x) {
    return emit_ffn(b, x, Prefix.view(), Hidden, Act, int(weight_dtype<W>(b.at(x).type)));
  }
};

template <fixed_string Prefix, std::int64_t Hidden, op_kind Act = activation::gelu_tanh,
          class W = same_as_input, expression X>
constexpr auto feed_forward(X) {
  (void)diag::sequence_input<X::shape.rank >= 1, expr::shape_t<X>>{};
  static_assert(graph::is_unary(Act), "feed_forward: the activation must be a unary op");
  return expr::composite_t<ffn_fn<Prefix, Hidden, Act, W>, X>{};
}

// A transformer block as a value: `block(x)` applies it once (params "attn.q.w", "ln1.gamma", ...);
// `block(x, mask)` with a key-padding mask; `stack<"layers", N>(block, x)` applies it N times with
// params "layers.<i>.attn.q.w", ... Eps: the layernorms' epsilon; W: the weights' dtype.
template <class Norm, int Heads, std::int64_t Hidden, int KvHeads = Heads, bool Causal = false,
          op_kind Act = activation::gelu_tanh, double Eps = 1e-5, class W = same_as_input>
struct transformer_block_t {
  static_assert(graph::is_unary(Act), "transformer_block: the activation must be a unary op");
  template <class X> static constexpr dims result_shape() { return X::shape; }
  template <class X>
  static constexpr bool valid() {
    return detail::attention_valid<X, Heads, KvHeads>();
  }
  static constexpr int emit(builder& b, int x, int mask = -1) {
    return emit_transformer_block(b, x, std::is_same_v<Norm, pre_ln>, Heads, KvHeads, Hidden,
                                  Causal, Act, Eps, mask, int(weight_dtype<W>(b.at(x).type)));
  }
  static constexpr int emit_body(builder& b, int x) { return emit(b, x); }

  template <expression X>
  constexpr auto operator()(X) const {
    detail::check_attention<X, Heads, KvHeads>();
    return expr::composite_t<transformer_block_t, X>{};
  }
  template <expression X, expression M>
  constexpr auto operator()(X, M) const {
    detail::check_attention<X, Heads, KvHeads>();
    detail::check_mask<X, M>();
    return expr::masked_composite_t<transformer_block_t, X, M>{};
  }
  template <class X> static constexpr void check() { detail::check_attention<X, Heads, KvHeads>(); }
};

template <class Norm, int Heads, std::int64_t Hidden, int KvHeads = Heads, bool Causal = false,
          op_kind Act = activation::gelu_tanh, double Eps = 1e-5, class W = same_as_input>
inline constexpr transformer_block_t<Norm, Heads, Hidden, KvHeads, Causal, Act, Eps, W>
    transformer_block{};

// Any callable from an expression to an expression of the same shape can be a block:
// stack<"layers", 4>(fd::nn::block([](auto x) { return x + fd::gelu(x); }), x).
template <class F>
struct block_t {
  template <class X> static constexpr dims result_shape() { return X::shape; }
  template <class X> static constexpr void check() {
    using Y = decltype(std::declval<F>()(X{}));
    (void)diag::block_shape<Y::shape == X::shape && Y::type == X::type, expr::shape_t<Y>>{};
  }
  template <class X> struct body {
    template <class Y> static constexpr bool valid() {
      using R = decltype(std::declval<F>()(expr::placeholder_t<Y::type, Y::shape>{}));
      return R::shape == Y::shape && R::type == Y::type && expr::well_formed_of<R>();
    }
    static constexpr int emit_body(builder& b, int x) {
      using Y = decltype(std::declval<F>()(expr::placeholder_t<X::type, X::shape>{}));
      return expr::emit_expression<Y>(b, x);
    }
  };
};
template <class F>
constexpr block_t<F> block(F) { return {}; }

namespace detail {
template <class Block, class X> struct body_of { using type = Block; };
template <class F, class X>
struct body_of<block_t<F>, X> {
  using type = typename block_t<F>::template body<X>;
};
}  // namespace detail

// Apply `block` Count times, each with its own parameters "<Name>.<i>.<param>". The block's graph
// is built and planned once, as a region of the node table, whatever Count is.
template <fixed_string Name, int Count, class Block, expression X>
constexpr auto stack(Block, X) {
  static_assert(Count >= 1, "stack: the number of layers must be positive");
  Block::template check<X>();
  return expr::repeat_t<Name, Count, typename detail::body_of<Block, X>::type, X>{};
}

}  // namespace nn
}  // namespace fusedsl
