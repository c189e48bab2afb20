#pragma once
// The all-MiniLM-L6-v2 encoder buckets this build carries (runtime/bert_bucket.hpp): batch 1 and
// batch 8 at each of the lengths below, one translation unit per length
// (minilm_l6_bucket.cpp, compiled once per length by tools/CMakeLists.txt).
#include <array>
#include <memory>

#include "fusedsl/runtime/sentence_embedder.hpp"

namespace fusedsl::models {

inline constexpr std::array<std::int64_t, 9> minilm_l6_lengths = {16, 24, 32,  40, 48,
                                                                  56, 64, 128, 256};
inline constexpr std::array<std::int64_t, 2> minilm_l6_batches = {1, 8};

// The bucket of batch `batch` (1 or 8) and length L, from the translation unit of that length.
#define FUSEDSL_MINILM_L6_DECLARE(L) \
  std::unique_ptr<encoder_bucket> make_minilm_l6_bucket_##L(std::int64_t batch, cpu::threads t);
FUSEDSL_MINILM_L6_DECLARE(16)
FUSEDSL_MINILM_L6_DECLARE(24)
FUSEDSL_MINILM_L6_DECLARE(32)
FUSEDSL_MINILM_L6_DECLARE(40)
FUSEDSL_MINILM_L6_DECLARE(48)
FUSEDSL_MINILM_L6_DECLARE(56)
FUSEDSL_MINILM_L6_DECLARE(64)
FUSEDSL_MINILM_L6_DECLARE(128)
FUSEDSL_MINILM_L6_DECLARE(256)
#undef FUSEDSL_MINILM_L6_DECLARE

// all-MiniLM-L6-v2 (sentence-transformers): what it computes and its buckets.
const encoder_variant& minilm_l6_variant();

}  // namespace fusedsl::models
