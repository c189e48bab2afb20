// libFuzzer target for bpe_tokenizer's loader and merge loop on vocabularies the input makes.
// Odd first byte: the rest is "vocab.json NUL merges.txt NUL text", loaded as it is: either a
// bpe_error or a tokenizer that encodes the text as GPT-2's literal merge loop does. Even: the
// input builds up to 32 merges over a small alphabet (in an order the input may scramble, so that
// a merge can use a token a later merge makes), then encodes text over that alphabet; the ids
// must equal the literal loop's, with and without the piece cache, and decode back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusedsl/text/bpe.hpp"
#include "gpt2_bpe_loop.hpp"

using namespace fusedsl::text;
using id_type = bpe_tokenizer::id_type;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

void check_against_literal(const bpe_tokenizer& t, const fuzz::merge_ranks& ranks,
                           std::string_view text) {
  std::vector<id_type> want;
  gpt2_pretokenize(text, [&](std::string_view piece) {
    for (const std::string& symbol : fuzz::gpt2_bpe(piece, ranks)) {
      const auto id = t.find_token(symbol);
      require(id.has_value());
      want.push_back(*id);
    }
  });
  const std::vector<id_type> got = t.encode_ordinary(text);
  require(got == want);
  require(t.decode(got) == text);
}

bpe_options plain(std::size_t cache_entries) {
  bpe_options o;
  o.special_tokens.clear();
  o.cache_entries = cache_entries;
  return o;
}

int raw(std::string_view input) {
  const std::size_t a = input.find('\0');
  if (a == std::string_view::npos) return 0;
  const std::size_t b = input.find('\0', a + 1);
  const std::string_view vocab = input.substr(0, a);
  const std::string_view merges = input.substr(a + 1, b == std::string_view::npos ? b : b - a - 1);
  const std::string_view text = b == std::string_view::npos ? "" : input.substr(b + 1);
  try {
    const bpe_tokenizer t(vocab, merges, plain(4));
    if (utf8::is_valid(text)) check_against_literal(t, fuzz::ranks_of(merges), text);
  } catch (const bpe_error&) {
  }
  return 0;
}

int built(std::string_view input) {
  std::size_t pos = 0;
  const auto next = [&]() -> unsigned {
    return pos < input.size() ? static_cast<unsigned char>(input[pos++]) : 0;
  };
  const std::string alphabet = "abcd ";
  std::vector<std::string> tokens;  // spelled; the byte tokens the merges start from
  for (const char c : alphabet) tokens.push_back(byte_level::spell(std::string(1, c)));
  std::vector<std::pair<std::string, std::string>> merges;
  std::set<std::pair<std::string, std::string>> seen;
  std::set<std::string> made(tokens.begin(), tokens.end());
  const unsigned count = next() % 33;
  for (unsigned i = 0; i < count; ++i) {
    const std::string& l = tokens[next() % tokens.size()];
    const std::string& r = tokens[next() % tokens.size()];
    if (!seen.emplace(l, r).second) continue;
    merges.emplace_back(l, r);
    if (made.insert(l + r).second) tokens.push_back(l + r);
  }
  // Swaps chosen by the input: ranks out of creation order.
  const unsigned swaps = merges.empty() ? 0 : next() % 8;
  for (unsigned i = 0; i < swaps; ++i)
    std::swap(merges[next() % merges.size()], merges[next() % merges.size()]);

  nlohmann::json vocab = nlohmann::json::object();
  for (unsigned b = 0; b < 256; ++b) vocab[byte_level::spell(std::string(1, char(b)))] = b;
  int id = 256;
  for (const std::string& t : tokens)
    if (!vocab.contains(t)) vocab[t] = id++;
  std::string merges_txt = "#version: 0.2\n";
  for (const auto& [l, r] : merges) merges_txt += l + " " + r + "\n";

  std::string text;
  while (pos < input.size()) text += alphabet[next() % alphabet.size()];
  const bpe_tokenizer cached(vocab.dump(), merges_txt, plain(3));
  const bpe_tokenizer uncached(vocab.dump(), merges_txt, plain(0));
  const fuzz::merge_ranks ranks = fuzz::ranks_of(merges_txt);
  check_against_literal(cached, ranks, text);
  check_against_literal(cached, ranks, text);  // again, from the cache
  require(uncached.encode_ordinary(text) == cached.encode_ordinary(text));
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  return (data[0] & 1) != 0 ? raw(rest) : built(rest);
}
