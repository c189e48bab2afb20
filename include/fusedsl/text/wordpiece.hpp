#pragma once
// BERT's tokenizer: text in, token ids out, the same ids as Hugging Face's BertTokenizer (the
// tokenizers-backed one that sentence-transformers loads) for every input.
//
//   1. UTF-8 is decoded; each ill-formed subpart becomes U+FFFD (text/utf8.hpp), which clean_text
//      then drops, so bad bytes vanish without splitting the word around them. That is what the
//      reference tokenizer does with the string Python's bytes.decode("utf-8", "replace") makes
//      of the same bytes. A leading byte order mark is dropped.
//   2. Special tokens written in the text ("[CLS]", "[MASK]", ...: the added tokens) are matched
//      first, case-sensitively, leftmost-longest, and become their ids; the text between them is
//      tokenised on its own.
//   3. Normalisation and word splitting (text/bert_normalizer.hpp): \r\n, \r and every other
//      whitespace separate words; empty or whitespace-only text has no words.
//   4. WordPiece: each word, greedy longest-match-first against the vocabulary, continuations
//      prefixed "##"; a word longer than max_input_chars_per_word code points, or one that cannot
//      be covered, is one [UNK].
//   5. [CLS] words [SEP], truncated to max_length tokens (the two specials included) by dropping
//      word pieces from the end.
//
// Truncation is reported once per encode/encode_batch call that truncates anything: to the
// warning sink passed in, or to stderr when none is.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusedsl/text/bert_normalizer.hpp"
#include "fusedsl/text/special_tokens.hpp"
#include "fusedsl/text/utf8.hpp"
#include "fusedsl/text/vocabulary.hpp"

namespace fusedsl::text {

struct wordpiece_config {
  bert_normalizer_options normalizer;
  std::string unk_token = "[UNK]";
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string continuing_subword_prefix = "##";
  std::size_t max_input_chars_per_word = 100;
  // Tokens per sequence, [CLS] and [SEP] included; 0: no truncation.
  std::size_t max_length = 512;
  // Strings matched in the raw text as whole tokens (the added tokens): [PAD] [UNK] [CLS] [SEP]
  // [MASK] for BERT.
  std::vector<std::string> special_tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
};

// Where a truncation warning goes; an empty function means stderr.
using warning_sink = std::function<void(const std::string&)>;

// One sequence: [CLS] pieces [SEP].
struct encoding {
  std::vector<std::int32_t> ids;
  bool truncated = false;
};

// A batch padded to one length, rows x columns, row-major, the model's inputs.
struct token_batch {
  std::size_t rows = 0;
  std::size_t columns = 0;                   // the longest row, or pad_to if that is longer
  std::vector<std::int32_t> ids;             // [PAD] after each row's tokens
  std::vector<std::int32_t> attention_mask;  // 1 on tokens, 0 on padding
  std::vector<std::int32_t> lengths;         // tokens per row, [CLS] and [SEP] included
  std::size_t truncated = 0;                 // rows that max_length cut
};

class wordpiece_tokenizer {
 public:
  wordpiece_tokenizer(vocabulary vocab, wordpiece_config config)
      : vocab_(std::move(vocab)), config_(std::move(config)) {
    const auto need = [&](const std::string& token, const char* role) {
      const auto id = vocab_.find(token);
      if (!id)
        throw text_error("wordpiece: the " + std::string(role) + " token '" + token +
                         "' is not in the vocabulary");
      return *id;
    };
    unk_ = need(config_.unk_token, "unknown");
    cls_ = need(config_.cls_token, "classifier");
    sep_ = need(config_.sep_token, "separator");
    pad_ = need(config_.pad_token, "padding");
    for (const std::string& s : config_.special_tokens) {
      if (s.empty()) throw text_error("wordpiece: an empty special token");
      specials_.add(utf8::decode(s), need(s, "special"));
    }
    if (config_.max_length != 0 && config_.max_length < 2)
      throw text_error("wordpiece: max_length " + std::to_string(config_.max_length) +
                       " leaves no room for [CLS] and [SEP]");
  }

  const vocabulary& vocab() const { return vocab_; }
  const wordpiece_config& config() const { return config_; }
  std::int32_t unk_id() const { return unk_; }
  std::int32_t cls_id() const { return cls_; }
  std::int32_t sep_id() const { return sep_; }
  std::int32_t pad_id() const { return pad_; }

  // The ids of the text's tokens, without [CLS]/[SEP] and untruncated (at most `limit` of them
  // when a limit is given; *more is set when the text has further tokens).
  std::vector<std::int32_t> token_ids(std::string_view text, std::size_t limit = SIZE_MAX,
                                      bool* more = nullptr) const {
    std::u32string s = utf8::decode(text);
    if (!s.empty() && s.front() == U'\uFEFF') s.erase(0, 1);
    std::vector<std::int32_t> ids;
    bool over = false;
    const auto push = [&](std::int32_t id) {
      if (ids.size() == limit) {
        over = true;
        return false;
      }
      ids.push_back(id);
      return true;
    };
    std::size_t at = 0;
    while (at <= s.size() && !over) {
      const auto special = specials_.find(s, at);
      if (!tokenize_span(std::u32string_view(s).substr(at, special.at - at), push)) break;
      if (!special.id || !push(*special.id)) break;
      at = special.at + special.length;
    }
    if (more) *more = over;
    return ids;
  }

  // The word pieces of the text as strings (no [CLS]/[SEP], no truncation).
  std::vector<std::string> tokenize(std::string_view text) const {
    std::vector<std::string> out;
    for (std::int32_t id : token_ids(text)) out.push_back(vocab_.token(id));
    return out;
  }

  encoding encode(std::string_view text, const warning_sink& warn = {}) const {
    encoding e = encode_one(text);
    if (e.truncated) report(1, 1, warn);
    return e;
  }

  // Every text encoded, padded with [PAD] to the longest (or to pad_to, if longer).
  token_batch encode_batch(std::span<const std::string_view> texts, const warning_sink& warn = {},
                           std::size_t pad_to = 0) const {
    std::vector<encoding> rows;
    rows.reserve(texts.size());
    token_batch b;
    b.rows = texts.size();
    b.columns = pad_to;
    for (std::string_view t : texts) {
      rows.push_back(encode_one(t));
      b.columns = std::max(b.columns, rows.back().ids.size());
      b.truncated += rows.back().truncated;
    }
    b.ids.assign(b.rows * b.columns, pad_);
    b.attention_mask.assign(b.rows * b.columns, 0);
    for (std::size_t r = 0; r < b.rows; ++r) {
      const std::vector<std::int32_t>& ids = rows[r].ids;
      std::copy(ids.begin(), ids.end(), b.ids.begin() + static_cast<std::ptrdiff_t>(r * b.columns));
      std::fill_n(b.attention_mask.begin() + static_cast<std::ptrdiff_t>(r * b.columns), ids.size(),
                  1);
      b.lengths.push_back(static_cast<std::int32_t>(ids.size()));
    }
    if (b.truncated) report(b.truncated, b.rows, warn);
    return b;
  }
  token_batch encode_batch(std::span<const std::string> texts, const warning_sink& warn = {},
                           std::size_t pad_to = 0) const {
    const std::vector<std::string_view> views(texts.begin(), texts.end());
    return encode_batch(std::span<const std::string_view>(views), warn, pad_to);
  }

 private:
  // Normalises, splits and word-pieces one stretch of text between special tokens; false when
  // `push` refuses an id (the limit is reached).
  template <class Push>
  bool tokenize_span(std::u32string_view span, Push& push) const {
    if (span.empty()) return true;
    const std::u32string normal = bert_normalize(span, config_.normalizer);
    for (std::u32string_view word : bert_pre_tokenize(normal))
      if (!word_pieces(word, push)) return false;
    return true;
  }

  // Greedy longest-match-first WordPiece over one word.
  template <class Push>
  bool word_pieces(std::u32string_view word, Push& push) const {
    if (word.size() > config_.max_input_chars_per_word) return push(unk_);
    std::string bytes;
    std::vector<std::size_t> at;  // byte offset of each code point, and the end
    for (char32_t c : word) {
      at.push_back(bytes.size());
      utf8::append(bytes, c);
    }
    at.push_back(bytes.size());
    std::vector<std::int32_t> pieces;
    std::string key;
    for (std::size_t start = 0; start < word.size();) {
      std::size_t end = word.size();
      std::optional<std::int32_t> id;
      for (; end > start; --end) {
        key.assign(start > 0 ? config_.continuing_subword_prefix : std::string());
        key.append(bytes, at[start], at[end] - at[start]);
        if ((id = vocab_.find(key))) break;
      }
      if (!id) return push(unk_);  // one piece cannot be matched: the whole word is unknown
      pieces.push_back(*id);
      start = end;
    }
    for (std::int32_t id : pieces)
      if (!push(id)) return false;
    return true;
  }

  encoding encode_one(std::string_view text) const {
    encoding e;
    const std::size_t limit = config_.max_length == 0 ? SIZE_MAX : config_.max_length - 2;
    bool more = false;
    std::vector<std::int32_t> body = token_ids(text, limit, &more);
    e.ids.reserve(body.size() + 2);
    e.ids.push_back(cls_);
    e.ids.insert(e.ids.end(), body.begin(), body.end());
    e.ids.push_back(sep_);
    e.truncated = more;
    return e;
  }

  void report(std::size_t truncated, std::size_t total, const warning_sink& warn) const {
    const std::string msg = "wordpiece: " + std::to_string(truncated) + " of " +
                            std::to_string(total) + " text(s) longer than " +
                            std::to_string(config_.max_length) +
                            " tokens were truncated to that length";
    if (warn)
      warn(msg);
    else
      std::fprintf(stderr, "%s\n", msg.c_str());
  }

  vocabulary vocab_;
  wordpiece_config config_;
  std::int32_t unk_ = 0, cls_ = 0, sep_ = 0, pad_ = 0;
  special_tokens<char32_t> specials_;
};

}  // namespace fusedsl::text
