// BERT's normaliser and word splitter, each step on its own, with Hugging Face tokenizers' output
// for the same input as the expectation.
#include "fusedsl/text/bert_normalizer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace fusedsl::text;

namespace {

std::string norm(const std::string& s, bert_normalizer_options o = {}) {
  return utf8::encode(bert_normalize(utf8::decode(s), o));
}

std::vector<std::string> words(const std::string& s, bert_normalizer_options o = {}) {
  const std::u32string n = bert_normalize(utf8::decode(s), o);
  std::vector<std::string> out;
  for (std::u32string_view w : bert_pre_tokenize(n)) out.push_back(utf8::encode(w));
  return out;
}

using strings = std::vector<std::string>;

}  // namespace

TEST_CASE("clean_text drops controls, NUL and U+FFFD and turns whitespace into spaces") {
  CHECK(norm(std::string("a\0b", 3)) == "ab");
  CHECK(norm("a\x07\x1b\x7f"
             "b") == "ab");
  CHECK(norm("a\xc2\x85"
             "b\x0b"
             "c\x0c"
             "d") == "abcd");                               // NEL, VT, FF are Cc: dropped
  CHECK(norm("a\u200bb\u00adc\ufeffd\u2060e") == "abcde");  // Cf
  CHECK(norm("a\ue000b") == "ab");                          // Co
  CHECK(norm("a\ufffdb") == "ab");
  CHECK(norm("a\tb\nc\rd\u00a0e\u3000f\u2028g") == "a b c d e f g");
  CHECK(norm("a\u0378b") == "a\u0378b");  // unassigned code points stay
}

TEST_CASE("tokenizers' older Unicode tables decide the characters they disagree with utf8proc on") {
  CHECK(norm("a\u08e2b") == "a\u08e2b");            // Cf since Unicode 9, not a control to them
  CHECK(norm("a\u1ac1b") == "a\u1ac1b");            // an Mn of Unicode 14: not stripped
  CHECK(words("a\u2e52b") == strings{"a\u2e52b"});  // a Po of Unicode 13: not punctuation
  CHECK(words("a\u166db") == strings{"a", "\u166d", "b"});  // once Po, now So: still split
  CHECK(norm("\u1c89") == "\u1c8a");                        // a Unicode 16 case pair
}

TEST_CASE("CJK ideographs get spaces around them, other scripts do not") {
  CHECK(norm("\u4e2d\u6587ab") == " \u4e2d  \u6587 ab");
  CHECK(words("\u4e2d\u6587ab") == strings{"\u4e2d", "\u6587", "ab"});
  CHECK(words("\u3053\u3093\u306b\u3061\u306f") == strings{"\u3053\u3093\u306b\u3061\u306f"});
  CHECK(words("\U0002b820\U0002b920") == strings{"\U0002b820", "\U0002b920"});
  CHECK(norm("\U0002b820") == "\U0002b820");  // tokenizers' Extension E range starts at U+2B920
}

TEST_CASE("accents are stripped by NFD and dropping nonspacing marks, then text is lowercased") {
  CHECK(norm("Caf\u00e9 \u00c0 NA\u00cfVE") == "cafe a naive");
  CHECK(norm("e\u0301") == "e");
  CHECK(norm("\u1f80") == "\u03b1");                          // alpha with psili and ypogegrammeni
  CHECK(norm("\u0130stanbul") == "istanbul");                 // I + dot above, the dot is a mark
  CHECK(norm("\u03a3\u03c3\u03c2") == "\u03c3\u03c3\u03c2");  // no final-sigma rule
  CHECK(norm("\ud55c") == "\u1112\u1161\u11ab");              // Hangul syllables decompose to jamo
  CHECK(norm("\u00df\u1e9e") == "\u00df\u00df");
  CHECK(norm("\ufb01") == "\ufb01");  // compatibility forms are not decomposed
}

TEST_CASE("strip_accents follows lowercase unless set, and each step can be turned off") {
  bert_normalizer_options cased;
  cased.lowercase = false;
  CHECK(norm("Caf\u00e9", cased) == "Caf\u00e9");
  bert_normalizer_options strip_only = cased;
  strip_only.strip_accents = true;
  CHECK(norm("Caf\u00e9", strip_only) == "Cafe");
  bert_normalizer_options lower_only;
  lower_only.strip_accents = false;
  CHECK(norm("CAF\u00c9 \u0130", lower_only) == "caf\u00e9 i\u0307");  // full lowercase of U+0130
  bert_normalizer_options raw;
  raw.clean_text = raw.handle_chinese_chars = raw.lowercase = false;
  CHECK(norm("A\x07\u4e2d", raw) == "A\x07\u4e2d");
}

TEST_CASE("words split at whitespace and around every punctuation character") {
  CHECK(words("Hello, world!") == strings{"hello", ",", "world", "!"});
  CHECK(words("a$b+c<d=e>f^g`h|i~j") == strings{"a", "$", "b", "+", "c", "<", "d", "=", "e", ">",
                                                "f", "^", "g", "`", "h", "|", "i", "~", "j"});
  CHECK(words("don't \u00bfqu\u00e9?") == strings{"don", "'", "t", "\u00bf", "que", "?"});
  CHECK(words("\u00a9\u00b1") == strings{"\u00a9\u00b1"});  // S* outside ASCII are not split
  CHECK(words("x\u2014y\u3002z") == strings{"x", "\u2014", "y", "\u3002", "z"});
}

TEST_CASE("CRLF, CR, empty and whitespace-only text") {
  CHECK(words("one\r\ntwo\rthree\nfour") == strings{"one", "two", "three", "four"});
  CHECK(words("").empty());
  CHECK(words(" \t\r\n\u3000\u00a0\u2029").empty());
  CHECK(words("\u200b\ufeff\u00ad").empty());
}

TEST_CASE("the linked utf8proc has the Unicode version bert_unicode_table.hpp was made against") {
  // Another version moves the code points where tokenizers and utf8proc disagree: regenerate the
  // table with scripts/make_bert_unicode_table.py.
  CHECK(std::string_view(utf8proc_unicode_version()) == bert_table::utf8proc_unicode_version);
}
