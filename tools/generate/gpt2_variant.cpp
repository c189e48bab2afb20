// One GPT-2 shape of fusedsl-generate: FUSEDSL_GPT2_ID (small, medium, tiny) selects it; with
// FUSEDSL_GPT2_INT8 the unit holds the same shape with int8 weights instead (its own translation
// unit: each compiles in about the time of one generator, and the two build in parallel).
#include "fusedsl/runtime/gpt2_generator.hpp"
#include "gpt2_variants.hpp"

namespace fusedsl::tools {
namespace {

namespace fm = fusedsl::models;

#define FUSEDSL_ID_small 1
#define FUSEDSL_ID_medium 2
#define FUSEDSL_ID_tiny 3
#define FUSEDSL_CAT2(a, b) a##b
#define FUSEDSL_CAT(a, b) FUSEDSL_CAT2(a, b)
#define FUSEDSL_ID FUSEDSL_CAT(FUSEDSL_ID_, FUSEDSL_GPT2_ID)

// The shape, its prefill buckets, and the same model with int8 weights (--weights int8: the
// linear layers and the tied embedding quantized per output channel when the checkpoint is bound).
#if FUSEDSL_ID == 1
constexpr std::string_view name = "gpt2 (small)";
template <class W>
using generator = fm::gpt2_generator<fm::gpt2_config<12, 768, 12, 50257, 1024, W>, 64, 256, 1024>;
#elif FUSEDSL_ID == 2
constexpr std::string_view name = "gpt2-medium";
template <class W>
using generator = fm::gpt2_generator<fm::gpt2_config<24, 1024, 16, 50257, 1024, W>, 64, 256, 1024>;
#elif FUSEDSL_ID == 3
// The test suite's model (tests/models/data/gpt2_small_test).
constexpr std::string_view name = "tiny (the test model)";
template <class W>
using generator = fm::gpt2_generator<fm::gpt2_config<2, 64, 4, 512, 128, W>, 16, 32, 128>;
#else
#error "FUSEDSL_GPT2_ID must be small, medium or tiny"
#endif

template <class Generator>
class runner final : public gpt2_runner {
 public:
  explicit runner(const io::safetensors_file& file) : gen_(file) {}
  std::span<const float> prefill(std::span<const std::int32_t> prompt) override {
    return gen_.prefill(prompt);
  }
  std::span<const float> step(std::int32_t token) override { return gen_.step(token); }
  std::int32_t greedy() const override { return gen_.greedy(); }
  std::int64_t length() const override { return gen_.length(); }

 private:
  Generator gen_;
};

using cfg = generator<float>::config;

}  // namespace

#if FUSEDSL_GPT2_INT8
std::unique_ptr<gpt2_runner> FUSEDSL_CAT(make_gpt2_int8_,
                                         FUSEDSL_GPT2_ID)(const io::safetensors_file& f) {
  return std::make_unique<runner<generator<std::int8_t>>>(f);
}
#else

const gpt2_variant& FUSEDSL_CAT(gpt2_variant_, FUSEDSL_GPT2_ID)() {
  static const gpt2_variant v{name,
                              cfg::layers,
                              cfg::d,
                              cfg::heads,
                              cfg::vocab,
                              cfg::positions,
                              cfg::inner,
                              generator<float>::max_prompt(),
                              [](const io::safetensors_file& f) -> std::unique_ptr<gpt2_runner> {
                                return std::make_unique<runner<generator<float>>>(f);
                              },
                              &FUSEDSL_CAT(make_gpt2_int8_, FUSEDSL_GPT2_ID)};
  return v;
}
#endif

}  // namespace fusedsl::tools
