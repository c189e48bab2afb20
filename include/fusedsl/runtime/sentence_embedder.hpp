#pragma once
// fusedsl::models::sentence_embedder: a sentence-transformers model directory run end to end:
// the WordPiece tokenizer, the encoder, mean pooling and L2 normalisation.
//
//   models::sentence_embedder e(model_dir, {&models::minilm_l6_variant(), 1});
//   std::vector<float> v = e.embed(texts);          // texts.size() x e.dimension(), row-major
//
// Shapes are compile-time, so the encoder is compiled for a set of buckets, each a batch size B
// and a sequence length L (runtime/bert_bucket.hpp makes one; an encoder_variant lists the buckets
// a build carries for one model). A call tokenises its texts, sorts them by length and splits
// them into encoder calls (plan_encoder_calls): one sentence in the B = 1 bucket of the smallest L
// that holds it, or 2 to `batch` consecutive sentences (padded with empty rows to `batch`) in the
// bucket of the largest carried batch with the smallest L that holds their longest. The split
// minimises the padded tokens computed plus, per call, embedder_options::call_cost_tokens: a
// chunk computes each of its sentences at its longest one's bucket, a call of one sentence pays
// the per-call cost (weights streamed from memory, kernel and thread start-up) alone. Each
// bucket's executor is made the first time a call needs it; all share one copy of the packed
// weights (cpu::packed_weight_cache).
//
// Threads: an embedder is not safe to call from two threads at once; use one per thread (each
// packs its own weights). Inside a call, its kernels use options::threads (fd::cpu::threads).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/io/checkpoint.hpp"
#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/io/sentence_model.hpp"
#include "fusedsl/text/wordpiece_files.hpp"

namespace fusedsl::models {

// One compiled encoder shape: ids and mask in, B sentence embeddings out.
class encoder_bucket {
 public:
  virtual ~encoder_bucket() = default;
  virtual std::int64_t batch() const = 0;
  virtual std::int64_t length() const = 0;
  virtual std::int64_t dimension() const = 0;
  // What the program binds (its inputs and parameters, by name).
  virtual std::vector<graph::binding_info> bindings() const = 0;
  // Reads the GEMM weights' panels from `cache`, shared with the other buckets given it
  // (cpu/weight_cache.hpp); before bind_weights.
  virtual void share_packed_weights(std::shared_ptr<cpu::packed_weight_cache> cache) = 0;
  // Binds the checkpoint's tensors (io::bind_checkpoint; a checkpoint_error lists what is wrong).
  virtual void bind_weights(const io::safetensors_file& file) = 0;
  // The inputs, batch x length row-major (padding: id 0, mask 0), and the output, batch x
  // dimension; run() reads and writes them.
  virtual std::span<std::int32_t> ids() = 0;
  virtual std::span<unsigned char> mask() = 0;
  virtual std::span<const float> output() const = 0;
  virtual void run() = 0;
  virtual cpu::executor_stats stats() const = 0;
  virtual cpu::memory_footprint footprint() const = 0;
  virtual void profile(bool on) = 0;
  virtual std::vector<cpu::group_profile> profile_results() const = 0;
};

struct bucket_shape {
  std::int64_t batch = 1;
  std::int64_t length = 0;
};

// A model a build carries: what it computes and the buckets compiled for it.
struct encoder_variant {
  std::string name;
  sentence_model_config config;  // max_seq_length: the longest bucket
  std::vector<bucket_shape> shapes;
  std::function<std::unique_ptr<encoder_bucket>(bucket_shape, cpu::threads)> make;
};

struct embedder_options {
  cpu::threads threads{1};
  // Sentences per encoder call at most: the largest bucket batch used (1: one at a time).
  std::int64_t max_batch = 1 << 20;
  // What one encoder call costs beyond the tokens it computes, in tokens' worth of time (the
  // split into calls minimises padded tokens + this per call). Negative: the default, fitted on
  // the embedding benchmark (docs/models.md, "Speed"): 2 on one thread, 9 on more, where each
  // call's small products split less well over the threads.
  double call_cost_tokens = -1;
  // Where the tokenizer's truncation notes go (empty: stderr).
  text::warning_sink warn;
};

// What the calls so far did.
struct embedder_stats {
  std::int64_t sentences = 0;
  std::int64_t tokens = 0;         // real tokens, [CLS] and [SEP] included
  std::int64_t padded_tokens = 0;  // batch x length of the buckets run
  std::int64_t encoder_calls = 0;
};

// One encoder call of a plan: sentences [first, first + count) of the length-sorted order, run in
// a bucket of `batch` sentences and `length` tokens.
struct encoder_call {
  std::size_t first = 0;
  std::size_t count = 0;
  std::int64_t batch = 1;
  std::int64_t length = 0;
};

// The split of sentences of `sorted_lengths` tokens (ascending) into encoder calls that minimises
// sum(batch x length) + call_cost x calls: a call is one sentence in the batch-1 bucket that
// holds it, or 2 to `chunk` consecutive sentences in a batch-`chunk` bucket that holds the last
// (longest). `bucket_length(b, n)` gives the length of the smallest batch-b bucket holding n
// tokens, or 0 when none does (then only batch-1 calls take that sentence). Dynamic programming
// over the sorted order, O(size x chunk); ties go to the larger chunk.
template <class BucketLength>
std::vector<encoder_call> plan_encoder_calls(std::span<const std::int64_t> sorted_lengths,
                                             std::int64_t chunk, double call_cost,
                                             BucketLength bucket_length) {
  const std::size_t n = sorted_lengths.size();
  std::vector<double> best(n + 1, 0.0);
  std::vector<std::size_t> take(n + 1, 0);
  for (std::size_t j = 1; j <= n; ++j) {
    const std::int64_t longest = sorted_lengths[j - 1];
    best[j] = best[j - 1] + double(bucket_length(1, longest)) + call_cost;
    take[j] = 1;
    const std::int64_t chunk_length = chunk < 2 ? 0 : bucket_length(chunk, longest);
    if (chunk_length <= 0) continue;
    const double chunk_cost = double(chunk * chunk_length) + call_cost;
    for (std::size_t m = 2; m <= std::min<std::size_t>(j, std::size_t(chunk)); ++m)
      if (best[j - m] + chunk_cost <= best[j]) {
        best[j] = best[j - m] + chunk_cost;
        take[j] = m;
      }
  }
  std::vector<encoder_call> calls;
  for (std::size_t j = n; j > 0; j -= take[j]) {
    const std::size_t m = take[j];
    const std::int64_t b = m == 1 ? 1 : chunk;
    calls.push_back({j - m, m, b, bucket_length(b, sorted_lengths[j - 1])});
  }
  std::reverse(calls.begin(), calls.end());
  return calls;
}

class sentence_embedder {
 public:
  // Reads and checks the model directory, picks the carried variant it describes (a
  // model_error lists the carried ones when none does), loads the tokenizer, maps the checkpoint
  // and binds it to the first bucket (a checkpoint_error names every tensor at fault).
  sentence_embedder(const std::filesystem::path& dir, std::span<const encoder_variant> carried,
                    embedder_options options = {})
      : options_(std::move(options)),
        config_(read_sentence_model_config(dir)),
        variant_(pick(config_, carried, dir)),
        tokenizer_(text::load_wordpiece_tokenizer(dir)),
        weights_(io::safetensors_file::open(dir / "model.safetensors")) {
    if (options_.max_batch < 1)
      throw model_error("sentence_embedder: max_batch must be at least 1");
    if (!std::isfinite(options_.call_cost_tokens))
      throw model_error("sentence_embedder: call_cost_tokens must be finite");
    if (std::int64_t(tokenizer_.vocab().size()) != config_.vocab_size)
      throw model_error("model directory: '" + (dir / "vocab.txt").string() + "' has " +
                        std::to_string(tokenizer_.vocab().size()) +
                        " tokens, config.json's vocab_size is " +
                        std::to_string(config_.vocab_size));
    std::int64_t longest = 0;
    for (const bucket_shape& s : variant_->shapes)
      if (s.batch == 1) longest = std::max(longest, s.length);
    if (longest < std::int64_t(tokenizer_.config().max_length))
      throw model_error("sentence_embedder: the variant " + variant_->name +
                        " carries one-sentence buckets up to " + std::to_string(longest) +
                        " tokens, but the model truncates at " +
                        std::to_string(tokenizer_.config().max_length));
    buckets_.resize(variant_->shapes.size());
    bucket(smallest(1, 1));  // binds the checkpoint once: its errors surface here
  }

  std::int64_t dimension() const { return config_.hidden_size; }
  const sentence_model_config& config() const { return config_; }
  const encoder_variant& variant() const { return *variant_; }
  const text::wordpiece_tokenizer& tokenizer() const { return tokenizer_; }
  const embedder_stats& stats() const { return stats_; }
  const embedder_options& options() const { return options_; }

  // The embeddings of `texts`, texts.size() x dimension() row-major, each a unit vector.
  std::vector<float> embed(std::span<const std::string> texts) {
    std::vector<std::string_view> views(texts.begin(), texts.end());
    return embed(std::span<const std::string_view>(views));
  }
  std::vector<float> embed(std::span<const std::string_view> texts) {
    std::vector<std::vector<std::int32_t>> ids;
    ids.reserve(texts.size());
    std::size_t truncated = 0;
    for (std::string_view t : texts) {
      text::encoding e = tokenizer_.encode(t, [](const std::string&) {});
      truncated += e.truncated;
      ids.push_back(std::move(e.ids));
    }
    if (truncated) {
      const std::string note = "sentence_embedder: " + std::to_string(truncated) + " of " +
                               std::to_string(texts.size()) + " texts were cut to " +
                               std::to_string(tokenizer_.config().max_length) + " tokens";
      if (options_.warn)
        options_.warn(note);
      else
        std::fprintf(stderr, "%s\n", note.c_str());
    }
    return embed_ids(ids);
  }

  // The embeddings of token-id sequences ([CLS] ... [SEP] each, at most the longest bucket).
  std::vector<float> embed_ids(std::span<const std::vector<std::int32_t>> ids) {
    const std::int64_t d = dimension();
    std::vector<float> out(ids.size() * std::size_t(d));
    std::vector<std::size_t> order(ids.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return ids[a].size() < ids[b].size(); });
    std::vector<std::int64_t> lengths(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) lengths[k] = std::int64_t(ids[order[k]].size());
    const std::vector<encoder_call> plan = plan_encoder_calls(
        lengths, chunk_batch(), call_cost(),
        [&](std::int64_t b, std::int64_t len) -> std::int64_t {
          if (b == 1) return variant_->shapes[smallest(1, len)].length;  // none: model_error
          const std::size_t i = find_bucket(b, len);
          return i < variant_->shapes.size() ? variant_->shapes[i].length : 0;
        });
    for (const encoder_call& c : plan) {
      const std::size_t at = c.first, n = c.count;
      encoder_bucket& e = bucket(smallest(c.batch, c.length));
      const std::int64_t len = e.length();
      std::span<std::int32_t> in = e.ids();
      std::span<unsigned char> mask = e.mask();
      std::fill(in.begin(), in.end(), tokenizer_.pad_id());
      std::fill(mask.begin(), mask.end(), static_cast<unsigned char>(0));
      for (std::size_t k = 0; k < n; ++k) {
        const std::vector<std::int32_t>& row = ids[order[at + k]];
        std::copy(row.begin(), row.end(), in.begin() + std::ptrdiff_t(std::int64_t(k) * len));
        std::fill_n(mask.begin() + std::ptrdiff_t(std::int64_t(k) * len), row.size(),
                    static_cast<unsigned char>(1));
        stats_.tokens += std::int64_t(row.size());
      }
      e.run();
      const std::span<const float> y = e.output();
      for (std::size_t k = 0; k < n; ++k)
        std::copy_n(y.begin() + std::ptrdiff_t(std::int64_t(k) * d), d,
                    out.begin() + std::ptrdiff_t(order[at + k] * std::size_t(d)));
      stats_.sentences += std::int64_t(n);
      stats_.padded_tokens += e.batch() * len;
      stats_.encoder_calls += 1;
    }
    return out;
  }

  // The buckets made so far (nullptr: not yet needed), in the variant's order.
  std::span<const std::unique_ptr<encoder_bucket>> buckets() const { return buckets_; }

 private:
  static const encoder_variant* pick(const sentence_model_config& c,
                                     std::span<const encoder_variant> carried,
                                     const std::filesystem::path& dir) {
    for (const encoder_variant& v : carried)
      if (v.config.same_model(c)) return &v;
    std::string list;
    for (const encoder_variant& v : carried) list += "\n  " + v.name + ": " + v.config.describe();
    if (list.empty()) list = " none";
    throw model_error("model directory: '" + (dir / "config.json").string() +
                      "' describes a model this build does not carry (" + c.describe() +
                      "); it carries:" + list);
  }

  // The batch of the chunks: the largest carried batch within max_batch.
  std::int64_t chunk_batch() const {
    std::int64_t b = 1;
    for (const bucket_shape& s : variant_->shapes)
      if (s.batch <= options_.max_batch) b = std::max(b, s.batch);
    return b;
  }
  double call_cost() const {
    if (options_.call_cost_tokens >= 0) return options_.call_cost_tokens;
    return options_.threads.count > 1 ? 9.0 : 2.0;
  }

  // The bucket of batch b with the smallest length that holds `len` tokens (shapes.size(): none).
  std::size_t find_bucket(std::int64_t b, std::int64_t len) const {
    std::size_t best = variant_->shapes.size();
    for (std::size_t i = 0; i < variant_->shapes.size(); ++i) {
      const bucket_shape& s = variant_->shapes[i];
      if (s.batch == b && s.length >= len &&
          (best == variant_->shapes.size() || s.length < variant_->shapes[best].length))
        best = i;
    }
    return best;
  }
  // The same, or a model_error when no bucket holds it.
  std::size_t smallest(std::int64_t b, std::int64_t len) const {
    const std::size_t best = find_bucket(b, len);
    if (best == variant_->shapes.size())
      throw model_error("sentence_embedder: no bucket of batch " + std::to_string(b) + " holds " +
                        std::to_string(len) + " tokens");
    return best;
  }

  encoder_bucket& bucket(std::size_t i) {
    if (!buckets_[i]) {
      std::unique_ptr<encoder_bucket> e = variant_->make(variant_->shapes[i], options_.threads);
      e->share_packed_weights(packed_);
      e->bind_weights(weights_);
      buckets_[i] = std::move(e);
    }
    return *buckets_[i];
  }

  embedder_options options_;
  sentence_model_config config_;
  const encoder_variant* variant_;
  text::wordpiece_tokenizer tokenizer_;
  io::safetensors_file weights_;
  // The buckets' GEMM panels: one copy for all of them, so a call of one finds the weights the
  // previous call of another read still in the caches.
  std::shared_ptr<cpu::packed_weight_cache> packed_ = std::make_shared<cpu::packed_weight_cache>();
  std::vector<std::unique_ptr<encoder_bucket>> buckets_;
  embedder_stats stats_;
};

}  // namespace fusedsl::models
