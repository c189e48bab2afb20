// WordPiece over a small vocabulary: greedy longest match, "##" continuations, [UNK] for words
// that cannot be covered or are too long, special tokens in the text, [CLS]/[SEP], truncation
// with one warning per call, padding and the batch layout.
#include "fusedsl/text/wordpiece.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace fusedsl::text;

namespace {

// ids: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 un=5 ##aff=6 ##able=7 aff=8 ##a=9 a=10
//      want=11 ##ed=12 ,=13 !=14 hello=15 world=16 un##=... see the list
const std::vector<std::string> tokens = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un",    "##aff", "##able", "aff", "##a",
    "a",     "want",  "##ed",  ",",     "!",      "hello", "world", "##b",    "b"};

wordpiece_tokenizer make(std::size_t max_length = 512, std::size_t max_chars = 100) {
  wordpiece_config c;
  c.max_length = max_length;
  c.max_input_chars_per_word = max_chars;
  return wordpiece_tokenizer(vocabulary(tokens), c);
}

using ids = std::vector<std::int32_t>;
using strings = std::vector<std::string>;

const warning_sink quiet = [](const std::string&) {};

}  // namespace

TEST_CASE("words are split greedily, longest match first, with ## continuations") {
  const wordpiece_tokenizer t = make();
  CHECK(t.tokenize("unaffable") == strings{"un", "##aff", "##able"});
  CHECK(t.tokenize("wanted") == strings{"want", "##ed"});
  CHECK(t.tokenize("aaa") == strings{"a", "##a", "##a"});
  CHECK(t.tokenize("Hello, WORLD!") == strings{"hello", ",", "world", "!"});
  CHECK(t.tokenize("ab ba") == strings{"a", "##b", "b", "##a"});
}

TEST_CASE("a word with a piece the vocabulary lacks is one [UNK], not a partial match") {
  const wordpiece_tokenizer t = make();
  CHECK(t.tokenize("unwanted") == strings{"[UNK]"});  // un + ##want is missing
  CHECK(t.tokenize("hello xyz world") == strings{"hello", "[UNK]", "world"});
}

TEST_CASE("a word longer than max_input_chars_per_word code points is [UNK]") {
  const wordpiece_tokenizer t = make(512, 4);
  CHECK(t.tokenize("aaaa") == strings{"a", "##a", "##a", "##a"});
  CHECK(t.tokenize("aaaaa") == strings{"[UNK]"});
  CHECK(t.tokenize("\u00e1\u00e1\u00e1\u00e1") ==
        strings{"a", "##a", "##a", "##a"});  // counted after normalising
}

TEST_CASE("special tokens in the text are matched as written and split words") {
  const wordpiece_tokenizer t = make();
  CHECK(t.encode("hello [MASK] world").ids == ids{2, 15, 4, 16, 3});
  CHECK(t.encode("a[SEP]b").ids == ids{2, 10, 3, 18, 3});  // "b" starts a word: no ##
  CHECK(t.encode("[mask]").ids == ids{2, 1, 1, 1, 3});     // lowercase: [ mask ] as text
  CHECK(t.encode("[[CLS]]").ids == ids{2, 1, 2, 1, 3});
  CHECK(t.encode("[CLS][CLS]").ids == ids{2, 2, 2, 3});
}

TEST_CASE("empty, whitespace-only and all-dropped text gives [CLS] [SEP]") {
  const wordpiece_tokenizer t = make();
  for (const char* s : {"", " ", "\t\r\n", "\u3000\u00a0", "\u200b\x7f", "\xff\xfe"}) {
    CAPTURE(s);
    CHECK(t.encode(s).ids == ids{2, 3});
    CHECK_FALSE(t.encode(s).truncated);
  }
}

TEST_CASE("a leading byte order mark is dropped and CRLF / CR separate words") {
  const wordpiece_tokenizer t = make();
  CHECK(t.encode("\ufeffhello").ids == ids{2, 15, 3});
  CHECK(t.encode("\ufeff[CLS]").ids == ids{2, 2, 3});
  CHECK(t.tokenize("hello\r\nworld\rhello") == strings{"hello", "world", "hello"});
}

TEST_CASE("invalid UTF-8 becomes U+FFFD, which clean_text drops without splitting the word") {
  const wordpiece_tokenizer t = make();
  CHECK(t.tokenize("hel\xfflo") == strings{"hello"});
  CHECK(t.tokenize("\xc3,hello") == strings{",", "hello"});  // C3 is lost, ',' is not
  CHECK(t.tokenize("a\xed\xa0\x80"
                   "b") == strings{"a", "##b"});
}

TEST_CASE("truncation keeps the first max_length - 2 pieces and warns once per call") {
  const wordpiece_tokenizer t = make(5);
  std::vector<std::string> warnings;
  const warning_sink sink = [&](const std::string& w) { warnings.push_back(w); };
  const encoding e = t.encode("hello world hello world", sink);
  CHECK(e.ids == ids{2, 15, 16, 15, 3});
  CHECK(e.truncated);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "wordpiece: 1 of 1 text(s) longer than 5 tokens were truncated to that length");
  const encoding fits = t.encode("hello world hello", sink);
  CHECK(fits.ids == ids{2, 15, 16, 15, 3});
  CHECK_FALSE(fits.truncated);
  CHECK(warnings.size() == 1);
  // A special token counts as one piece; so does an [UNK].
  CHECK(t.encode("[MASK] xyz [MASK] hello", quiet).ids == ids{2, 4, 1, 4, 3});

  const std::vector<std::string> texts = {"hello world hello world", "a", "aaaaaa"};
  warnings.clear();
  const token_batch b = t.encode_batch(texts, sink);
  CHECK(b.truncated == 2);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "wordpiece: 2 of 3 text(s) longer than 5 tokens were truncated to that length");
}

TEST_CASE("max_length 0 turns truncation off") {
  const wordpiece_tokenizer t = make(0);
  CHECK(t.encode("hello world hello world hello").ids.size() == 7);
}

TEST_CASE("a batch is padded with [PAD] to its longest row, with mask and lengths") {
  const wordpiece_tokenizer t = make();
  const std::vector<std::string> texts = {"hello world", "", "unaffable !"};
  const token_batch b = t.encode_batch(texts, quiet);
  CHECK(b.rows == 3);
  CHECK(b.columns == 6);
  CHECK(b.ids == ids{2, 15, 16, 3, 0, 0,  //
                     2, 3, 0, 0, 0, 0,    //
                     2, 5, 6, 7, 14, 3});
  CHECK(b.attention_mask == ids{1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  CHECK(b.lengths == ids{4, 2, 6});
  CHECK(b.truncated == 0);
  const token_batch wide = t.encode_batch(texts, quiet, 8);
  CHECK(wide.columns == 8);
  CHECK(wide.ids[8] == 2);
  CHECK(wide.ids[7] == t.pad_id());
  const token_batch none = t.encode_batch(std::vector<std::string>{}, quiet);
  CHECK(none.rows == 0);
  CHECK(none.ids.empty());
}

TEST_CASE("the tokenizer refuses a vocabulary without its special tokens") {
  wordpiece_config c;
  CHECK_THROWS_WITH_AS(wordpiece_tokenizer(vocabulary({"[UNK]", "[CLS]", "[SEP]", "a"}), c),
                       "wordpiece: the padding token '[PAD]' is not in the vocabulary", text_error);
  c.max_length = 1;
  CHECK_THROWS_WITH_AS(wordpiece_tokenizer(vocabulary(tokens), c),
                       doctest::Contains("leaves no room for [CLS] and [SEP]"), text_error);
}

TEST_CASE("vocab.txt lines end at \\n, \\r\\n or \\r; a repeated token keeps its last id") {
  const vocabulary v = vocabulary::from_text("a\nb\r\nc\rd\n\ne\na\n");
  CHECK(v.size() == 7);
  CHECK(v.tokens() == strings{"a", "b", "c", "d", "", "e", "a"});
  CHECK(v.find("a") == 6);
  CHECK(v.find("c") == 2);
  CHECK_FALSE(v.find("f").has_value());
  CHECK_THROWS_AS(vocabulary::from_file("/nonexistent/vocab.txt"), text_error);
}
