// all-MiniLM-L6-v2's encoder_variant: the buckets of minilm_l6_bucket.cpp.
#include "minilm_l6.hpp"

#include "fusedsl/runtime/bert_bucket.hpp"

namespace fusedsl::models {

const encoder_variant& minilm_l6_variant() {
  static const encoder_variant v = [] {
    encoder_variant e;
    e.name = "all-MiniLM-L6-v2";
    e.config = bert_sentence_config<minilm_l6_config>(std::size_t(minilm_l6_lengths.back()));
    for (std::int64_t b : minilm_l6_batches)
      for (std::int64_t l : minilm_l6_lengths) e.shapes.push_back({b, l});
    e.make = [](bucket_shape s, cpu::threads t) -> std::unique_ptr<encoder_bucket> {
      switch (s.length) {
        case 16:
          return make_minilm_l6_bucket_16(s.batch, t);
        case 24:
          return make_minilm_l6_bucket_24(s.batch, t);
        case 32:
          return make_minilm_l6_bucket_32(s.batch, t);
        case 40:
          return make_minilm_l6_bucket_40(s.batch, t);
        case 48:
          return make_minilm_l6_bucket_48(s.batch, t);
        case 56:
          return make_minilm_l6_bucket_56(s.batch, t);
        case 64:
          return make_minilm_l6_bucket_64(s.batch, t);
        case 128:
          return make_minilm_l6_bucket_128(s.batch, t);
        case 256:
          return make_minilm_l6_bucket_256(s.batch, t);
        default:
          throw model_error("all-MiniLM-L6-v2: no bucket of length " + std::to_string(s.length));
      }
    };
    return e;
  }();
  return v;
}

}  // namespace fusedsl::models
