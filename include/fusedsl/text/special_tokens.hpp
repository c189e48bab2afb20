#pragma once
// Special tokens written in the text ("[CLS]", "<|endoftext|>": Hugging Face's special added
// tokens), which a tokenizer splits out before anything else: the leftmost match first and, of
// those that start there, the longest. Over bytes (the BPE) or code points (WordPiece).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fusedsl::text {

template <class Char>
class special_tokens {
 public:
  using string_type = std::basic_string<Char>;
  using view_type = std::basic_string_view<Char>;

  struct token {
    string_type text;
    std::int32_t id;
  };
  struct match {
    std::size_t at;      // where it starts; the text's size when there is none
    std::size_t length;  // 0 when there is none
    std::optional<std::int32_t> id;
  };

  void add(string_type text, std::int32_t id) {
    // Kept longest first, so that the first one matching at a position is the longest there.
    const auto at = std::find_if(tokens_.begin(), tokens_.end(),
                                 [&](const token& t) { return t.text.size() < text.size(); });
    tokens_.insert(at, token{std::move(text), id});
  }

  // The first special token at or after `pos`.
  match find(view_type text, std::size_t pos) const {
    if (!tokens_.empty())
      for (std::size_t i = pos; i < text.size(); ++i)
        for (const token& t : tokens_)
          if (text.substr(i).starts_with(t.text)) return {i, t.text.size(), t.id};
    return {text.size(), 0, std::nullopt};
  }

  std::optional<std::int32_t> id_of(view_type text) const {
    for (const token& t : tokens_)
      if (t.text == text) return t.id;
    return std::nullopt;
  }
  std::span<const token> tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<token> tokens_;  // longest first
};

}  // namespace fusedsl::text
