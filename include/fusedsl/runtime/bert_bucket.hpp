#pragma once
// bert_bucket<Cfg, B, L>: the BERT sentence encoder (models/bert.hpp) compiled for batch B and
// length L, behind sentence_embedder's encoder_bucket interface. Each instance is one program
// and one CPU executor (its arena, its packed weights); each shape costs its own compile
// (about half a minute of g++ -O2), so a build compiles the buckets it carries in translation
// units of their own (tools/embed/ has the all-MiniLM-L6-v2 set).
//
// B = 1 compiles the encoder over one sequence (ids and mask [L]) rather than a batch of one:
// the attention kernel then takes the mask (a batch axis of extent 1 keeps it out, see
// docs/embeddings.md).
#include <memory>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/io/checkpoint.hpp"
#include "fusedsl/models/bert.hpp"
#include "fusedsl/runtime/sentence_embedder.hpp"

namespace fusedsl::models {

template <class Cfg, std::int64_t B, std::int64_t L>
struct bert_bucket_program {
  static constexpr auto make() {
    if constexpr (B == 1)
      return compile(bert_sentence_embeddings<Cfg>(bert_ids<L>(), bert_mask<L>()));
    else
      return compile(bert_sentence_embeddings<Cfg>(bert_ids<B, L>(), bert_mask<B, L>()));
  }
  using type = decltype(make());
  static constexpr dims input_shape = B == 1 ? make_dims(L) : make_dims(B, L);
  static constexpr dims output_shape = B == 1 ? make_dims(Cfg::d) : make_dims(B, Cfg::d);
};

template <class Cfg, std::int64_t B, std::int64_t L>
class bert_bucket final : public encoder_bucket {
  using program = bert_bucket_program<Cfg, B, L>;

 public:
  explicit bert_bucket(cpu::threads t) : ex_(typename program::type{}, t) {
    bind_input(ex_, bert_ids_name, tensor_ref{ids_.data(), dtype::i32, program::input_shape});
    bind_input(ex_, bert_mask_name, tensor_ref{mask_.data(), dtype::boolean, program::input_shape});
    ex_.bind_output(0, tensor_ref{out_.data(), dtype::f32, program::output_shape});
  }
  std::int64_t batch() const override { return B; }
  std::int64_t length() const override { return L; }
  std::int64_t dimension() const override { return Cfg::d; }
  std::vector<graph::binding_info> bindings() const override { return ex_.bindings(); }
  void share_packed_weights(std::shared_ptr<cpu::packed_weight_cache> cache) override {
    ex_.share_packed_weights(std::move(cache));
  }
  void bind_weights(const io::safetensors_file& file) override {
    weights_ = io::bind_checkpoint(ex_, file, {.rename = bert_checkpoint_name, .convert = true});
  }
  std::span<std::int32_t> ids() override { return {ids_.data(), ids_.size()}; }
  std::span<unsigned char> mask() override { return {mask_.data(), mask_.size()}; }
  std::span<const float> output() const override { return {out_.data(), out_.size()}; }
  void run() override { ex_.run(); }
  cpu::executor_stats stats() const override { return ex_.stats(); }
  cpu::memory_footprint footprint() const override { return ex_.footprint(); }
  void profile(bool on) override { ex_.profile(on); }
  std::vector<cpu::group_profile> profile_results() const override {
    const auto r = ex_.profile_results();
    return {r.begin(), r.end()};
  }
  const cpu::executor<typename program::type>& executor() const { return ex_; }

 private:
  cpu::executor<typename program::type> ex_;
  std::vector<std::int32_t> ids_ = std::vector<std::int32_t>(std::size_t(B * L), 0);
  std::vector<unsigned char> mask_ = std::vector<unsigned char>(std::size_t(B * L), 0);
  std::vector<float> out_ = std::vector<float>(std::size_t(B * Cfg::d), 0.0f);
  io::checkpoint_binding weights_;
};

template <class Cfg, std::int64_t B, std::int64_t L>
std::unique_ptr<encoder_bucket> make_bert_bucket(cpu::threads t) {
  return std::make_unique<bert_bucket<Cfg, B, L>>(t);
}

// The configuration a sentence_model_config must have for Cfg's buckets (mean pooling, L2).
template <class Cfg>
sentence_model_config bert_sentence_config(std::size_t max_seq_length) {
  sentence_model_config c;
  c.layers = Cfg::layers;
  c.hidden_size = Cfg::d;
  c.heads = Cfg::heads;
  c.intermediate_size = Cfg::hidden;
  c.vocab_size = Cfg::vocab;
  c.max_positions = Cfg::max_positions;
  c.type_vocab_size = Cfg::type_vocab;
  c.layer_norm_eps = Cfg::eps;
  c.max_seq_length = max_seq_length;
  return c;
}

}  // namespace fusedsl::models
