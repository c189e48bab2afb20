// Prints, for every Unicode scalar value c, the words and the ids fusedsl's tokenizer makes of the
// text "a" c "b": one line per code point, "HEX<TAB>words joined by U+001F<TAB>ids joined by ' '",
// for compare_with_tokenizers.py to hold against Hugging Face tokenizers.
//
//   codepoint_words MODEL_DIR
#include <cstdio>
#include <iostream>
#include <string>

#include "fusedsl/text/wordpiece_files.hpp"

int main(int argc, char** argv) {
  using namespace fusedsl::text;
  if (argc != 2) {
    std::fprintf(stderr, "usage: codepoint_words MODEL_DIR\n");
    return 2;
  }
  const wordpiece_tokenizer t = load_wordpiece_tokenizer(argv[1]);
  std::string line;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const std::u32string text = std::u32string(U"a") + c + U"b";
    const std::u32string normal = bert_normalize(text, t.config().normalizer);
    char hex[16];
    std::snprintf(hex, sizeof hex, "%X\t", static_cast<unsigned>(c));
    line = hex;
    bool first = true;
    for (std::u32string_view w : bert_pre_tokenize(normal)) {
      if (!first) line += '\x1f';
      line += utf8::encode(w);
      first = false;
    }
    line += '\t';
    first = true;
    for (std::int32_t id : t.token_ids(utf8::encode(text))) {
      if (!first) line += ' ';
      line += std::to_string(id);
      first = false;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  return 0;
}
