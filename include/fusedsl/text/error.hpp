#pragma once
// The tokenizers' errors (text/): each names the file, token or byte at fault. text_error is the
// base of all of them (utf8_error, bpe_error).
#include "fusedsl/core/error.hpp"

namespace fusedsl::text {

// A tokenizer's files are missing, unreadable or inconsistent.
struct text_error : error {
  using error::error;
};

}  // namespace fusedsl::text
