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
// values that belong to the prompt are copied into the decode program's caches, and every later
// token is one decode step at position length(). The checkpoint binds to every program (names as
// Hugging Face saves them; the "transformer." prefix, "lm_head.weight" (tied to "wte.weight") and
// the "attn.bias" / "attn.masked_bias" buffers of older checkpoints are accepted). The file must
// outlive the generator.
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
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/io/checkpoint.hpp"
#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/models/gpt2.hpp"
#include "fusedsl/models/sentence_model.hpp"

namespace fusedsl::models {

// A Hugging Face GPT-2 checkpoint name -> the programs' name, or nullopt for a tensor they do not
// read (the tied LM head, the causal-mask buffers).
inline std::optional<std::string> gpt2_checkpoint_name(std::string_view name) {
  if (name.starts_with("transformer.")) name.remove_prefix(12);
  if (name == "lm_head.weight" || name.ends_with(".attn.bias") ||
      name.ends_with(".attn.masked_bias"))
    return std::nullopt;
  return std::string(name);
}

template <class Cfg, std::int64_t... Buckets>
class gpt2_generator {
  static_assert(sizeof...(Buckets) >= 1, "gpt2_generator: at least one prefill bucket");
  static_assert(((Buckets >= 1 && Buckets <= Cfg::positions) && ...),
                "gpt2_generator: every bucket must hold 1 to n_positions tokens");
  static constexpr std::array<std::int64_t, sizeof...(Buckets)> buckets_{Buckets...};
  static_assert(std::is_sorted(buckets_.begin(), buckets_.end()),
                "gpt2_generator: list the buckets in increasing order");
  using outs = gpt2_outputs<Cfg>;
  static constexpr std::int64_t H = Cfg::heads, Dh = Cfg::head_dim, cap = Cfg::positions;

  template <std::int64_t T>
  struct prefill_stage {
    using program_type = gpt2_prefill_program<Cfg, T>;
    cpu::executor<program_type> ex{program_type{}};
    tensor<std::int32_t, T> ids;
    tensor<std::int32_t> last;
    tensor<float, 1, Cfg::vocab> logits;
    std::vector<tensor<float, H, T, Dh>> kv = std::vector<tensor<float, H, T, Dh>>(
        std::size_t(2 * Cfg::layers));
    tensor<std::int32_t, 1> argmax;
    io::checkpoint_binding binding;

    explicit prefill_stage(const io::safetensors_file& file) {
      binding = io::bind_checkpoint(ex, file, {.rename = gpt2_checkpoint_name, .convert = true});
      ex.bind("input_ids", ids);
      ex.bind("last", last);
      ex.bind_output(outs::logits, logits);
      for (int o = 0; o < 2 * Cfg::layers; ++o) ex.bind_output(1 + o, kv[std::size_t(o)]);
      ex.bind_output(outs::argmax, argmax);
    }
  };

 public:
  using config = Cfg;
  using decode_program = gpt2_decode_program<Cfg>;

  explicit gpt2_generator(const io::safetensors_file& file)
      : prefill_{std::make_unique<prefill_stage<Buckets>>(file)...} {
    binding_ = io::bind_checkpoint(decode_, file, {.rename = gpt2_checkpoint_name, .convert = true});
    decode_.bind("input_ids", token_);
    decode_.bind("pos", pos_);
    decode_.bind_output(outs::logits, logits_);
    decode_.bind_output(outs::argmax, argmax_);
  }
  gpt2_generator(const gpt2_generator&) = delete;
  gpt2_generator& operator=(const gpt2_generator&) = delete;

  static constexpr std::span<const std::int64_t> buckets() { return buckets_; }
  static constexpr std::int64_t max_prompt() { return buckets_.back(); }

  // Starts a new sequence: runs the prompt, fills the caches; the logits of its last token.
  std::span<const float> prefill(std::span<const std::int32_t> prompt) {
    if (prompt.empty()) throw model_error("gpt2: the prompt is empty (give at least one token)");
    if (std::int64_t(prompt.size()) > max_prompt())
      throw model_error("gpt2: the prompt has " + std::to_string(prompt.size()) +
                        " tokens; the largest prefill bucket holds " +
                        std::to_string(max_prompt()) + " (n_positions " + std::to_string(cap) + ")");
    for (std::size_t i = 0; i < prompt.size(); ++i) check_token(prompt[i], "prompt token " + std::to_string(i));
    bool done = false;
    std::apply([&](auto&... st) { (run_prefill(*st, prompt, done), ...); }, prefill_);
    length_ = std::int64_t(prompt.size());
    return {logits_.data(), std::size_t(Cfg::vocab)};
  }

  // Feeds `token` at position length(); the logits of the next one.
  std::span<const float> step(std::int32_t token) {
    if (length_ == 0) throw model_error("gpt2: step before prefill (start a sequence first)");
    if (length_ >= cap)
      throw model_error("gpt2: the context is full: the cache holds n_positions = " +
                        std::to_string(cap) + " tokens");
    check_token(token, "token");
    token_[0] = token;
    pos_[0] = std::int32_t(length_);
    decode_.run();
    ++length_;
    return {logits_.data(), std::size_t(Cfg::vocab)};
  }

  // The argmax of the last logits (the greedy choice; the lowest id among equal maxima).
  std::int32_t greedy() const { return argmax_[0]; }
  // Tokens in the cache.
  std::int64_t length() const { return length_; }
  // The bucket a prompt of n tokens runs in.
  static std::int64_t bucket_for(std::int64_t n) {
    for (std::int64_t b : buckets_)
      if (b >= n) return b;
    return -1;
  }
  const cpu::executor<decode_program>& decode_executor() const { return decode_; }

 private:
  void check_token(std::int32_t t, const std::string& what) const {
    if (t < 0 || t >= Cfg::vocab)
      throw model_error("gpt2: " + what + " is " + std::to_string(t) + ", outside the vocabulary [0, " +
                        std::to_string(Cfg::vocab) + ")");
  }

  template <std::int64_t T>
  void run_prefill(prefill_stage<T>& st, std::span<const std::int32_t> prompt, bool& done) {
    if (done || std::int64_t(prompt.size()) > T) return;
    done = true;
    const std::int64_t n = std::int64_t(prompt.size());
    for (std::int64_t i = 0; i < T; ++i) st.ids[i] = i < n ? prompt[std::size_t(i)] : 0;
    st.last[0] = std::int32_t(n - 1);
    st.ex.run();
    std::copy_n(st.logits.data(), Cfg::vocab, logits_.data());
    argmax_[0] = st.argmax[0];
    decode_.reset_states();
    for (int layer = 0; layer < Cfg::layers; ++layer)
      for (int which = 0; which < 2; ++which) {
        const std::string name = std::string(gpt2_layer_prefix(layer).view()) +
                                 (which ? ".attn.v_cache" : ".attn.k_cache");
        float* cache = static_cast<float*>(decode_.state(name).data);
        const float* rows = st.kv[std::size_t(2 * layer + which)].data();
        for (std::int64_t h = 0; h < H; ++h)
          std::memcpy(cache + h * cap * Dh, rows + h * T * Dh, std::size_t(n * Dh) * sizeof(float));
      }
  }

  std::tuple<std::unique_ptr<prefill_stage<Buckets>>...> prefill_;
  cpu::executor<decode_program> decode_{decode_program{}};
  io::checkpoint_binding binding_;
  tensor<std::int32_t, 1> token_;
  tensor<std::int32_t> pos_;
  tensor<float, 1, Cfg::vocab> logits_;
  tensor<std::int32_t, 1> argmax_;
  std::int64_t length_ = 0;
};

}  // namespace fusedsl::models
