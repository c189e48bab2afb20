// UTF-8 decoding: well-formed text round-trips; each maximal ill-formed subpart is one U+FFFD,
// as Python's bytes.decode("utf-8", "replace") does (the expectations below are its output).
#include "fusedsl/text/utf8.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace fusedsl::text;

TEST_CASE("well-formed UTF-8 of every length decodes and encodes back") {
  const std::string s = "a\u00e9\u4e2d\U0001f600\U0010ffff\u0000z";
  const std::u32string d = utf8::decode(s);
  CHECK(d == U"a\u00e9\u4e2d\U0001f600\U0010ffff");  // the literal stops at \u0000
  CHECK(utf8::encode(d) == s.substr(0, s.size()));
  const std::string nul("x\0y", 3);
  CHECK(utf8::decode(nul) == std::u32string(U"x\0y", 3));
  for (char32_t c : {U'\x7f', U'\x80', U'\u07ff', U'\u0800', U'\uffff', U'\U00010000'})
    CHECK(utf8::decode(utf8::encode(std::u32string(1, c))) == std::u32string(1, c));
}

TEST_CASE("each maximal subpart of an ill-formed sequence becomes one U+FFFD") {
  constexpr char32_t r = replacement_character;
  CHECK(utf8::decode("\x80") == std::u32string{r});
  CHECK(utf8::decode("a\x80\x81z") == std::u32string{U'a', r, r, U'z'});
  CHECK(utf8::decode("\xc0\xaf") == std::u32string{r, r});         // overlong lead C0
  CHECK(utf8::decode("\xe0\x80\xaf") == std::u32string{r, r, r});  // E0 needs A0..BF next
  CHECK(utf8::decode("\xed\xa0\x80") == std::u32string{r, r, r});  // a surrogate
  CHECK(utf8::decode("\xf0\x9f\x98") == std::u32string{r});        // truncated: one subpart
  CHECK(utf8::decode("\xf0\x9f\x98z") == std::u32string{r, U'z'});
  CHECK(utf8::decode("\xe2\x82") == std::u32string{r});
  CHECK(utf8::decode("\xf4\x90\x80\x80") == std::u32string{r, r, r, r});  // past U+10FFFF
  CHECK(utf8::decode("\xf5\xff") == std::u32string{r, r});
  CHECK(utf8::decode("\xc3\x28") == std::u32string{r, U'('});
  CHECK(utf8::decode("\xe2\x9c\xe2\x9c\x93") == std::u32string{r, U'\u2713'});
}
