// libFuzzer target for bpe_tokenizer under GPT-2's vocabulary ($FUSEDSL_GPT2_VOCAB_DIR, else the
// committed 512-id cut of it). The input as text: rejected with utf8_error exactly when it is not
// UTF-8, else its ids decode back to it, match GPT-2's literal merge loop piece by piece, and are
// the same with and without the piece cache. The input as ids (two bytes each): their stream
// decoding concatenates to decode() and never splits a character.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../common/test_paths.hpp"
#include "../text/utf8_writes.hpp"
#include "fusedsl/text/bpe.hpp"
#include "gpt2_bpe_loop.hpp"

using namespace fusedsl::text;
using id_type = bpe_tokenizer::id_type;
using fusedsl::text::testing::splits_a_character;

namespace {

std::unique_ptr<bpe_tokenizer> cached, uncached;
fuzz::merge_ranks ranks;

void require(bool ok) {
  if (!ok) std::abort();
}

std::vector<id_type> literal_ordinary(std::string_view text) {
  std::vector<id_type> ids;
  gpt2_pretokenize(text, [&](std::string_view piece) {
    for (const std::string& symbol : fuzz::gpt2_bpe(piece, ranks)) {
      const auto id = cached->find_token(symbol);
      require(id.has_value());
      ids.push_back(*id);
    }
  });
  return ids;
}

std::vector<id_type> literal(std::string_view text) {
  const auto eot = cached->end_of_text();
  if (!eot) return literal_ordinary(text);
  std::vector<id_type> ids;
  constexpr std::string_view mark = "<|endoftext|>";
  for (std::size_t pos = 0;;) {
    const std::size_t at = text.find(mark, pos);
    const auto part =
        literal_ordinary(text.substr(pos, at == std::string_view::npos ? at : at - pos));
    ids.insert(ids.end(), part.begin(), part.end());
    if (at == std::string_view::npos) return ids;
    ids.push_back(*eot);
    pos = at + mark.size();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("FUSEDSL_GPT2_VOCAB_DIR");
  const std::filesystem::path dir =
      env != nullptr && *env != '\0' ? env : fusedsl::test::test_path(FUSEDSL_GPT2_512_DIR);
  bpe_options options;
  {
    std::ifstream in(dir / "vocab.json");
    const std::string vocab((std::istreambuf_iterator<char>(in)), {});
    if (vocab.find("\"<|endoftext|>\"") == std::string::npos) options.special_tokens.clear();
  }
  cached = std::make_unique<bpe_tokenizer>(bpe_tokenizer::from_directory(dir, options));
  options.cache_entries = 0;
  uncached = std::make_unique<bpe_tokenizer>(bpe_tokenizer::from_directory(dir, options));
  std::ifstream in(dir / "merges.txt");
  ranks = fuzz::ranks_of(std::string((std::istreambuf_iterator<char>(in)), {}));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = utf8::is_valid(text);
  try {
    const std::vector<id_type> ids = cached->encode(text);
    require(valid);
    require(cached->decode(ids) == text);
    require(uncached->encode(text) == ids);
    require(ids == literal(text));
    const std::vector<id_type> ordinary = cached->encode_ordinary(text);
    require(cached->decode(ordinary) == text);
    require(ordinary == literal_ordinary(text));
  } catch (const utf8_error&) {
    require(!valid);
  }

  std::vector<id_type> ids;
  for (std::size_t i = 0; i + 1 < size; i += 2)
    ids.push_back(static_cast<id_type>((data[i] | (data[i + 1] << 8)) % cached->vocab_size()));
  const std::string full = cached->decode(ids);
  for (const auto mode :
       {bpe_stream_decoder::invalid_bytes::keep, bpe_stream_decoder::invalid_bytes::replace}) {
    bpe_stream_decoder d(*cached, mode);
    std::vector<std::string> writes;
    for (const id_type id : ids) writes.push_back(d.push(id));
    writes.push_back(d.finish());
    require(!splits_a_character(writes));
    std::string all;
    for (const std::string& w : writes) {
      if (mode == bpe_stream_decoder::invalid_bytes::replace) require(utf8::is_valid(w));
      all += w;
    }
    require(all ==
            (mode == bpe_stream_decoder::invalid_bytes::keep ? full : utf8::replace_invalid(full)));
  }
  return 0;
}
