#pragma once
// GPT-2 decoding a batch of sequences in one step over a paged KV cache (the vLLM design: Kwon et
// al., 2023), with continuous batching: sequences join and leave between steps.
//
// The cache of every layer is a pool of Pages pages of PageSize positions, as two states
// "attn.k_pages" / "attn.v_pages" [Pages * PageSize + 1, D] (a row per position, the heads side by
// side; the last row, never in a page, stands for the keys past a sequence's length), of
// Cfg::cache_type: f32, or bf16 with gpt2_config::with_cache<bf16> (each key and value rounded
// once, as it is written, and read by the attention in place as bf16). A sequence
// owns a page table: its page j holds its positions j * PageSize .. (j + 1) * PageSize - 1, in
// every layer. One step of up to Batch sequences is one program per layer:
//
//   gpt2_paged_layer_program<Cfg, Batch, Ctx, Rows>
//     "x" [Batch, D]; "len" [Batch, 1, 1, 1], the keys row b attends over (its position + 1);
//     "rows" [Batch * Ctx], the pool row of each of its key positions 0..Ctx-1 (from its page
//     table); "slot.<b>" = b * Ctx + its position
//     -> the step's keys and values [Batch, D] (outputs 0, 1) and y [Batch, D] (output 2)
//
// Attention gathers each row's keys and values from the pool through "rows" (the pages are read
// wherever they are in the pool), writes the step's key and value into that copy at slot.<b> (a
// dynamic update slice, in place) and reads the first len keys only. After the layer runs, the
// decoder writes the step's keys and values into their pages (Batch rows of D floats). The
// weights' GEMMs run once for the whole batch, so while decoding is memory-bound a batch step
// costs little more than a single one. Ctx, the most positions a sequence may reach, is a
// compile-time bucket (<= n_positions): the gather copies Batch * Ctx rows per layer whatever the
// lengths.
//
// gpt2_paged_decoder is the step with explicit page tables (what a serving scheduler drives);
// gpt2_continuous_batch adds the page allocator and the sequences' bookkeeping. A prompt runs
// through gpt2_generator's prefill buckets and its keys and values are copied into its pages.
//
// Errors (model_error, naming the value at fault): a bad page table (too short for the position,
// a page outside the pool, a page in two places), a position at or past Ctx (the cache is full),
// a token outside the vocabulary, more rows than the batch; in gpt2_continuous_batch an exhausted
// page pool (before anything runs, so no sequence ever reads a page another one owns) and an
// unknown sequence.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/models/gpt2.hpp"
#include "fusedsl/runtime/gpt2_generator.hpp"

namespace fusedsl::models {

inline constexpr std::int64_t gpt2_max_batch = 16;
inline constexpr std::array<std::string_view, gpt2_max_batch> gpt2_slot_names{
    "slot.0", "slot.1", "slot.2",  "slot.3",  "slot.4",  "slot.5",  "slot.6",  "slot.7",
    "slot.8", "slot.9", "slot.10", "slot.11", "slot.12", "slot.13", "slot.14", "slot.15"};

// One layer of a paged batch step over x [B, D] (the program's inputs as above); marks the new
// key and value pools as outputs 0 and 1; returns the layer's output [B, D].
template <class Cfg, std::int64_t B, std::int64_t Ctx, std::int64_t Rows>
constexpr int emit_gpt2_paged_layer(builder& b, int x, int len, int rows) {
  const dtype wt = Cfg::weight_dtype;
  constexpr std::int64_t d = Cfg::d, H = Cfg::heads, Dh = Cfg::head_dim;
  const int a = nn::emit_layernorm(b, x, "ln_1", Cfg::eps, int(wt), nn::conv1d_layers);
  const int qkv = nn::emit_linear(b, a, "attn.c_attn", 3 * d, true, int(wt), nn::conv1d_layers);
  const int q = b.slice(qkv, 1, 0, d);
  const int k = b.slice(qkv, 1, d, 2 * d);
  const int v = b.slice(qkv, 1, 2 * d, 3 * d);
  // Each row's keys and values gathered from the pool through "rows", [B * Ctx, D], with this
  // step's written in at row b * Ctx + position (an update of the gathered copy, in place). A
  // bf16 pool (Cfg::cache_dtype): the step's rows rounded as they are written, the gathered copy
  // bf16 too, widened where the attention reads it (it reads the bf16 rows in place).
  const dtype ct = Cfg::cache_dtype;
  auto narrow = [&](int t) { return ct == dtype::f32 ? t : b.cast(t, ct); };
  auto widen = [&](int t) { return ct == dtype::f32 ? t : b.cast(t, dtype::f32); };
  const int k_pool = b.state("attn.k_pages", ct, make_dims(Rows, d));
  const int v_pool = b.state("attn.v_pages", ct, make_dims(Rows, d));
  int kg = b.gather(k_pool, rows), vg = b.gather(v_pool, rows);
  for (std::int64_t r = 0; r < B; ++r) {
    const int at = b.input(gpt2_slot_names[std::size_t(r)], dtype::i32, dims{});
    kg = b.dynamic_update_slice(kg, narrow(b.slice(k, 0, r, r + 1)), at, 0);
    vg = b.dynamic_update_slice(vg, narrow(b.slice(v, 0, r, r + 1)), at, 0);
  }
  constexpr std::array<int, 4> heads_first{0, 2, 1, 3};
  const int kh = widen(b.transpose(b.reshape(kg, make_dims(B, Ctx, H, Dh)), heads_first));
  const int vh = widen(b.transpose(b.reshape(vg, make_dims(B, Ctx, H, Dh)), heads_first));
  const int qh = b.transpose(b.reshape(q, make_dims(B, 1, H, Dh)), heads_first);
  const int s = b.matmul(qh, kh, false, true);  // [B, H, 1, Ctx]
  const int scale = b.constant(1.0 / nn::sqrt_of(double(Dh)));
  const int ss = b.binary(op_kind::mul, s, scale);
  const int keys = b.iota(dtype::i32, make_dims(1, 1, 1, Ctx), 3);
  const int visible = b.binary(op_kind::lt, keys, len);
  const int ninf = b.constant(-std::numeric_limits<double>::infinity());
  const int p = b.softmax(b.select(visible, ss, ninf), 3);
  const int o = b.matmul(p, vh);  // [B, H, 1, Dh]
  const int ctx = b.reshape(b.transpose(o, heads_first), make_dims(B, d));
  b.mark_output(k);
  b.mark_output(v);
  return emit_gpt2_block_tail(b, x, ctx, "", Cfg::inner, Cfg::eps, wt);
}

namespace detail {

// wte[ids] + wpe[positions] for a batch: "input_ids" [B], "positions" [B] -> [B, D].
template <class Cfg, std::int64_t B>
struct gpt2_batch_embed_node : expr::node_base<expr::input_t<"input_ids", std::int32_t, B>,
                                               expr::input_t<"positions", std::int32_t, B>> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape = make_dims(B, Cfg::d);
  static constexpr int emit(builder& b, std::array<int, 2> x) {
    const dtype wt = Cfg::weight_dtype;
    const int wte = b.param("wte.weight", wt, make_dims(Cfg::vocab, Cfg::d));
    const int wpe = b.param("wpe.weight", wt, make_dims(Cfg::positions, Cfg::d));
    const int w = b.cast(b.gather(wte, x[0]), dtype::f32);
    const int p = b.cast(b.gather(wpe, x[1]), dtype::f32);
    return b.binary(op_kind::add, w, p);
  }
};

template <class Cfg, std::int64_t B, std::int64_t Ctx, std::int64_t Rows>
struct gpt2_paged_layer_node : expr::node_base<expr::input_t<"x", float, B, Cfg::d>,
                                               expr::input_t<"len", std::int32_t, B, 1, 1, 1>,
                                               expr::input_t<"rows", std::int32_t, B * Ctx>> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape = make_dims(B, Cfg::d);
  static constexpr int emit(builder& b, std::array<int, 3> x) {
    return emit_gpt2_paged_layer<Cfg, B, Ctx, Rows>(b, x[0], x[1], x[2]);
  }
};

// LN_f and the LM head over h [B, D]: marks the logits [B, V] as output 0; returns their argmax
// per row [B] i32.
template <class Cfg, std::int64_t B>
struct gpt2_batch_head_node : expr::node_base<expr::input_t<"h", float, B, Cfg::d>> {
  static constexpr dtype type = dtype::i32;
  static constexpr dims shape = make_dims(B);
  static constexpr int emit(builder& b, std::array<int, 1> x) {
    const int logits = emit_gpt2_head(b, x[0], Cfg::vocab, Cfg::eps, Cfg::weight_dtype);
    b.mark_output(logits);
    return b.reduce(op_kind::argmax, logits, 1, false);
  }
};

}  // namespace detail

template <class Cfg, std::int64_t B>
using gpt2_batch_embed_program = program<detail::gpt2_batch_embed_node<Cfg, B>>;
// One layer's paged batch step; outputs: the key and value pools (states), then y (output 2).
template <class Cfg, std::int64_t B, std::int64_t Ctx, std::int64_t Rows>
using gpt2_paged_layer_program = program<detail::gpt2_paged_layer_node<Cfg, B, Ctx, Rows>>;
template <class Cfg, std::int64_t B>
using gpt2_batch_head_program = program<detail::gpt2_batch_head_node<Cfg, B>>;

// One step for a batch of up to Batch sequences whose caches are in pages of PageSize positions,
// Pages of them in the pool, each sequence reaching at most Ctx positions; prompts run through
// the prefill buckets Buckets... (as gpt2_generator's).
template <class Cfg, std::int64_t Batch, std::int64_t Ctx, std::int64_t PageSize,
          std::int64_t Pages, std::int64_t... Buckets>
class gpt2_paged_decoder {
  static_assert(Batch >= 1 && Batch <= gpt2_max_batch,
                "gpt2_paged_decoder: the batch holds 1 to 16 sequences");
  static_assert(Ctx >= 1 && Ctx <= Cfg::positions,
                "gpt2_paged_decoder: Ctx must be between 1 and n_positions");
  static_assert(PageSize >= 1 && Pages >= 1, "gpt2_paged_decoder: pages must be non-empty");
  static_assert(((Buckets <= Ctx) && ...), "gpt2_paged_decoder: a prefill bucket exceeds Ctx");
  static constexpr int L = Cfg::layers;
  static constexpr std::int64_t D = Cfg::d, H = Cfg::heads, Dh = Cfg::head_dim;

 public:
  using config = Cfg;
  // The pages' element type: Cfg::cache_type (float, or bf16 with gpt2_config::with_cache).
  using cache_type = typename Cfg::cache_type;
  static constexpr std::int64_t batch = Batch, context = Ctx, page_size = PageSize, pages = Pages;
  // Pool rows: every page's positions, then the sink row of the batch's unused rows.
  static constexpr std::int64_t pool_rows = Pages * PageSize + 1;
  // The pages a sequence of n positions needs.
  static constexpr std::int64_t pages_for(std::int64_t n) { return (n + PageSize - 1) / PageSize; }

  using embed_program = gpt2_batch_embed_program<Cfg, Batch>;
  using layer_program = gpt2_paged_layer_program<Cfg, Batch, Ctx, pool_rows>;
  using head_program = gpt2_batch_head_program<Cfg, Batch>;

  // One sequence's row of a step: the token at `position`, the cache in the pages of `pages`.
  struct row {
    std::int32_t token = 0;
    std::int64_t position = 0;
    std::span<const std::int32_t> pages;
  };

  explicit gpt2_paged_decoder(const io::safetensors_file& file)
      : prefill_(std::make_unique<gpt2_generator<Cfg, Buckets...>>(file)) {
    weights_.push_back(detail::bind_gpt2_weights(embed_, file, "", "the batch embeddings"));
    embed_.bind("input_ids", ids_);
    embed_.bind("positions", positions_);
    embed_.bind_output(0, hidden_[0]);
    for (int i = 0; i < L; ++i) {
      layers_.push_back(std::make_unique<cpu::executor<layer_program>>(layer_program{}));
      cpu::executor<layer_program>& ex = *layers_.back();
      weights_.push_back(detail::bind_gpt2_weights(ex, file, "h." + std::to_string(i) + ".",
                                                   "paged layer " + std::to_string(i)));
      ex.bind("x", hidden_[std::size_t(i % 2)]);
      ex.bind("len", len_);
      ex.bind("rows", rows_);
      for (std::int64_t r = 0; r < Batch; ++r)
        ex.bind(gpt2_slot_names[std::size_t(r)], slots_[std::size_t(r)]);
      ex.bind_output(gpt2_outputs::key, kv_[0]);
      ex.bind_output(gpt2_outputs::value, kv_[1]);
      ex.bind_output(gpt2_outputs::hidden, hidden_[std::size_t((i + 1) % 2)]);
    }
    weights_.push_back(detail::bind_gpt2_weights(head_, file, "", "the batch LM head"));
    head_.bind("h", hidden_[std::size_t(L % 2)]);
    head_.bind_output(gpt2_outputs::logits, logits_);
    head_.bind_output(gpt2_outputs::argmax, argmax_);
  }
  gpt2_paged_decoder(const gpt2_paged_decoder&) = delete;
  gpt2_paged_decoder& operator=(const gpt2_paged_decoder&) = delete;

  // Runs `prompt` (positions 0..n-1) and writes its keys and values into `pages` (at least
  // pages_for(n) of them); the logits of its last token.
  std::span<const float> prefill(std::span<const std::int32_t> prompt,
                                 std::span<const std::int32_t> pages) {
    check_pages(pages, std::int64_t(prompt.size()) - 1, "the prompt's");
    std::span<const float> logits = prefill_->prefill(prompt);
    const std::int64_t n = std::int64_t(prompt.size());
    for (int i = 0; i < L; ++i)
      for (int which = 0; which < 2; ++which) {
        // The generator's cache is of the pool's dtype (a bf16 one rounded as a step rounds).
        const cache_type* src = prefill_->cache(i, which == 1);
        cache_type* pool = pages_of(*layers_[std::size_t(i)], which == 1);
        for (std::int64_t j = 0; j < n; ++j) {
          cache_type* dst = pool + pool_row(pages, j) * D;
          for (std::int64_t h = 0; h < H; ++h)
            std::memcpy(dst + h * Dh, src + (h * Cfg::positions + j) * Dh,
                        std::size_t(Dh) * sizeof(cache_type));
        }
      }
    return logits;
  }

  // One step for rows.size() sequences (1 to Batch): each row's token at its position, its key
  // and value written into its page for that position, attention over positions 0..position.
  void step(std::span<const row> rows) {
    check_batch(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const row& x = rows[r];
      const std::string who = "row " + std::to_string(r);
      check_token(x.token, who);
      if (x.position < 0 || x.position >= Ctx)
        throw model_error("gpt2 paged: " + who + ": position " + std::to_string(x.position) +
                          " overflows the cache: a sequence holds positions 0 to " +
                          std::to_string(Ctx - 1));
      check_pages(x.pages, x.position, who + "'s");
    }
    check_disjoint(rows);
    const std::int64_t sink = pool_rows - 1;
    for (std::int64_t r = 0; r < Batch; ++r) {
      const bool used = r < std::int64_t(rows.size());
      const row x = used ? rows[std::size_t(r)] : row{};
      ids_[r] = x.token;
      positions_[r] = std::int32_t(x.position);
      len_(r, 0, 0, 0) = std::int32_t(x.position + 1);
      for (std::int64_t j = 0; j < Ctx; ++j)
        rows_[r * Ctx + j] = std::int32_t(used && j <= x.position ? pool_row(x.pages, j) : sink);
      slots_[std::size_t(r)]() = std::int32_t(r * Ctx + (used ? x.position : 0));
    }
    embed_.run();
    for (auto& ex : layers_) {
      ex->run();
      // The step's keys and values into their pages (rounded as the layer rounded the ones it
      // attended over, for a bf16 pool).
      for (int which = 0; which < 2; ++which) {
        cache_type* pool = pages_of(*ex, which == 1);
        for (std::size_t r = 0; r < rows.size(); ++r) {
          cache_type* dst = pool + pool_row(rows[r].pages, rows[r].position) * D;
          const float* src = kv_[std::size_t(which)].data() + std::int64_t(r) * D;
          if constexpr (std::is_same_v<cache_type, float>)
            std::memcpy(dst, src, std::size_t(D) * sizeof(float));
          else
            for (std::int64_t x = 0; x < D; ++x) dst[x] = cache_type(src[x]);
        }
      }
    }
    head_.run();
    rows_in_step_ = rows.size();
  }

  // A step's size (1 to Batch sequences) and a token of one of its rows (`who` names the row).
  static void check_batch(std::size_t n) {
    if (n == 0 || std::int64_t(n) > Batch)
      throw model_error("gpt2 paged: a step of " + std::to_string(n) +
                        " sequences; the batch holds 1 to " + std::to_string(Batch));
  }
  static void check_token(std::int32_t t, const std::string& who) {
    if (t < 0 || t >= Cfg::vocab)
      throw model_error("gpt2 paged: " + who + ": token " + std::to_string(t) +
                        " is outside the vocabulary [0, " + std::to_string(Cfg::vocab) + ")");
  }

  // Row r's logits after the last step (r < that step's rows).
  std::span<const float> logits(std::size_t r) const {
    check_row(r);
    return {logits_.data() + r * std::size_t(Cfg::vocab), std::size_t(Cfg::vocab)};
  }
  // Row r's argmax (the lowest id among equal maxima).
  std::int32_t greedy(std::size_t r) const {
    check_row(r);
    return argmax_[std::int64_t(r)];
  }
  // The greedy choice after the last prefill.
  std::int32_t prefill_greedy() const { return prefill_->greedy(); }

  // Kernels that fell back to the interpreter over the step's programs (0: none).
  int interpreted_groups() const {
    int n = embed_.stats().interpreted_groups + head_.stats().interpreted_groups;
    for (const auto& ex : layers_) n += ex->stats().interpreted_groups;
    return n;
  }

  // Layer i's pool of keys (values: of values) [pool_rows, D], a row per page position.
  const cache_type* pool(int layer, bool values) {
    return pages_of(*layers_[std::size_t(layer)], values);
  }

 private:
  static cache_type* pages_of(cpu::executor<layer_program>& ex, bool values) {
    return static_cast<cache_type*>(ex.state(values ? "attn.v_pages" : "attn.k_pages").data);
  }
  static std::int64_t pool_row(std::span<const std::int32_t> pages, std::int64_t j) {
    return std::int64_t(pages[std::size_t(j / PageSize)]) * PageSize + j % PageSize;
  }
  // The table must cover positions 0..last with pages of the pool, none twice.
  static void check_pages(std::span<const std::int32_t> pages, std::int64_t last,
                          const std::string& whose) {
    const std::int64_t need = pages_for(last + 1);
    if (std::int64_t(pages.size()) < need)
      throw model_error("gpt2 paged: " + whose + " page table holds " +
                        std::to_string(pages.size()) + " pages; position " + std::to_string(last) +
                        " needs " + std::to_string(need) + " of " + std::to_string(PageSize) +
                        " positions");
    for (std::int64_t j = 0; j < need; ++j) {
      const std::int32_t p = pages[std::size_t(j)];
      if (p < 0 || p >= Pages)
        throw model_error("gpt2 paged: " + whose + " page table entry " + std::to_string(j) +
                          " is page " + std::to_string(p) + ", outside the pool [0, " +
                          std::to_string(Pages) + ")");
      for (std::int64_t i = 0; i < j; ++i)
        if (pages[std::size_t(i)] == p)
          throw model_error("gpt2 paged: " + whose + " page table holds page " + std::to_string(p) +
                            " twice (entries " + std::to_string(i) + " and " + std::to_string(j) +
                            ")");
    }
  }
  // No page is in the tables of two rows (one would overwrite the other's cache).
  static void check_disjoint(std::span<const row> rows) {
    std::vector<std::int64_t> owner(static_cast<std::size_t>(Pages), -1);
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (std::int64_t j = 0; j < pages_for(rows[r].position + 1); ++j) {
        std::int64_t& o = owner[std::size_t(rows[r].pages[std::size_t(j)])];
        if (o >= 0)
          throw model_error("gpt2 paged: page " + std::to_string(rows[r].pages[std::size_t(j)]) +
                            " is in the page tables of rows " + std::to_string(o) + " and " +
                            std::to_string(r));
        o = std::int64_t(r);
      }
  }
  void check_row(std::size_t r) const {
    if (r >= rows_in_step_)
      throw model_error("gpt2 paged: row " + std::to_string(r) + ": the last step had " +
                        std::to_string(rows_in_step_) + " rows");
  }

  std::unique_ptr<gpt2_generator<Cfg, Buckets...>> prefill_;
  cpu::executor<embed_program> embed_{embed_program{}};
  std::vector<std::unique_ptr<cpu::executor<layer_program>>> layers_;
  cpu::executor<head_program> head_{head_program{}};
  tensor<std::int32_t, Batch> ids_, positions_;
  tensor<std::int32_t, Batch, 1, 1, 1> len_;
  tensor<std::int32_t, Batch * Ctx> rows_;
  std::array<tensor<float, Batch, D>, 2> kv_;
  std::array<tensor<std::int32_t>, Batch> slots_;
  std::array<tensor<float, Batch, D>, 2> hidden_;
  tensor<float, Batch, Cfg::vocab> logits_;
  tensor<std::int32_t, Batch> argmax_;
  std::vector<io::checkpoint_binding> weights_;
  std::size_t rows_in_step_ = 0;
};

// Continuous batching over gpt2_paged_decoder: sequences join (their prompt is prefilled into
// pages taken from the pool) and leave (their pages go back to the pool) between steps; a step
// feeds one token to each sequence named, allocating a page for a sequence that enters a new one.
template <class Cfg, std::int64_t Batch, std::int64_t Ctx, std::int64_t PageSize,
          std::int64_t Pages, std::int64_t... Buckets>
class gpt2_continuous_batch {
  using decoder = gpt2_paged_decoder<Cfg, Batch, Ctx, PageSize, Pages, Buckets...>;
  struct sequence {
    std::vector<std::int32_t> pages;
    std::int64_t length = 0;  // positions in the cache
    std::vector<float> logits;
    std::int32_t greedy = -1;
  };

 public:
  struct feed {
    int sequence;
    std::int32_t token;
  };

  explicit gpt2_continuous_batch(const io::safetensors_file& file)
      : dec_(std::make_unique<decoder>(file)) {
    for (std::int64_t p = Pages - 1; p >= 0; --p) free_.push_back(std::int32_t(p));
  }

  // Prefills `prompt` as a new sequence; its id (ids are not reused).
  int join(std::span<const std::int32_t> prompt) {
    if (std::int64_t(prompt.size()) > Ctx)
      throw model_error("gpt2 paged: the prompt has " + std::to_string(prompt.size()) +
                        " tokens; a sequence holds " + std::to_string(Ctx));
    const std::int64_t need = decoder::pages_for(std::int64_t(prompt.size()));
    require_pages(need);
    sequence s;
    for (std::int64_t j = 0; j < need; ++j) s.pages.push_back(take());
    try {
      const std::span<const float> l = dec_->prefill(prompt, s.pages);
      s.logits.assign(l.begin(), l.end());
    } catch (...) {
      for (std::int32_t p : s.pages) free_.push_back(p);
      throw;
    }
    s.length = std::int64_t(prompt.size());
    s.greedy = dec_->prefill_greedy();
    const int id = next_id_++;
    seqs_.emplace(id, std::move(s));
    return id;
  }

  // Ends sequence id; its pages go back to the pool.
  void leave(int id) {
    sequence& s = at(id);
    for (std::int32_t p : s.pages) free_.push_back(p);
    seqs_.erase(id);
  }

  // One token for each sequence of `feeds` (at most Batch, each once), at its length.
  void step(std::span<const feed> feeds) {
    decoder::check_batch(feeds.size());
    std::int64_t need = 0;
    for (std::size_t i = 0; i < feeds.size(); ++i) {
      const sequence& s = at(feeds[i].sequence);
      for (std::size_t j = 0; j < i; ++j)
        if (feeds[j].sequence == feeds[i].sequence)
          throw model_error("gpt2 paged: sequence " + std::to_string(feeds[i].sequence) +
                            " is fed twice in one step");
      if (s.length >= Ctx)
        throw model_error("gpt2 paged: sequence " + std::to_string(feeds[i].sequence) +
                          " is full: it holds " + std::to_string(Ctx) + " positions");
      decoder::check_token(feeds[i].token, "sequence " + std::to_string(feeds[i].sequence));
      if (s.length % PageSize == 0) ++need;
    }
    require_pages(need);
    std::vector<typename decoder::row> rows;
    for (const feed& f : feeds) {
      sequence& s = at(f.sequence);
      if (std::int64_t(s.pages.size()) < decoder::pages_for(s.length + 1))
        s.pages.push_back(take());
      rows.push_back({f.token, s.length, s.pages});
    }
    dec_->step(rows);
    for (std::size_t r = 0; r < feeds.size(); ++r) {
      sequence& s = at(feeds[r].sequence);
      const std::span<const float> l = dec_->logits(r);
      s.logits.assign(l.begin(), l.end());
      s.greedy = dec_->greedy(r);
      ++s.length;
    }
  }

  std::span<const float> logits(int id) { return at(id).logits; }
  std::int32_t greedy(int id) { return at(id).greedy; }
  std::int64_t length(int id) { return at(id).length; }
  std::int64_t free_pages() const { return std::int64_t(free_.size()); }
  std::size_t sequences() const { return seqs_.size(); }
  int interpreted_groups() const { return dec_->interpreted_groups(); }

 private:
  sequence& at(int id) {
    auto it = seqs_.find(id);
    if (it == seqs_.end())
      throw model_error("gpt2 paged: no sequence " + std::to_string(id) +
                        " (it left, or never joined)");
    return it->second;
  }
  void require_pages(std::int64_t need) const {
    if (need > std::int64_t(free_.size()))
      throw model_error("gpt2 paged: the page pool is exhausted: " + std::to_string(need) +
                        " pages needed, " + std::to_string(free_.size()) + " of " +
                        std::to_string(Pages) + " free (" + std::to_string(seqs_.size()) +
                        " sequences hold the rest; let one leave)");
  }
  std::int32_t take() {
    const std::int32_t p = free_.back();
    free_.pop_back();
    return p;
  }

  std::unique_ptr<decoder> dec_;
  std::vector<std::int32_t> free_;
  std::map<int, sequence> seqs_;
  int next_id_ = 0;
};

}  // namespace fusedsl::models
