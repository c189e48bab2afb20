#pragma once
// A WordPiece vocabulary: vocab.txt, one token per line, its id the line's index (from 0). As in
// Hugging Face's load_vocab (Python's universal newlines), a line ends at "\n", "\r\n" or "\r",
// and only that ending is removed; a token given twice keeps the id of its last line.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fusedsl/io/read_file.hpp"
#include "fusedsl/text/error.hpp"

namespace fusedsl::text {

class vocabulary {
 public:
  vocabulary() = default;
  explicit vocabulary(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
    ids_.reserve(tokens_.size());
    for (std::size_t i = 0; i < tokens_.size(); ++i)
      ids_.insert_or_assign(tokens_[i], static_cast<std::int32_t>(i));
  }

  static vocabulary from_text(std::string_view text) {
    std::vector<std::string> tokens;
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t nl = text.find_first_of("\r\n", start);
      const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
      tokens.emplace_back(text.substr(start, end - start));
      start = end + (text.substr(end, 2) == "\r\n" ? 2 : 1);
    }
    return vocabulary(std::move(tokens));
  }

  static vocabulary from_file(const std::filesystem::path& path) {
    const std::optional<std::string> text = io::read_file(path);
    if (!text) throw text_error("vocabulary: cannot open '" + path.string() + "'");
    vocabulary v = from_text(*text);
    if (v.size() == 0) throw text_error("vocabulary: '" + path.string() + "' has no tokens");
    return v;
  }

  std::size_t size() const { return tokens_.size(); }
  std::optional<std::int32_t> find(std::string_view token) const {
    const auto it = ids_.find(token);
    return it == ids_.end() ? std::nullopt : std::optional<std::int32_t>(it->second);
  }
  bool contains(std::string_view token) const { return ids_.find(token) != ids_.end(); }
  const std::string& token(std::int32_t id) const {
    return tokens_.at(static_cast<std::size_t>(id));
  }
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  struct hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int32_t, hash, std::equal_to<>> ids_;
};

}  // namespace fusedsl::text
