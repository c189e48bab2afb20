#pragma once
// gpt2_generator: a GPT-2 (models/gpt2.hpp) decoding one sequence with its KV cache on the CPU
// executor.
//
//   const auto file = io::safetensors_file::open(dir / "model.safetensors");
//   models::gpt2_generator<models::gpt2_small_config, 32, 128, 512> gen(file);
//   auto logits = gen.prefill(prompt_ids);     // the smallest bucket that holds the prompt
//   while (...) logits = gen.step(next_id);    // one token at position gen.length()
//
// The prompt runs through the prefill program of the smallest bucket that holds it (padded after
// its end; causal attention keeps the padding out of the real rows); the rows of its keys and
// values that belong to the prompt are copied into the decode layers' caches, and every later
// token is one decode step at position length(). Each layer runs in an executor of its own (the
// same program, that layer's weights and cache); all executors share one packed_weight_cache, so
// a weight's GEMM panels are held once for the buckets and the decode step. The checkpoint binds
// to every program (names as Hugging Face saves them, with or without the "transformer." prefix;
// tensors no program reads, such as "lm_head.weight" (tied to "wte.weight") and the "attn.bias" /
// "attn.masked_bias" buffers of older checkpoints, are ignored). The file must outlive the
// generator.
//
// Errors (model_error, naming the value at fault): an empty prompt, a prompt longer than the
// largest bucket, a token id outside the vocabulary, a step when the cache holds n_positions
// tokens already (the context is full), a step before any prefill.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/io/checkpoint.hpp"
#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/io/sentence_model.hpp"
#include "fusedsl/models/gpt2.hpp"

namespace fusedsl::models {

namespace detail {

// Binds the tensors of `file` named "[transformer.]<prefix><name>" to the parameter <name> of ex
// (names as Hugging Face saves them; every other tensor is left to the other programs). A
// checkpoint_error names `what` and every tensor at fault.
template <class Executor>
io::checkpoint_binding bind_gpt2_weights(Executor& ex, const io::safetensors_file& file,
                                         const std::string& prefix, const std::string& what) {
  std::vector<std::string> names;
  for (const auto& b : ex.bindings())
    if (b.kind == graph::op_kind::param) names.push_back(b.name);
  io::checkpoint_options options;
  options.rename = [names, prefix](std::string_view n) -> std::optional<std::string> {
    if (n.starts_with("transformer.")) n.remove_prefix(12);
    if (!n.starts_with(prefix)) return std::nullopt;
    n.remove_prefix(prefix.size());
    for (const std::string& p : names)
      if (p == n) return p;
    return std::nullopt;
  };
  try {
    return io::bind_checkpoint(ex, file, options);
  } catch (const io::checkpoint_error& e) {
    throw io::checkpoint_error(what + ": " + e.what());
  }
}

}  // namespace detail

template <class Cfg, std::int64_t... Buckets>
class gpt2_generator {
  static_assert(sizeof...(Buckets) >= 1, "gpt2_generator: at least one prefill bucket");
  static_assert(((Buckets >= 1 && Buckets <= Cfg::positions) && ...),
                "gpt2_generator: every bucket must hold 1 to n_positions tokens");
  static constexpr std::array<std::int64_t, sizeof...(Buckets)> buckets_{Buckets...};
  static_assert(std::is_sorted(buckets_.begin(), buckets_.end()),
                "gpt2_generator: list the buckets in increasing order");
  using outs = gpt2_outputs;
  static constexpr int L = Cfg::layers;
  static constexpr std::int64_t H = Cfg::heads, Dh = Cfg::head_dim, cap = Cfg::positions,
                                D = Cfg::d;

  static std::string layer_prefix(int i) { return "h." + std::to_string(i) + "."; }

  // The programs of one length (T tokens; decode: the one-token step): embeddings, one executor
  // per layer, the head; the hidden state goes back and forth between two buffers.
  template <class Embed, class Layer, class Head, std::int64_t T>
  struct stage {
    cpu::executor<Embed> embed{Embed{}};
    std::vector<std::unique_ptr<cpu::executor<Layer>>> layers;
    cpu::executor<Head> head{Head{}};
    tensor<std::int32_t, T> ids;
    tensor<std::int32_t> last;
    std::array<tensor<float, T, D>, 2> hidden;
    tensor<float, 1, Cfg::vocab> logits;
    tensor<std::int32_t, 1> argmax;
    std::vector<io::checkpoint_binding> weights;

    stage(const io::safetensors_file& file, const std::shared_ptr<cpu::packed_weight_cache>& c) {
      embed.share_packed_weights(c);
      head.share_packed_weights(c);
      weights.push_back(detail::bind_gpt2_weights(embed, file, "", "the embeddings"));
      embed.bind("input_ids", ids);
      embed.bind_output(0, hidden[0]);
      for (int i = 0; i < L; ++i) {
        layers.push_back(std::make_unique<cpu::executor<Layer>>(Layer{}));
        cpu::executor<Layer>& ex = *layers.back();
        ex.share_packed_weights(c);
        weights.push_back(
            detail::bind_gpt2_weights(ex, file, layer_prefix(i), "layer " + std::to_string(i)));
        ex.bind("x", hidden[std::size_t(i % 2)]);
        ex.bind_output(outs::hidden, hidden[std::size_t((i + 1) % 2)]);
      }
      weights.push_back(detail::bind_gpt2_weights(head, file, "", "the LM head"));
      head.bind("h", hidden[std::size_t(L % 2)]);
      if constexpr (T > 1) head.bind("last", last);  // T = 1: the one row
      head.bind_output(outs::logits, logits);
      head.bind_output(outs::argmax, argmax);
    }
  };

  template <std::int64_t T>
  struct prefill_stage : stage<gpt2_prefill_embed_program<Cfg, T>,
                               gpt2_prefill_layer_program<Cfg, T>, gpt2_head_program<Cfg, T>, T> {
    std::array<tensor<float, H, T, Dh>, 2> kv;
    prefill_stage(const io::safetensors_file& file,
                  const std::shared_ptr<cpu::packed_weight_cache>& c)
        : prefill_stage::stage(file, c) {
      for (auto& ex : this->layers) {
        ex->bind_output(outs::key, kv[0]);
        ex->bind_output(outs::value, kv[1]);
      }
    }
  };
  using decode_stage = stage<gpt2_decode_embed_program<Cfg>, gpt2_decode_layer_program<Cfg>,
                             gpt2_head_program<Cfg, 1>, 1>;

 public:
  using config = Cfg;

  // Binds `file` to every program (a checkpoint_error names the program and every tensor at
  // fault).
  explicit gpt2_generator(const io::safetensors_file& file)
      : prefill_{std::make_unique<prefill_stage<Buckets>>(file, packed_)...},
        decode_(std::make_unique<decode_stage>(file, packed_)) {
    decode_->embed.bind("pos", pos_);
    for (auto& ex : decode_->layers) ex->bind("pos", pos_);
  }
  gpt2_generator(const gpt2_generator&) = delete;
  gpt2_generator& operator=(const gpt2_generator&) = delete;

  static constexpr std::span<const std::int64_t> buckets() { return buckets_; }
  // The GEMM panels all programs read (one entry per weight and panel layout).
  const cpu::packed_weight_cache& packed_weights() const { return *packed_; }
  static constexpr std::int64_t max_prompt() { return buckets_.back(); }
  // The bucket a prompt of n tokens runs in; -1 when none holds it.
  static constexpr std::int64_t bucket_for(std::int64_t n) {
    for (std::int64_t b : buckets_)
      if (b >= n) return b;
    return -1;
  }

  // Starts a new sequence: runs the prompt and fills the caches; the logits of its last token.
  std::span<const float> prefill(std::span<const std::int32_t> prompt) {
    if (prompt.empty()) throw model_error("gpt2: the prompt is empty (give at least one token)");
    if (std::int64_t(prompt.size()) > max_prompt())
      throw model_error("gpt2: the prompt has " + std::to_string(prompt.size()) +
                        " tokens; the largest prefill bucket holds " +
                        std::to_string(max_prompt()) + " (n_positions " + std::to_string(cap) +
                        ")");
    for (std::size_t i = 0; i < prompt.size(); ++i) check_token(prompt[i], std::int64_t(i));
    length_ = 0;
    bool done = false;
    std::apply([&](auto&... st) { (run_prefill(*st, prompt, done), ...); }, prefill_);
    length_ = std::int64_t(prompt.size());
    return {logits_->data(), std::size_t(Cfg::vocab)};
  }

  // Feeds `token` at position length(); the logits of the next one.
  std::span<const float> step(std::int32_t token) {
    if (length_ == 0) throw model_error("gpt2: step before prefill (start a sequence first)");
    if (length_ >= cap)
      throw model_error("gpt2: the context is full: the cache holds n_positions = " +
                        std::to_string(cap) + " tokens");
    check_token(token);
    decode_stage& d = *decode_;
    d.ids[0] = token;
    pos_[0] = std::int32_t(length_);
    d.embed.run();
    for (auto& ex : d.layers) ex->run();
    d.head.run();
    logits_ = &d.logits;
    argmax_ = d.argmax[0];
    ++length_;
    return {logits_->data(), std::size_t(Cfg::vocab)};
  }

  // Drops the tokens after the first n (1 <= n <= length()): the next step runs at position n.
  void truncate(std::int64_t n) {
    if (n < 1 || n > length_)
      throw model_error("gpt2: truncate to " + std::to_string(n) + " tokens: the cache holds " +
                        std::to_string(length_) + " (keep 1 to that many)");
    length_ = n;
  }

  // The argmax of the last logits (the greedy choice; the lowest id among equal maxima).
  std::int32_t greedy() const { return argmax_; }
  // Tokens in the cache.
  std::int64_t length() const { return length_; }
  // Layer i's cached keys (values: its values) [n_heads, n_positions, head_dim]; positions
  // 0..length()-1 hold the sequence's.
  const typename Cfg::cache_type* cache(int layer, bool values) {
    return static_cast<const typename Cfg::cache_type*>(
        decode_->layers[std::size_t(layer)]->state(values ? "attn.v_cache" : "attn.k_cache").data);
  }
  // Kernels that fell back to the interpreter over the decode step's programs (0: none).
  int interpreted_groups() const {
    int n = decode_->embed.stats().interpreted_groups + decode_->head.stats().interpreted_groups;
    for (const auto& ex : decode_->layers) n += ex->stats().interpreted_groups;
    return n;
  }

 private:
  // index: the token's place in the prompt, or -1 for a decode step's token. The message is built
  // only when the token is bad.
  void check_token(std::int32_t t, std::int64_t index = -1) const {
    if (t >= 0 && t < Cfg::vocab) return;
    const std::string what = index < 0 ? "token" : "prompt token " + std::to_string(index);
    throw model_error("gpt2: " + what + " is " + std::to_string(t) +
                      ", outside the vocabulary [0, " + std::to_string(Cfg::vocab) + ")");
  }

  template <std::int64_t T>
  void run_prefill(prefill_stage<T>& st, std::span<const std::int32_t> prompt, bool& done) {
    if (done || std::int64_t(prompt.size()) > T) return;
    done = true;
    const std::int64_t n = std::int64_t(prompt.size());
    for (std::int64_t i = 0; i < T; ++i) st.ids[i] = i < n ? prompt[std::size_t(i)] : 0;
    st.last[0] = std::int32_t(n - 1);
    st.embed.run();
    for (int i = 0; i < L; ++i) {
      st.layers[std::size_t(i)]->run();
      auto& dec = *decode_->layers[std::size_t(i)];
      dec.reset_states();
      for (int which = 0; which < 2; ++which) {
        using C = typename Cfg::cache_type;
        C* cache = static_cast<C*>(dec.state(which ? "attn.v_cache" : "attn.k_cache").data);
        const float* rows = st.kv[std::size_t(which)].data();
        for (std::int64_t h = 0; h < H; ++h) {
          if constexpr (std::is_same_v<C, float>) {
            std::memcpy(cache + h * cap * Dh, rows + h * T * Dh, std::size_t(n * Dh) * sizeof(C));
          } else {  // rounded as the decode step rounds its own keys and values
            for (std::int64_t x = 0; x < n * Dh; ++x)
              cache[h * cap * Dh + x] = C(rows[h * T * Dh + x]);
          }
        }
      }
    }
    st.head.run();
    logits_ = &st.logits;
    argmax_ = st.argmax[0];
  }

  // The GEMM panels of every program: one copy of each weight as a panel layout reads it (f32
  // panels for the prefill buckets and, with f32 weights, the decode step).
  std::shared_ptr<cpu::packed_weight_cache> packed_ = std::make_shared<cpu::packed_weight_cache>();
  std::tuple<std::unique_ptr<prefill_stage<Buckets>>...> prefill_;
  std::unique_ptr<decode_stage> decode_;
  tensor<std::int32_t> pos_;
  const tensor<float, 1, Cfg::vocab>* logits_ = nullptr;
  std::int32_t argmax_ = -1;
  std::int64_t length_ = 0;
};

}  // namespace fusedsl::models
