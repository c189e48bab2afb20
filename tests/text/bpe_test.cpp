// Byte-level BPE parts on their own: UTF-8 scanning and replacement, GPT-2's byte alphabet, its
// pre-tokenisation regex, the merge loop on hand-made vocabularies, the per-piece cache, the
// stream decoder, and one clear error for each kind of malformed vocab.json / merges.txt.
#include "fusedsl/text/bpe.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

using namespace fusedsl::text;
using ids = std::vector<bpe_tokenizer::id_type>;

namespace {

// A vocabulary of the 256 byte tokens (id = byte value) plus `extra` tokens and `merges`.
std::string byte_vocab(const std::vector<std::string>& extra) {
  nlohmann::json v = nlohmann::json::object();
  for (unsigned b = 0; b < 256; ++b) v[byte_level::spell(std::string(1, static_cast<char>(b)))] = b;
  int next = 256;
  for (const std::string& t : extra) v[t] = next++;
  return v.dump();
}

std::string merges_of(const std::vector<std::string>& lines) {
  std::string s = "#version: 0.2\n";
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

bpe_options no_specials() {
  bpe_options o;
  o.special_tokens.clear();
  return o;
}

std::string error_of(std::string_view vocab, std::string_view merges, bpe_options o = {}) {
  try {
    bpe_tokenizer t(vocab, merges, std::move(o));
  } catch (const bpe_error& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("utf8::scan accepts exactly the well-formed sequences of Unicode's table 3-7") {
  CHECK(utf8::is_valid(""));
  CHECK(
      utf8::is_valid("a\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xF0\x90\x80\x80"
                     "\xF4\x8F\xBF\xBF"));
  for (const std::string_view bad :
       {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xF0\x8F\xBF\xBF",
        "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xC2", "\xE2\x82"})
    CHECK_FALSE(utf8::is_valid(bad));
  const utf8::scan_result euro = utf8::scan("\xE2\x82\xAC", 0);
  CHECK(euro.state == utf8::status::ok);
  CHECK(euro.length == 3);
  CHECK(euro.code_point == U'\u20AC');
  CHECK(utf8::scan("\xE2\x82", 0).state == utf8::status::truncated);
  CHECK(utf8::scan("\xE2\x82x", 0).state == utf8::status::ill_formed);
  CHECK(utf8::scan("\xE2\x82x", 0).length == 2);
}

TEST_CASE("utf8::replace_invalid puts one U+FFFD per maximal subpart, as Python's 'replace' does") {
  // Unicode 15, section 3.9, table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD
  // FFFD b FFFD c FFFD FFFD d.
  const std::string r =
      utf8::replace_invalid("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64");
  const std::string f = utf8::encode(U"\uFFFD");
  CHECK(r == "a" + f + f + f + "b" + f + "c" + f + f + "d");
  CHECK(utf8::replace_invalid("\xF0\x80\x80") == f + f + f);  // F0 80: no valid second byte
  CHECK(utf8::replace_invalid("x\xE2\x82") == "x" + f);       // a truncated end is one subpart
  CHECK(utf8::replace_invalid("ok \xC3\xA9") == "ok \xC3\xA9");
}

TEST_CASE("utf8::complete_prefix stops before a character the input cuts short, never elsewhere") {
  CHECK(utf8::complete_prefix("abc") == 3);
  CHECK(utf8::complete_prefix("ab\xF0\x9F\x98") == 2);
  CHECK(utf8::complete_prefix("ab\xF0\x9F\x98\x80") == 6);
  CHECK(utf8::complete_prefix("\x80\x80") == 2);       // ill-formed bytes can't be completed
  CHECK(utf8::complete_prefix("\xE2\x82x\xE2") == 3);  // E2 82 before 'x' is ill-formed
}

TEST_CASE("byte_level maps the 256 bytes one to one onto GPT-2's alphabet") {
  std::set<char16_t> seen(byte_level::code_point_of_byte.begin(),
                          byte_level::code_point_of_byte.end());
  CHECK(seen.size() == 256);
  CHECK(byte_level::code_point_of_byte[' '] == u'\u0120');   // 'Ġ'
  CHECK(byte_level::code_point_of_byte['\n'] == u'\u010A');  // 'Ċ'
  CHECK(byte_level::code_point_of_byte[0] == u'\u0100');
  CHECK(byte_level::code_point_of_byte[0xAD] == u'\u0143');  // the last of the 68 moved bytes
  CHECK(byte_level::code_point_of_byte['A'] == u'A');
  CHECK(byte_level::code_point_of_byte[0xFF] == u'\u00FF');
  std::string all;
  for (unsigned b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string back;
  char32_t bad = 0;
  REQUIRE(byte_level::unspell(byte_level::spell(all), back, bad));
  CHECK(back == all);
  CHECK_FALSE(byte_level::unspell("\xE4\xB8\xAD", back, bad));  // U+4E2D is no byte's stand-in
  CHECK(bad == U'\u4E2D');
}

TEST_CASE("gpt2_pretokenize follows the regex's alternatives in order") {
  using v = std::vector<std::string_view>;
  CHECK(gpt2_pretokenize("").empty());
  CHECK(gpt2_pretokenize("Hello world") == v{"Hello", " world"});
  CHECK(gpt2_pretokenize("don't we'll I'M") == v{"don", "'t", " we", "'ll", " I", "'", "M"});
  CHECK(gpt2_pretokenize("'sup 's") == v{"'s", "up", " '", "s"});
  CHECK(gpt2_pretokenize("!'s") == v{"!'", "s"});
  CHECK(gpt2_pretokenize("abc123 456x") == v{"abc", "123", " 456", "x"});
  CHECK(gpt2_pretokenize("a, b!! ?") == v{"a", ",", " b", "!!", " ?"});
}

TEST_CASE("gpt2_pretokenize: \\s+(?!\\S) leaves a run's last space to the next piece") {
  using v = std::vector<std::string_view>;
  CHECK(gpt2_pretokenize("a   b") == v{"a", "  ", " b"});
  CHECK(gpt2_pretokenize("a\t\tb") == v{"a", "\t", "\t", "b"});
  CHECK(gpt2_pretokenize("a \tb") == v{"a", " ", "\t", "b"});
  CHECK(gpt2_pretokenize("a\tb") == v{"a", "\t", "b"});
  CHECK(gpt2_pretokenize("a   ") == v{"a", "   "});
  CHECK(gpt2_pretokenize("  !") == v{" ", " !"});
  CHECK(gpt2_pretokenize("\n\nx") == v{"\n", "\n", "x"});
  CHECK(gpt2_pretokenize(" ") == v{" "});
}

TEST_CASE("gpt2_pretokenize classes: letters, numbers, White_Space and the rest, by code point") {
  using v = std::vector<std::string_view>;
  CHECK(gpt2_pretokenize("caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87") ==
        v{"caf\xC3\xA9", " \xE4\xB8\xAD\xE6\x96\x87"});
  CHECK(gpt2_pretokenize("\xC2\xBD\xE2\x85\xA0x") == v{"\xC2\xBD\xE2\x85\xA0", "x"});  // No, Nl
  CHECK(gpt2_pretokenize("a\xC2\xA0\xC2\xA0"
                         "b") == v{"a", "\xC2\xA0", "\xC2\xA0", "b"});
  CHECK(gpt2_pretokenize("a\x1C\x1C"
                         "b") == v{"a", "\x1C\x1C", "b"});     // not White_Space
  CHECK(gpt2_pretokenize("e\xCC\x81") == v{"e", "\xCC\x81"});  // a combining mark is no letter
  CHECK_THROWS_AS(gpt2_pretokenize("ab\xFF"), utf8_error);
}

TEST_CASE("merges apply lowest rank first, to every occurrence left to right without overlap") {
  // Ranks: "a a" 0, "b b" 1, "aa a" 2.
  const bpe_tokenizer t(byte_vocab({"aa", "bb", "aaa"}), merges_of({"a a", "b b", "aa a"}),
                        no_specials());
  CHECK(t.vocab_size() == 259);
  CHECK(t.merge_count() == 3);
  CHECK(t.encode("a") == ids{'a'});
  CHECK(t.encode("aa") == ids{256});
  CHECK(t.encode("aaa") == ids{258});        // a a a -> aa a -> aaa
  CHECK(t.encode("aaaa") == ids{256, 256});  // a a a a -> aa aa: no merge "aa aa"
  CHECK(t.encode("aaaaa") == ids{256, 258});
  CHECK(t.encode("bbb") == ids{257, 'b'});
  CHECK(t.encode("ab") == ids{'a', 'b'});
}

TEST_CASE("a pair a round's merges create waits for the next round, whatever its rank") {
  // "x y" (rank 0) makes "xy", then "xy z" (rank 1); "y z" (rank 2) comes last.
  const bpe_tokenizer t(byte_vocab({"xy", "xyz", "yz"}), merges_of({"x y", "xy z", "y z"}),
                        no_specials());
  CHECK(t.encode("xyz") == ids{257});
  CHECK(t.encode("yz") == ids{258});
  CHECK(t.encode("xyzyz") == ids{257, 258});
  // "aa a" has rank 0 but only exists once "a a" (rank 1) has applied; GPT-2's loop applies
  // "a a" to the whole word before it looks again, so "aaaa" ends as aa aa, not aaa a.
  const bpe_tokenizer u(byte_vocab({"aa", "aaa"}), merges_of({"aa a", "a a"}), no_specials());
  CHECK(u.encode("aaa") == ids{257});
  CHECK(u.encode("aaaa") == ids{256, 256});
  CHECK(u.encode("aaaaa") == ids{256, 257});
}

TEST_CASE("pieces are merged on their own: merges never cross a pre-tokenisation boundary") {
  const bpe_tokenizer t(byte_vocab({"a\xC4\xA0",
                                    "\xC4\xA0"
                                    "b"}),  // "aĠ", "Ġb"
                        merges_of({"a \xC4\xA0", "\xC4\xA0 b"}), no_specials());
  CHECK(t.encode("a b") == ids{'a', 257});  // "a" | " b"
}

TEST_CASE("a long word merges in n log n: 200000 equal letters") {
  const bpe_tokenizer t(byte_vocab({"aa", "aaaa"}), merges_of({"a a", "aa aa"}), no_specials());
  const std::string word(200001, 'a');
  const ids out = t.encode(word);
  REQUIRE(out.size() == 50001);
  CHECK(out.front() == 257);
  CHECK(out.back() == 'a');
  CHECK(t.decode(out) == word);
}

TEST_CASE("the piece cache is bounded and never changes the ids") {
  bpe_options small = no_specials();
  small.cache_entries = 3;
  bpe_options none = no_specials();
  none.cache_entries = 0;
  const std::string v = byte_vocab({"ab", "abc"});
  const std::string m = merges_of({"a b", "ab c"});
  const bpe_tokenizer cached(v, m, small), uncached(v, m, none);
  const std::string text = "abc ab abcabc xab abc ab q qq qqq abc abab";
  for (int round = 0; round < 3; ++round) {
    CHECK(cached.encode(text) == uncached.encode(text));
    CHECK(cached.cache_size() <= 3);
  }
  CHECK(cached.cache_size() > 0);
  CHECK(uncached.cache_size() == 0);
  const bpe_tokenizer copy = cached;  // a copy starts with an empty cache
  CHECK(copy.cache_size() == 0);
  CHECK(copy.encode(text) == uncached.encode(text));
}

TEST_CASE("special tokens are split out of the text; encode_ordinary treats them as text") {
  const bpe_tokenizer t(byte_vocab({"<|endoftext|>", "<|end|>"}), merges_of({}),
                        bpe_options{.special_tokens = {"<|endoftext|>", "<|end|>"}});
  REQUIRE(t.end_of_text() == 256);
  CHECK(t.special_id("<|end|>") == 257);
  CHECK_THROWS_AS(t.special_id("<|nope|>"), bpe_error);
  CHECK(t.encode("a<|endoftext|>b") == ids{'a', 256, 'b'});
  CHECK(t.encode("<|end|><|endoftext|>") == ids{257, 256});
  CHECK(t.encode("<|endoftext") == ids{'<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't'});
  CHECK(t.encode_ordinary("<|end|>") == ids{'<', '|', 'e', 'n', 'd', '|', '>'});
  CHECK(t.decode(ids{'a', 256}) == "a<|endoftext|>");
  const bpe_tokenizer plain(byte_vocab({}), merges_of({}), no_specials());
  CHECK_FALSE(plain.end_of_text().has_value());
}

TEST_CASE("encode rejects text that is not UTF-8, naming the byte") {
  const bpe_tokenizer t(byte_vocab({}), merges_of({}), no_specials());
  try {
    (void)t.encode("ok\xC3");
    FAIL("no error");
  } catch (const utf8_error& e) {
    CHECK(contains(e.what(), "byte 2"));
  }
  CHECK_THROWS_AS((void)t.encode_ordinary("\xED\xA0\x80"), utf8_error);  // a surrogate
}

TEST_CASE("decode maps ids to their bytes and names an id outside the vocabulary") {
  const bpe_tokenizer t(byte_vocab({"ab"}), merges_of({"a b"}), no_specials());
  CHECK(t.decode(ids{256, 'c'}) == "abc");
  CHECK(t.token(256) == "ab");
  CHECK(t.find_token("ab") == 256);
  CHECK_FALSE(t.find_token("zz").has_value());
  try {
    (void)t.decode(ids{257});
    FAIL("no error");
  } catch (const bpe_error& e) {
    CHECK(contains(e.what(), "id 257 is not in the vocabulary (0..256)"));
  }
  CHECK_THROWS_AS((void)t.decode(ids{-1}), bpe_error);
}

TEST_CASE("the stream decoder writes whole characters only and, concatenated, the full decode") {
  // Tokens that cut U+1F600 (F0 9F 98 80) and U+00E9 (C3 A9) apart.
  const std::string tail = byte_level::spell("\x9F\x98\x80");
  const bpe_tokenizer t(byte_vocab({tail}), merges_of({}), no_specials());
  const auto id_of = [&](std::string_view s) { return *t.find_token(byte_level::spell(s)); };
  const ids stream = {'a', id_of("\xF0"), 256, id_of("\xC3"), id_of("\xA9"), id_of("\xC3")};
  bpe_stream_decoder keep(t, bpe_stream_decoder::invalid_bytes::keep);
  std::vector<std::string> writes;
  for (const auto id : stream) writes.push_back(keep.push(id));
  CHECK(keep.pending_bytes() == 1);
  writes.push_back(keep.finish());
  CHECK(writes ==
        std::vector<std::string>{"a", "", "\xF0\x9F\x98\x80", "", "\xC3\xA9", "", "\xC3"});
  bpe_stream_decoder replace(t);
  std::string all;
  for (const auto id : stream) {
    const std::string w = replace.push(id);
    CHECK(utf8::is_valid(w));
    all += w;
  }
  all += replace.finish();
  CHECK(all == utf8::replace_invalid(t.decode(stream)));
  CHECK(all == "a\xF0\x9F\x98\x80\xC3\xA9\xEF\xBF\xBD");
  // A lone continuation byte is ill-formed at once: written (replaced) without waiting.
  bpe_stream_decoder r2(t);
  CHECK(r2.push(id_of("\x80")) == "\xEF\xBF\xBD");  // U+FFFD
  CHECK(r2.pending_bytes() == 0);
}

TEST_CASE("vocab.json errors: unreadable, not JSON, not an object, repeated token, bad ids") {
  const auto tmp = std::filesystem::temp_directory_path() / "fusedsl_bpe_missing_dir";
  try {
    (void)bpe_tokenizer::from_directory(tmp);
    FAIL("no error");
  } catch (const bpe_error& e) {
    CHECK(contains(e.what(), "cannot open"));
    CHECK(contains(e.what(), "fusedsl_bpe_missing_dir/vocab.json"));
  }
  const std::string m = merges_of({});
  CHECK(contains(error_of("{\"a\": 0,", m), "vocab.json: not valid JSON"));
  CHECK(
      contains(error_of("[1, 2]", m), "expected a JSON object mapping tokens to ids, found array"));
  CHECK(contains(error_of("{}", m, no_specials()), "the vocabulary is empty"));
  std::string twice = byte_vocab({});
  twice.insert(1, "\"a\":300,");
  CHECK(contains(error_of(twice, m, no_specials()), "token 'a' appears twice"));
  std::string bad_id = byte_vocab({});
  bad_id.insert(1, "\"zz\":\"x\",");
  CHECK(contains(error_of(bad_id, m, no_specials()),
                 "the id of token 'zz' is not an integer (\"x\")"));
  std::string fractional = byte_vocab({});
  fractional.insert(1, "\"zz\":2.5,");
  CHECK(contains(error_of(fractional, m, no_specials()), "the id of token 'zz' is not an integer"));
  std::string big = byte_vocab({});
  big.insert(1, "\"zz\":1000,");
  CHECK(contains(error_of(big, m, no_specials()),
                 "token 'zz' has id 1000; the ids of 257 tokens must be 0..256"));
  std::string negative = byte_vocab({});
  negative.insert(1, "\"zz\":-1,");
  CHECK(contains(error_of(negative, m, no_specials()), "token 'zz' has id -1"));
  std::string shared = byte_vocab({});
  shared.insert(1, "\"zz\":65,");
  shared.insert(1, "\"q2\":256,");
  CHECK(contains(error_of(shared, m, no_specials()), "id 65 is given to two tokens"));
}

TEST_CASE(
    "vocab.json errors: a character outside the byte alphabet, a byte without a token, a "
    "missing special token, the empty token") {
  const std::string m = merges_of({});
  CHECK(contains(error_of(byte_vocab({"\xE4\xB8\xAD"}), m, no_specials()),
                 "token '\xE4\xB8\xAD' (id 256) holds U+4E2D, which is not in GPT-2's byte-level "
                 "alphabet"));
  nlohmann::json v = nlohmann::json::parse(byte_vocab({}));
  v.erase("A");
  v["zz"] = 'A';
  CHECK(contains(error_of(v.dump(), m, no_specials()), "has no token for the byte 0x41 ('A')"));
  CHECK(contains(error_of(byte_vocab({}), m),
                 "vocab.json: has no entry for the special token '<|endoftext|>'"));
  CHECK(contains(error_of(byte_vocab({""}), m, no_specials()), "a token is the empty string"));
  // A special token may hold any text.
  CHECK_NOTHROW(bpe_tokenizer(byte_vocab({"<|\xE4\xB8\xAD|>"}), m,
                              bpe_options{.special_tokens = {"<|\xE4\xB8\xAD|>"}}));
}

TEST_CASE(
    "merges.txt errors name the line: bad shape, unknown token, unknown merged token, repeat") {
  const std::string v = byte_vocab({"ab"});
  const auto err = [&](const std::vector<std::string>& lines) {
    return error_of(v, merges_of(lines), no_specials());
  };
  CHECK(contains(err({"a b", "ab"}),
                 "merges.txt line 3: expected two tokens separated by one space, found 'ab'"));
  CHECK(contains(err({"a  b"}), "line 2: expected two tokens"));
  CHECK(contains(err({"a b c"}), "line 2: expected two tokens"));
  CHECK(contains(err({" a"}), "line 2: expected two tokens"));
  CHECK(contains(err({""}), "line 2: expected two tokens separated by one space, found ''"));
  CHECK(contains(err({"a zz"}), "merges.txt line 2: 'zz' is not in the vocabulary"));
  CHECK(
      contains(err({"b a"}), "merges.txt line 2: the merged token 'ba' is not in the vocabulary"));
  CHECK(contains(err({"a b", "a b"}), "merges.txt line 3: repeats the merge 'a b' of line 2"));
  const auto missing = std::filesystem::temp_directory_path() / "fusedsl_bpe_no_merges.txt";
  const auto vocab_file = std::filesystem::temp_directory_path() / "fusedsl_bpe_vocab.json";
  std::ofstream(vocab_file) << v;
  try {
    (void)bpe_tokenizer::from_files(vocab_file, missing, no_specials());
    FAIL("no error");
  } catch (const bpe_error& e) {
    CHECK(contains(e.what(), "cannot open '" + missing.string() + "'"));
  }
  std::filesystem::remove(vocab_file);
}

TEST_CASE(
    "merges.txt: the #version line is optional, CRLF line ends and a last line without one "
    "are read") {
  const std::string v = byte_vocab({"ab"});
  CHECK(bpe_tokenizer(v, "a b", no_specials()).encode("ab") == ids{256});
  CHECK(bpe_tokenizer(v, "#version: 0.2\r\na b\r\n", no_specials()).encode("ab") == ids{256});
  CHECK(bpe_tokenizer(v, "", no_specials()).merge_count() == 0);
}
