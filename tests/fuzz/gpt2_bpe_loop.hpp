#pragma once
// GPT-2's merge loop as OpenAI's encoder.py writes it, over strings: while some neighbouring pair
// is a merge, take the pair of lowest rank and join every occurrence, left to right. Quadratic;
// the fuzzers compare bpe_tokenizer's heap-based loop with it.
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusedsl/text/byte_level.hpp"

namespace fuzz {

using merge_ranks = std::map<std::pair<std::string, std::string>, std::size_t>;

// merges.txt's text -> ranks (lines after an optional "#version" line, "a b" each, a CR at
// the end dropped).
inline merge_ranks ranks_of(std::string_view merges_txt) {
  merge_ranks ranks;
  std::size_t line_no = 0, pos = 0;
  while (pos < merges_txt.size()) {
    std::size_t eol = merges_txt.find('\n', pos);
    if (eol == std::string_view::npos) eol = merges_txt.size();
    std::string_view line = merges_txt.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no++ == 0 && line.starts_with("#version")) continue;
    const std::size_t space = line.find(' ');
    ranks.emplace(
        std::make_pair(std::string(line.substr(0, space)), std::string(line.substr(space + 1))),
        ranks.size());
  }
  return ranks;
}

// The spelled symbols GPT-2's loop leaves of one piece (bytes).
inline std::vector<std::string> gpt2_bpe(std::string_view piece, const merge_ranks& ranks) {
  std::vector<std::string> word;
  for (const char c : piece) word.push_back(fusedsl::text::byte_level::spell(std::string(1, c)));
  while (word.size() > 1) {
    const std::pair<std::string, std::string>* best = nullptr;
    std::size_t best_rank = 0;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = ranks.find({word[i], word[i + 1]});
      if (it != ranks.end() && (best == nullptr || it->second < best_rank)) {
        best = &it->first;
        best_rank = it->second;
      }
    }
    if (best == nullptr) break;
    const std::pair<std::string, std::string> pair = *best;
    std::vector<std::string> next;
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == pair.first && word[i + 1] == pair.second) {
        next.push_back(pair.first + pair.second);
        i += 2;
      } else {
        next.push_back(word[i]);
        i += 1;
      }
    }
    word = std::move(next);
  }
  return word;
}

}  // namespace fuzz
