#pragma once
// The Unicode character properties both tokenizers ask about: White_Space, and the general
// category from utf8proc (link -lutf8proc; fusedsl::text does).
#include <utf8proc.h>

namespace fusedsl::text {

// Unicode's White_Space property (PropList.txt): what Rust's char::is_whitespace and the regex
// engines of the reference tokenizers take for \s. U+001C..U+001F, which Python's str.isspace()
// also counts, are not in it.
constexpr bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

inline utf8proc_category_t general_category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

}  // namespace fusedsl::text
