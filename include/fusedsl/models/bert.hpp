#pragma once
// A BERT encoder (Devlin et al., 2019) as fusedsl composites, with the parameter names and shapes
// of Hugging Face's BertModel checkpoints, so that a checkpoint binds by name as it is:
//
//   x = LN(word[ids] + type[0] + position[0..L-1])                     "embeddings.*"
//   per layer (post-LN):                                               "encoder.layer.<i>.*"
//     a = LN(x + dense_o(attention(query(x), key(x), value(x), mask)))  attention.{self,output}
//     y = LN(a + dense_out(gelu(dense_in(a))))                          intermediate, output
//   sentence embedding: the mean of the last layer's rows the mask keeps, L2-normalised
//   (sentence-transformers' Pooling(mean) and Normalize modules).
//
// Inputs: "input_ids" [B, L] i32 and "attention_mask" [B, L] bool (true: a real token). Every
// token has token type 0 (sentence-transformers' single-sentence models). Linear weights are
// stored [out, in], as torch.nn.Linear keeps them, and read transposed by the matmul (the GEMM
// packs them at bind; nothing is copied). Names (HF BERT, no "bert." prefix):
//   embeddings.{word_embeddings,position_embeddings,token_type_embeddings}.weight
//   embeddings.LayerNorm.{weight,bias}
//   encoder.layer.<i>.attention.self.{query,key,value}.{weight,bias}
//   encoder.layer.<i>.attention.output.{dense,LayerNorm}.{weight,bias}
//   encoder.layer.<i>.intermediate.dense.{weight,bias}
//   encoder.layer.<i>.output.{dense,LayerNorm}.{weight,bias}
// bert_checkpoint_name() (models/bert_names.hpp) maps the names other BERT checkpoints use to
// these.
//
// The layers are one repeated block (nn::stack's region): the mask is read inside it as an input
// of the same name, shared by the layers. The CPU executor lists such an input once per layer
// ("encoder.layer.3.attention_mask"); bind_input() binds every one of them.
#include <optional>
#include <string>
#include <string_view>

#include "fusedsl/compile.hpp"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/models/bert_names.hpp"
#include "fusedsl/plan/report.hpp"

namespace fusedsl::models {

using graph::builder;
using graph::op_kind;

// The hyper-parameters of a BERT encoder. W: the weights' dtype (float, bf16, f16); narrower
// weights are widened where they are read.
template <int Layers, std::int64_t D, int Heads, std::int64_t Hidden, double Eps = 1e-12,
          class W = float, std::int64_t Vocab = 30522, std::int64_t MaxPositions = 512,
          std::int64_t TypeVocab = 2>
struct bert_config {
  static_assert(Layers >= 1, "bert_config: at least one layer");
  static_assert(Heads >= 1 && D % Heads == 0, "bert_config: the heads must divide the hidden size");
  static_assert(Hidden >= 1 && Vocab >= 1 && MaxPositions >= 1 && TypeVocab >= 1,
                "bert_config: sizes must be positive");
  static constexpr int layers = Layers, heads = Heads;
  static constexpr std::int64_t d = D, hidden = Hidden, vocab = Vocab, max_positions = MaxPositions,
                                type_vocab = TypeVocab;
  static constexpr double eps = Eps;
  using weight_type = W;
  static constexpr dtype weight_dtype = dtype_of<W>;

  // FLOPs (2 per multiply-add) of the matmuls for one sequence of `len` tokens, attention over
  // `len` keys: what the model computes for a sentence of that length, padding excluded.
  static constexpr double flops(double len) {
    const double dd = double(D), f = double(Hidden);
    return double(Layers) * (2 * len * dd * dd * 4 + 2 * len * len * dd * 2 + 2 * len * dd * f * 2);
  }
};

// all-MiniLM-L6-v2 (sentence-transformers): 6 layers, 384 wide, 12 heads of 32, FFN 1536.
using minilm_l6_config = bert_config<6, 384, 12, 1536>;

inline constexpr std::string_view bert_ids_name = "input_ids";
inline constexpr std::string_view bert_mask_name = "attention_mask";
inline constexpr std::string_view bert_layer_prefix = "encoder.layer";

// ---- graph-level definitions (constexpr functions over a builder) ----

// A table's rows [begin, end) as the compute dtype t (sliced first, so only those rows widen).
constexpr int emit_table_rows(builder& b, std::string_view name, dtype wt, dtype t, dims table,
                              std::int64_t begin, std::int64_t end) {
  const int p = b.param(name, wt, table);
  const int rows = b.slice(p, 0, begin, end);
  return b.cast(rows, t);
}

// The embedding layer: ids [B, L] or [L] i32 -> [B, L, D] or [L, D] of dtype t.
constexpr int emit_bert_embeddings(builder& b, int ids, std::int64_t vocab,
                                   std::int64_t max_positions, std::int64_t type_vocab,
                                   std::int64_t d, double eps, dtype wt, dtype t = dtype::f32) {
  const dims is = b.at(ids).shape;
  const std::int64_t len = is.back();
  if (b.at(ids).type != dtype::i32 || is.rank < 1 || is.rank > 2)
    graph::fail("bert: the ids must be [batch, seq] or [seq] i32");
  if (len > max_positions) graph::fail("bert: the sequence is longer than the position table");
  wt = nn::dense_dtype(int(wt), t);  // int8 weights: the linear layers', the tables stay in t
  const int words = b.param("embeddings.word_embeddings.weight", wt, make_dims(vocab, d));
  const int picked = b.gather(words, ids);  // [B, L, D]
  const int w = b.cast(picked, t);
  const int type0 = emit_table_rows(b, "embeddings.token_type_embeddings.weight", wt, t,
                                    make_dims(type_vocab, d), 0, 1);
  const int wt0 = b.binary(op_kind::add, w, type0);
  const int pos = emit_table_rows(b, "embeddings.position_embeddings.weight", wt, t,
                                  make_dims(max_positions, d), 0, len);
  const int x = b.binary(op_kind::add, wt0, pos);
  return nn::emit_layernorm(b, x, "embeddings.LayerNorm", eps, int(wt), nn::torch_linear_layers);
}

// One post-LN BERT layer over x [B, L, D] with a key-padding mask [B, L] (boolean: true attends);
// params under "" (the stack adds "encoder.layer.<i>.").
constexpr int emit_bert_layer(builder& b, int x, int mask, int heads, std::int64_t hidden,
                              double eps, dtype wt) {
  const std::int64_t d = b.at(x).shape.back();
  const int q =
      nn::emit_linear(b, x, "attention.self.query", d, true, int(wt), nn::torch_linear_layers);
  const int k =
      nn::emit_linear(b, x, "attention.self.key", d, true, int(wt), nn::torch_linear_layers);
  const int v =
      nn::emit_linear(b, x, "attention.self.value", d, true, int(wt), nn::torch_linear_layers);
  const int qh = nn::split_heads(b, q, heads);
  const int kh = nn::split_heads(b, k, heads);
  const int vh = nn::split_heads(b, v, heads);
  const int ctx = nn::emit_attention_core(b, qh, kh, vh, {}, mask);
  const int o =
      nn::emit_linear(b, ctx, "attention.output.dense", d, true, int(wt), nn::torch_linear_layers);
  const int r1 = b.binary(op_kind::add, o, x);
  const int a = nn::emit_layernorm(b, r1, "attention.output.LayerNorm", eps, int(wt),
                                   nn::torch_linear_layers);
  const int i =
      nn::emit_linear(b, a, "intermediate.dense", hidden, true, int(wt), nn::torch_linear_layers);
  const int g = b.unary(op_kind::gelu_erf, i);
  const int f = nn::emit_linear(b, g, "output.dense", d, true, int(wt), nn::torch_linear_layers);
  const int r2 = b.binary(op_kind::add, f, a);
  return nn::emit_layernorm(b, r2, "output.LayerNorm", eps, int(wt), nn::torch_linear_layers);
}

// `count` layers as one repeated block with params "encoder.layer.<i>.*"; `mask` must be an input
// (the body reads an input of its name and shape).
constexpr int emit_bert_layers(builder& b, int x, int mask, int count, int heads,
                               std::int64_t hidden, double eps, dtype wt) {
  const graph::node& m = b.at(mask);
  if (m.op != op_kind::input)
    graph::fail("bert: the attention mask must be an input (the repeated layers read it by name)");
  if (m.type != dtype::boolean) graph::fail("bert: the attention mask must be boolean");
  const node_name mask_name = m.name;
  const dims mask_shape = m.shape;
  const dtype t = b.at(x).type;
  const dims xs = b.at(x).shape;
  const int ph = b.begin_region(t, xs);
  const int body_mask = b.input(mask_name.view(), dtype::boolean, mask_shape);
  const int y = emit_bert_layer(b, ph, body_mask, heads, hidden, eps, wt);
  const int body = b.end_region(y);
  return b.repeat(x, body, count, bert_layer_prefix);
}

// The mean of h [B, L, D] (or [L, D]) over the rows mask [B, L] (or [L]) keeps -> [B, D] (or
// [D]); a sentence with no kept row gives zeros: the count is clamped to 1e-9, as
// sentence-transformers' Pooling does.
constexpr int emit_masked_mean(builder& b, int h, int mask) {
  const dims hs = b.at(h).shape;
  const dtype t = b.at(h).type;
  const int seq_axis = hs.rank - 2;
  dims column = b.at(mask).shape;  // [B, L, 1] or [L, 1]
  column.rank += 1;
  column[column.rank - 1] = 1;
  const int mf = b.cast(mask, t);
  const int mc = b.reshape(mf, column);
  const int kept = b.binary(op_kind::mul, h, mc);
  const int sum = b.reduce(op_kind::reduce_sum, kept, seq_axis, false);  // [B, D] or [D]
  const int count = b.reduce(op_kind::reduce_sum, mf, -1, true);         // [B, 1] or [1]
  const int floor = b.constant(1e-9);
  const int clamped = b.binary(op_kind::max, count, floor);
  return b.binary(op_kind::div, sum, clamped);
}

// x / max(||x||_2, 1e-12) over the last axis (torch.nn.functional.normalize).
constexpr int emit_l2_normalize(builder& b, int x) {
  const int sq = b.binary(op_kind::mul, x, x);
  const int ss = b.reduce(op_kind::reduce_sum, sq, -1, true);
  const int norm = b.unary(op_kind::sqrt, ss);
  const int eps = b.constant(1e-12);
  const int clamped = b.binary(op_kind::max, norm, eps);
  return b.binary(op_kind::div, x, clamped);
}

// ---- expression-level front doors ----

namespace detail {

// A node of the f32 compute dtype whose graph Fn::emit(builder&, ids...) writes.
template <class Fn, class... Os>
struct bert_node : expr::node_base<Os...> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape = Fn::template result_shape<Os...>();
  static constexpr int emit(builder& b, std::array<int, sizeof...(Os)> x) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return Fn::emit(b, x[I]...);
    }
    (std::make_index_sequence<sizeof...(Os)>{});
  }
};

// ids [B, L] or [L] -> [B, L, D] or [L, D]; [B, D] or [D] without the sequence axis.
template <class I>
constexpr dims with_features(std::int64_t d, bool keep_seq) {
  dims s = I::shape;
  if (!keep_seq) s.rank -= 1;
  s.rank += 1;
  s[s.rank - 1] = d;
  return s;
}

template <class Cfg>
struct embeddings_fn {
  template <class I>
  static constexpr dims result_shape() {
    return with_features<I>(Cfg::d, true);
  }
  static constexpr int emit(builder& b, int ids) {
    return emit_bert_embeddings(b, ids, Cfg::vocab, Cfg::max_positions, Cfg::type_vocab, Cfg::d,
                                Cfg::eps, Cfg::weight_dtype);
  }
};

template <class Cfg, int Count>
struct layers_fn {
  template <class X, class M>
  static constexpr dims result_shape() {
    return X::shape;
  }
  static constexpr int emit(builder& b, int x, int mask) {
    return emit_bert_layers(b, x, mask, Count, Cfg::heads, Cfg::hidden, Cfg::eps,
                            Cfg::weight_dtype);
  }
};

template <class Cfg>
struct hidden_fn {
  template <class I, class M>
  static constexpr dims result_shape() {
    return with_features<I>(Cfg::d, true);
  }
  static constexpr int emit(builder& b, int ids, int mask) {
    const int x = embeddings_fn<Cfg>::emit(b, ids);
    return layers_fn<Cfg, Cfg::layers>::emit(b, x, mask);
  }
};

template <class Cfg>
struct sentence_fn {
  template <class I, class M>
  static constexpr dims result_shape() {
    return with_features<I>(Cfg::d, false);
  }
  static constexpr int emit(builder& b, int ids, int mask) {
    const int h = hidden_fn<Cfg>::emit(b, ids, mask);
    const int pooled = emit_masked_mean(b, h, mask);
    return emit_l2_normalize(b, pooled);
  }
};

struct masked_mean_fn {
  template <class H, class M>
  static constexpr dims result_shape() {
    dims s = M::shape;
    s[s.rank - 1] = H::shape.back();
    return s;
  }
  static constexpr int emit(builder& b, int h, int mask) { return emit_masked_mean(b, h, mask); }
};

template <class I>
constexpr void check_ids() {
  static_assert(I::type == dtype::i32 && (I::shape.rank == 1 || I::shape.rank == 2),
                "bert: the ids must be an i32 [batch, seq] or [seq] tensor");
}
template <class Cfg, class I, class M>
constexpr void check_ids_and_mask() {
  check_ids<I>();
  static_assert(M::type == dtype::boolean && M::shape == I::shape,
                "bert: the attention mask must be a boolean tensor of the ids' shape");
  static_assert(I::shape.back() <= Cfg::max_positions,
                "bert: the sequence is longer than the position table");
}

}  // namespace detail

// The embedding layer's output [B, L, D] (embeddings.*).
template <class Cfg, expression I>
constexpr auto bert_embeddings(I) {
  detail::check_ids<I>();
  static_assert(I::shape.back() <= Cfg::max_positions,
                "bert: the sequence is longer than the position table");
  return detail::bert_node<detail::embeddings_fn<Cfg>, I>{};
}

// Count encoder layers over x [B, L, D] or [L, D] (encoder.layer.<i>.*); the mask [B, L] or [L]
// must be an input.
template <class Cfg, int Count = Cfg::layers, expression X, expression M>
constexpr auto bert_layers(X, M) {
  static_assert(X::type == dtype::f32 && (X::shape.rank == 2 || X::shape.rank == 3) &&
                    X::shape.back() == Cfg::d,
                "bert_layers: x must be f32 [batch, seq, d] or [seq, d]");
  static_assert(M::type == dtype::boolean && M::shape.rank == X::shape.rank - 1 &&
                    M::shape.back() == X::shape[X::shape.rank - 2] &&
                    (M::shape.rank == 1 || M::shape[0] == X::shape[0]),
                "bert_layers: the mask must be boolean [batch, seq] (or [seq])");
  static_assert(Count >= 1, "bert_layers: at least one layer");
  return detail::bert_node<detail::layers_fn<Cfg, Count>, X, M>{};
}

// The last layer's hidden states [B, L, D].
template <class Cfg, expression I, expression M>
constexpr auto bert_hidden_states(I, M) {
  detail::check_ids_and_mask<Cfg, I, M>();
  return detail::bert_node<detail::hidden_fn<Cfg>, I, M>{};
}

// Sentence embeddings [B, D]: the masked mean of the last hidden states, L2-normalised.
template <class Cfg, expression I, expression M>
constexpr auto bert_sentence_embeddings(I, M) {
  detail::check_ids_and_mask<Cfg, I, M>();
  return detail::bert_node<detail::sentence_fn<Cfg>, I, M>{};
}

// The mean of h [B, L, D] (or [L, D]) over the rows the boolean mask [B, L] (or [L]) keeps.
template <expression H, expression M>
constexpr auto masked_mean(H, M) {
  static_assert((H::shape.rank == 2 || H::shape.rank == 3) && M::type == dtype::boolean &&
                    M::shape.rank == H::shape.rank - 1 &&
                    M::shape.back() == H::shape[H::shape.rank - 2] &&
                    (M::shape.rank == 1 || M::shape[0] == H::shape[0]),
                "masked_mean: h must be [batch, seq, d] and the mask boolean [batch, seq] (or "
                "[seq, d], [seq])");
  return detail::bert_node<detail::masked_mean_fn, H, M>{};
}

// The inputs of an encoder of batch B and length L: [B, L], or [L] for one sequence.
template <std::int64_t B, std::int64_t L>
constexpr auto bert_ids() {
  return input<"input_ids", std::int32_t, B, L>();
}
template <std::int64_t B, std::int64_t L>
constexpr auto bert_mask() {
  return input<"attention_mask", bool, B, L>();
}
template <std::int64_t L>
constexpr auto bert_ids() {
  return input<"input_ids", std::int32_t, L>();
}
template <std::int64_t L>
constexpr auto bert_mask() {
  return input<"attention_mask", bool, L>();
}

// ---- binding ----

// Binds t to input `name` under every name the executor lists it: as itself, and once per layer
// of a repeated block that reads it ("<prefix>.<i>.<name>"). Returns how many it bound.
template <class Executor>
int bind_input(Executor& ex, std::string_view name, tensor_ref t) {
  int bound = 0;
  for (const auto& info : ex.bindings()) {
    if (info.kind != op_kind::input) continue;
    const std::string_view n = info.name;
    const bool same = n == name;
    const bool per_layer =
        n.size() > name.size() && n.ends_with(name) && n[n.size() - name.size() - 1] == '.';
    if (same || per_layer) {
      ex.bind(info.name, t);
      ++bound;
    }
  }
  if (bound == 0)
    throw binding_error("binding \"" + std::string(name) +
                        "\": the program has no input of that name");
  return bound;
}

}  // namespace fusedsl::models
