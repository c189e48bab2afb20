#pragma once
// GPT-2's byte-level byte-pair encoding (Radford et al. 2019; OpenAI's gpt-2 encoder.py), set up
// from a vocab.json (token -> id) and a merges.txt (one merge "a b" per line, by rank) in the
// format Hugging Face's GPT-2 files have:
//   text -> special tokens split out -> GPT-2's pre-tokenisation (gpt2_pretokenizer.hpp) ->
//   each piece's bytes spelled in the byte-level alphabet (byte_level.hpp) -> merges: while two
//   neighbouring symbols form a merge, take the merge of lowest rank and apply it to every
//   occurrence, left to right without overlap -> ids.
// Decoding maps ids back to bytes; bpe_stream_decoder hands them out a whole character at a time.
//
// Needs nlohmann-json (headers) and utf8proc (link -lutf8proc).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusedsl/io/read_file.hpp"
#include "fusedsl/text/byte_level.hpp"
#include "fusedsl/text/error.hpp"
#include "fusedsl/text/gpt2_pretokenizer.hpp"
#include "fusedsl/text/special_tokens.hpp"
#include "fusedsl/text/utf8.hpp"

namespace fusedsl::text {

// A vocabulary or merges file that can't be read or is malformed, or an id outside the vocabulary.
struct bpe_error : text_error {
  using text_error::text_error;
};

struct bpe_options {
  // Tokens matched in the text before pre-tokenisation and encoded as their own id (Hugging Face's
  // special added tokens); each must be in the vocabulary.
  std::vector<std::string> special_tokens{"<|endoftext|>"};
  // Pieces whose ids are kept for the next time they occur; when full, the cache starts over.
  std::size_t cache_entries = 16384;
  // Pieces longer than this (bytes) are not cached.
  std::size_t cache_piece_bytes = 256;
};

class bpe_tokenizer {
 public:
  using id_type = std::int32_t;

  // `vocab_json` and `merges_txt` are the files' contents; errors name the files as
  // `vocab_name` and `merges_name`.
  bpe_tokenizer(std::string_view vocab_json, std::string_view merges_txt, bpe_options options = {},
                std::string_view vocab_name = "vocab.json",
                std::string_view merges_name = "merges.txt")
      : cache_(options.cache_entries, options.cache_piece_bytes) {
    load_vocab(vocab_json, vocab_name, options.special_tokens);
    load_merges(merges_txt, merges_name);
  }

  static bpe_tokenizer from_files(const std::filesystem::path& vocab_json,
                                  const std::filesystem::path& merges_txt,
                                  bpe_options options = {}) {
    const std::string vocab = read_file(vocab_json);
    const std::string merges = read_file(merges_txt);
    return bpe_tokenizer(vocab, merges, std::move(options), vocab_json.string(),
                         merges_txt.string());
  }
  // vocab.json and merges.txt in `directory`.
  static bpe_tokenizer from_directory(const std::filesystem::path& directory,
                                      bpe_options options = {}) {
    return from_files(directory / "vocab.json", directory / "merges.txt", std::move(options));
  }

  // Ids of `text` (well-formed UTF-8, else utf8_error naming the byte), special tokens included.
  std::vector<id_type> encode(std::string_view text) const {
    check_utf8(text);
    std::vector<id_type> ids;
    std::size_t pos = 0;
    while (pos < text.size()) {
      const auto special = specials_.find(text, pos);
      encode_ordinary_into(text.substr(pos, special.at - pos), ids);
      if (!special.id) break;
      ids.push_back(*special.id);
      pos = special.at + special.length;
    }
    return ids;
  }

  // Ids of `text` with special tokens' text encoded as any other text.
  std::vector<id_type> encode_ordinary(std::string_view text) const {
    check_utf8(text);
    std::vector<id_type> ids;
    encode_ordinary_into(text, ids);
    return ids;
  }

  // The bytes the ids stand for (not always well-formed UTF-8: a token may end inside a
  // character; utf8::replace_invalid gives Hugging Face's decode). bpe_error for an unknown id.
  std::string decode(std::span<const id_type> ids) const {
    std::string out;
    for (const id_type id : ids) out += token_bytes(id);
    return out;
  }

  const std::string& token_bytes(id_type id) const {
    check_id(id);
    return bytes_[static_cast<std::size_t>(id)];
  }
  // The token as vocab.json spells it.
  const std::string& token(id_type id) const {
    check_id(id);
    return spellings_[static_cast<std::size_t>(id)];
  }
  std::optional<id_type> find_token(std::string_view spelled) const {
    const auto it = id_of_.find(std::string(spelled));
    if (it == id_of_.end()) return std::nullopt;
    return it->second;
  }
  // The id of a special token; bpe_error when `text` is not one.
  id_type special_id(std::string_view text) const {
    if (const auto id = specials_.id_of(text)) return *id;
    throw bpe_error("bpe: '" + std::string(text) + "' is not a special token");
  }
  // <|endoftext|>, where it is a special token.
  std::optional<id_type> end_of_text() const { return specials_.id_of("<|endoftext|>"); }

  std::size_t vocab_size() const { return bytes_.size(); }
  std::size_t merge_count() const { return merges_.size(); }
  std::size_t cache_size() const { return cache_.size(); }

 private:
  struct merge {
    id_type rank;
    id_type result;
  };
  static constexpr std::uint64_t pair_key(id_type a, id_type b) {
    return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b);
  }

  // Pieces -> ids, bounded; copying a tokenizer gives the copy an empty cache.
  class piece_cache {
   public:
    piece_cache(std::size_t entries, std::size_t piece_bytes)
        : entries_(entries), piece_bytes_(piece_bytes) {}
    piece_cache(const piece_cache& o) : entries_(o.entries_), piece_bytes_(o.piece_bytes_) {}
    piece_cache& operator=(const piece_cache& o) {
      if (this != &o) {
        std::lock_guard lock(mutex_);
        map_.clear();
        entries_ = o.entries_;
        piece_bytes_ = o.piece_bytes_;
      }
      return *this;
    }
    bool caches(std::string_view piece) const {
      return entries_ != 0 && piece.size() <= piece_bytes_;
    }
    bool find(std::string_view piece, std::vector<id_type>& out) const {
      std::lock_guard lock(mutex_);
      const auto it = map_.find(std::string(piece));
      if (it == map_.end()) return false;
      out.insert(out.end(), it->second.begin(), it->second.end());
      return true;
    }
    void insert(std::string_view piece, std::span<const id_type> ids) const {
      std::lock_guard lock(mutex_);
      if (map_.size() >= entries_) map_.clear();
      map_.emplace(std::string(piece), std::vector<id_type>(ids.begin(), ids.end()));
    }
    std::size_t size() const {
      std::lock_guard lock(mutex_);
      return map_.size();
    }

   private:
    std::size_t entries_;
    std::size_t piece_bytes_;
    mutable std::mutex mutex_;
    mutable std::unordered_map<std::string, std::vector<id_type>> map_;
  };

  static std::string read_file(const std::filesystem::path& path) {
    std::optional<std::string> bytes = io::read_file(path);
    if (!bytes) throw bpe_error("bpe: cannot open '" + path.string() + "'");
    return std::move(*bytes);
  }

  static void check_utf8(std::string_view text) {
    if (text.size() > std::size_t(INT32_MAX))
      throw bpe_error("bpe: text of " + std::to_string(text.size()) + " bytes; at most 2 GiB");
    utf8::require_valid(text, "bpe: text");
  }

  void check_id(id_type id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= bytes_.size())
      throw bpe_error("bpe: id " + std::to_string(id) + " is not in the vocabulary (0.." +
                      std::to_string(bytes_.size() - 1) + ")");
  }

  void encode_ordinary_into(std::string_view text, std::vector<id_type>& ids) const {
    gpt2_pretokenize(text, [&](std::string_view piece) { encode_piece(piece, ids); });
  }

  void encode_piece(std::string_view piece, std::vector<id_type>& ids) const {
    if (piece.size() == 1) {
      ids.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
      return;
    }
    const bool cached = cache_.caches(piece);
    if (cached && cache_.find(piece, ids)) return;
    const std::size_t first = ids.size();
    merge_piece(piece, ids);
    if (cached) cache_.insert(piece, std::span<const id_type>(ids).subspan(first));
  }

  // GPT-2's merge loop, each round in O(log n) per pair: a heap of neighbouring pairs ordered by
  // (rank, position), entries checked when taken (a symbol only grows, so a stale entry shows as
  // a changed symbol). A round takes every entry of the lowest rank and applies them left to
  // right, skipping those an earlier one of the round has consumed; the pairs a merge creates
  // wait for later rounds (none can have the round's rank: its result differs from both parts).
  void merge_piece(std::string_view piece, std::vector<id_type>& ids) const {
    const auto n = static_cast<std::int32_t>(piece.size());
    struct symbol {
      id_type id;
      std::int32_t prev, next;  // -1: none
    };
    std::vector<symbol> word(static_cast<std::size_t>(n));
    for (std::int32_t i = 0; i < n; ++i)
      word[static_cast<std::size_t>(i)] = {byte_id_[static_cast<unsigned char>(piece[i])], i - 1,
                                           i + 1 < n ? i + 1 : -1};
    struct candidate {
      id_type rank;
      std::int32_t pos;
      id_type left, right;
      bool operator>(const candidate& o) const {
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<candidate, std::vector<candidate>, std::greater<>> heap;
    const auto offer = [&](std::int32_t pos) {
      if (pos < 0) return;
      const symbol& s = word[static_cast<std::size_t>(pos)];
      if (s.next < 0) return;
      const id_type right = word[static_cast<std::size_t>(s.next)].id;
      const auto it = merges_.find(pair_key(s.id, right));
      if (it != merges_.end()) heap.push({it->second.rank, pos, s.id, right});
    };
    const auto current = [&](const candidate& c) {
      const symbol& s = word[static_cast<std::size_t>(c.pos)];
      return s.id == c.left && s.next >= 0 && word[static_cast<std::size_t>(s.next)].id == c.right;
    };
    for (std::int32_t i = 0; i + 1 < n; ++i) offer(i);

    std::vector<candidate> round;
    while (!heap.empty()) {
      const id_type rank = heap.top().rank;
      round.clear();
      while (!heap.empty() && heap.top().rank == rank) {
        if (current(heap.top())) round.push_back(heap.top());
        heap.pop();
      }
      for (const candidate& c : round) {
        if (!current(c)) continue;
        symbol& s = word[static_cast<std::size_t>(c.pos)];
        const symbol gone = word[static_cast<std::size_t>(s.next)];
        word[static_cast<std::size_t>(s.next)].id = -1;
        s.id = merges_.at(pair_key(c.left, c.right)).result;
        s.next = gone.next;
        if (gone.next >= 0) word[static_cast<std::size_t>(gone.next)].prev = c.pos;
        offer(s.prev);
        offer(c.pos);
      }
    }
    for (std::int32_t i = 0; i >= 0; i = word[static_cast<std::size_t>(i)].next)
      ids.push_back(word[static_cast<std::size_t>(i)].id);
  }

  void load_vocab(std::string_view text, std::string_view name,
                  const std::vector<std::string>& special_tokens) {
    using nlohmann::json;
    const std::string where(name);
    std::optional<std::string> repeated;
    std::unordered_map<std::string, int> keys;
    const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event,
                                                  json& parsed) {
      if (event == json::parse_event_t::key && depth == 1 && !repeated) {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (++keys[key] == 2) repeated = key;
      }
      return true;
    };
    json vocab;
    try {
      vocab = json::parse(text.begin(), text.end(), note_keys);
    } catch (const json::exception& e) {
      throw bpe_error(where + ": not valid JSON (" + e.what() + ")");
    }
    if (!vocab.is_object())
      throw bpe_error(where + ": expected a JSON object mapping tokens to ids, found " +
                      vocab.type_name());
    if (repeated) throw bpe_error(where + ": token '" + *repeated + "' appears twice");
    if (vocab.empty()) throw bpe_error(where + ": the vocabulary is empty");
    const std::size_t size = vocab.size();
    if (size > std::size_t(INT32_MAX)) throw bpe_error(where + ": too many tokens");

    for (const std::string& s : special_tokens)
      if (!vocab.contains(s))
        throw bpe_error(where + ": has no entry for the special token '" + s + "'");
    const auto is_special = [&](const std::string& t) {
      return std::find(special_tokens.begin(), special_tokens.end(), t) != special_tokens.end();
    };

    bytes_.assign(size, std::string());
    spellings_.assign(size, std::string());
    std::vector<bool> taken(size, false);
    id_of_.reserve(size);
    for (const auto& [token, value] : vocab.items()) {
      const std::string quoted = "'" + token + "'";
      if (!value.is_number_integer())
        throw bpe_error(where + ": the id of token " + quoted + " is not an integer (" +
                        value.dump() + ")");
      const auto id = value.get<std::int64_t>();
      if (id < 0 || static_cast<std::uint64_t>(id) >= size)
        throw bpe_error(where + ": token " + quoted + " has id " + std::to_string(id) +
                        "; the ids of " + std::to_string(size) + " tokens must be 0.." +
                        std::to_string(size - 1));
      const auto slot = static_cast<std::size_t>(id);
      if (taken[slot])
        throw bpe_error(where + ": id " + std::to_string(id) + " is given to two tokens, '" +
                        spellings_[slot] + "' and " + quoted);
      if (token.empty()) throw bpe_error(where + ": a token is the empty string");
      taken[slot] = true;
      spellings_[slot] = token;
      if (is_special(token)) {
        bytes_[slot] = token;
        specials_.add(token, static_cast<id_type>(id));
      } else {
        char32_t bad = 0;
        if (!byte_level::unspell(token, bytes_[slot], bad))
          throw bpe_error(where + ": token " + quoted + " (id " + std::to_string(id) + ") holds " +
                          code_point_name(bad) + ", which is not in GPT-2's byte-level alphabet");
      }
      id_of_.emplace(token, static_cast<id_type>(id));
    }
    for (unsigned b = 0; b < 256; ++b) {
      const std::string spelled = byte_level::spell(std::string(1, static_cast<char>(b)));
      const auto it = id_of_.find(spelled);
      if (it == id_of_.end())
        throw bpe_error(where + ": has no token for the byte " + hex_byte(b) + " ('" + spelled +
                        "')");
      byte_id_[b] = it->second;
    }
  }

  void load_merges(std::string_view text, std::string_view name) {
    const std::string where(name);
    std::unordered_map<std::uint64_t, std::size_t> line_of;
    std::size_t line_no = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t eol = text.find('\n', pos);
      if (eol == std::string_view::npos) eol = text.size();
      std::string_view line = text.substr(pos, eol - pos);
      pos = eol + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line_no == 1 && line.starts_with("#version")) continue;
      const std::string at = where + " line " + std::to_string(line_no) + ": ";
      const std::size_t space = line.find(' ');
      if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
          line.find(' ', space + 1) != std::string_view::npos)
        throw bpe_error(at + "expected two tokens separated by one space, found '" +
                        std::string(line) + "'");
      const std::string a(line.substr(0, space)), b(line.substr(space + 1));
      const id_type ia = known(a, at), ib = known(b, at);
      const auto merged = id_of_.find(a + b);
      if (merged == id_of_.end())
        throw bpe_error(at + "the merged token '" + a + b + "' is not in the vocabulary");
      const auto [it, fresh] = line_of.emplace(pair_key(ia, ib), line_no);
      if (!fresh)
        throw bpe_error(at + "repeats the merge '" + a + " " + b + "' of line " +
                        std::to_string(it->second));
      merges_.emplace(pair_key(ia, ib),
                      merge{static_cast<id_type>(merges_.size()), merged->second});
    }
  }

  id_type known(const std::string& token, const std::string& at) const {
    const auto it = id_of_.find(token);
    if (it == id_of_.end()) throw bpe_error(at + "'" + token + "' is not in the vocabulary");
    return it->second;
  }

  static std::string hex_byte(unsigned b) {
    constexpr char digits[] = "0123456789ABCDEF";
    return std::string("0x") + digits[b >> 4] + digits[b & 15];
  }
  static std::string code_point_name(char32_t cp) {
    constexpr char digits[] = "0123456789ABCDEF";
    std::string hex;
    for (int shift = 20; shift >= 0; shift -= 4) hex += digits[(cp >> shift) & 15];
    hex.erase(0, std::min(hex.find_first_not_of('0'), hex.size() - 4));
    return "U+" + hex;
  }

  std::vector<std::string> bytes_;      // id -> the bytes it stands for
  std::vector<std::string> spellings_;  // id -> vocab.json's string
  std::unordered_map<std::string, id_type> id_of_;
  special_tokens<char> specials_;
  std::array<id_type, 256> byte_id_{};
  std::unordered_map<std::uint64_t, merge> merges_;
  piece_cache cache_;
};

// Decoding one id at a time for streamed output: push() returns the bytes that end in a whole
// character, keeping a character a token cut short until the next token completes it; finish()
// returns what is left. With `replace` (the default) every write is well-formed UTF-8 (ill-formed
// bytes become U+FFFD, as utf8::replace_invalid does for the whole output); with `keep` the writes
// concatenate to bpe_tokenizer::decode of the ids.
class bpe_stream_decoder {
 public:
  enum class invalid_bytes : std::uint8_t { replace, keep };

  explicit bpe_stream_decoder(const bpe_tokenizer& tokenizer,
                              invalid_bytes mode = invalid_bytes::replace)
      : tokenizer_(&tokenizer), mode_(mode) {}

  std::string push(bpe_tokenizer::id_type id) {
    pending_ += tokenizer_->token_bytes(id);
    const std::size_t n = utf8::complete_prefix(pending_);
    std::string out = emit(std::string_view(pending_).substr(0, n));
    pending_.erase(0, n);
    return out;
  }

  std::string finish() {
    std::string out = emit(pending_);
    pending_.clear();
    return out;
  }

  // Bytes held back: the start of a character that no token has finished yet.
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string emit(std::string_view bytes) const {
    return mode_ == invalid_bytes::replace ? utf8::replace_invalid(bytes) : std::string(bytes);
  }

  const bpe_tokenizer* tokenizer_;
  invalid_bytes mode_;
  std::string pending_;
};

}  // namespace fusedsl::text
