// The all-MiniLM-L6-v2 buckets of one sequence length, FUSEDSL_MINILM_LENGTH, at batch 1 and 8
// (tools/CMakeLists.txt compiles this file once per length of minilm_l6_lengths).
#include "fusedsl/runtime/bert_bucket.hpp"
#include "minilm_l6.hpp"

#ifndef FUSEDSL_MINILM_LENGTH
#error "minilm_l6_bucket.cpp: define FUSEDSL_MINILM_LENGTH (a length of minilm_l6_lengths)"
#endif
#define FUSEDSL_CAT2(a, b) a##b
#define FUSEDSL_CAT(a, b) FUSEDSL_CAT2(a, b)

namespace fusedsl::models {

std::unique_ptr<encoder_bucket> FUSEDSL_CAT(make_minilm_l6_bucket_,
                                            FUSEDSL_MINILM_LENGTH)(std::int64_t batch,
                                                                   cpu::threads t) {
  constexpr std::int64_t L = FUSEDSL_MINILM_LENGTH;
  if (batch == 1) return make_bert_bucket<minilm_l6_config, 1, L>(t);
  if (batch == 8) return make_bert_bucket<minilm_l6_config, 8, L>(t);
  throw model_error("all-MiniLM-L6-v2: no bucket of batch " + std::to_string(batch) +
                    " and length " + std::to_string(L));
}

}  // namespace fusedsl::models
