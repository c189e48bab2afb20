#pragma once
// The GPT-2 shapes fusedsl-generate carries, two translation units each (gpt2_variant.cpp,
// compiled per shape with f32 and with int8 weights by tools/CMakeLists.txt), behind one
// interface.
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "fusedsl/io/safetensors.hpp"

namespace fusedsl::tools {

// A gpt2_generator of one compiled shape.
class gpt2_runner {
 public:
  virtual ~gpt2_runner() = default;
  virtual std::span<const float> prefill(std::span<const std::int32_t> prompt) = 0;
  virtual std::span<const float> step(std::int32_t token) = 0;
  virtual std::int32_t greedy() const = 0;
  virtual std::int64_t length() const = 0;
};

struct gpt2_variant {
  std::string_view name;
  int layers;
  std::int64_t d, heads, vocab, positions, inner;
  std::int64_t max_prompt;  // the largest prefill bucket
  std::unique_ptr<gpt2_runner> (*make)(const io::safetensors_file& file);
  // The same with int8 weights, quantized per output channel from the checkpoint when bound.
  std::unique_ptr<gpt2_runner> (*make_int8)(const io::safetensors_file& file);
};

#define FUSEDSL_GPT2_VARIANT_DECLARE(id)   \
  const gpt2_variant& gpt2_variant_##id(); \
  std::unique_ptr<gpt2_runner> make_gpt2_int8_##id(const io::safetensors_file& file);
FUSEDSL_GPT2_VARIANT_DECLARE(small)
FUSEDSL_GPT2_VARIANT_DECLARE(medium)
FUSEDSL_GPT2_VARIANT_DECLARE(tiny)
#undef FUSEDSL_GPT2_VARIANT_DECLARE

}  // namespace fusedsl::tools
