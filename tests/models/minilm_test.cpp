// all-MiniLM-L6-v2 end to end against sentence-transformers: the real checkpoint (the model
// venv's package, FUSEDSL_MINILM_DIR from scripts/with-model-files minilm) embeds each of the 380
// committed reference sentences within cosine 0.99999 and 1e-4 of the committed
// SentenceTransformer.encode output, from the committed ids and from the text; the layer-by-layer
// hidden states of three sentences match the committed ones. Under AddressSanitizer (the
// debug-asan preset, -O1, several times slower) the embedding cases take every fifth sentence
// (76 of 2 to 256 tokens: the shortest bucket and the longest); the release build takes all 380.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/test_paths.hpp"
#include "common/compare.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/io/checkpoint.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/models/bert.hpp"
#include "fusedsl/runtime/sentence_embedder.hpp"
#include "minilm_l6.hpp"
#include "reference_file.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;
namespace io = fusedsl::io;
namespace models = fusedsl::models;

namespace {

const std::string data_dir = fusedsl::test::test_path(FUSEDSL_MODELS_TEST_DATA);

std::filesystem::path model_dir() {
  const char* d = std::getenv("FUSEDSL_MINILM_DIR");
  REQUIRE_MESSAGE(d != nullptr,
                  "FUSEDSL_MINILM_DIR is not set (run through scripts/with-model-files minilm)");
  return d;
}

struct agreement {
  double worst_cosine = 1;  // the smallest cosine similarity over the sentences
  double worst_abs = 0;     // the largest |difference| of any component
  std::size_t worst_row = 0;
  bool finite = true;  // false: a NaN or infinity in an embedding (the checks then fail)
};

agreement compare_rows(const std::vector<float>& got, const std::vector<float>& want,
                       std::size_t rows, std::size_t d) {
  agreement a;
  for (std::size_t r = 0; r < rows; ++r) {
    double dot = 0, ng = 0, nw = 0;
    for (std::size_t c = 0; c < d; ++c) {
      const double g = got[r * d + c], w = want[r * d + c];
      a.finite = a.finite && std::isfinite(g);
      dot += g * w;
      ng += g * g;
      nw += w * w;
      const double diff = std::abs(g - w);
      a.finite = a.finite && std::isfinite(diff);
      if (diff > a.worst_abs) a.worst_abs = diff;
    }
    const double cosine = dot / std::sqrt(ng * nw);
    a.finite = a.finite && std::isfinite(cosine);
    if (cosine < a.worst_cosine) {
      a.worst_cosine = cosine;
      a.worst_row = r;
    }
  }
  return a;
}

void check_agreement(const agreement& a) {
  INFO("worst cosine 1 - " << 1 - a.worst_cosine << " (sentence " << a.worst_row
                           << "), worst |diff| " << a.worst_abs);
  CHECK(a.finite);
  CHECK(a.worst_cosine >= 0.99999);
  CHECK(a.worst_abs <= 1e-4);
  MESSAGE("worst cosine 1 - " << 1 - a.worst_cosine << ", worst |diff| " << a.worst_abs);
}

std::vector<float> reference_embeddings() {
  const io::npy_array a = io::read_npy(data_dir + "/minilm_embeddings.npy");
  REQUIRE(a.shape == std::vector<std::int64_t>{380, 384});
  return a.values<float>();
}

#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t sentence_stride = 5;
#else
constexpr std::size_t sentence_stride = 1;
#endif

}  // namespace

TEST_CASE("all-MiniLM-L6-v2 embeds the 380 reference sentences as sentence-transformers does") {
  const auto sentences = ft::read_reference(data_dir + "/minilm_sentences.jsonl");
  REQUIRE(sentences.size() == 380);
  const std::vector<float> all = reference_embeddings();
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<std::string> texts;
  std::vector<float> want;
  for (std::size_t i = 0; i < sentences.size(); i += sentence_stride) {
    ids.push_back(sentences[i].ids);
    texts.push_back(sentences[i].bytes);
    want.insert(want.end(), all.begin() + std::ptrdiff_t(i * 384),
                all.begin() + std::ptrdiff_t((i + 1) * 384));
  }
  MESSAGE(ids.size() << " of the 380 sentences");

  models::sentence_embedder e(
      model_dir(), {&models::minilm_l6_variant(), 1},
      {.threads = fd::cpu::threads{1},
       .max_batch = 8,
       .call_cost_tokens = 1e6,  // as few calls as can be: chunks of 8
       .warn = [](const std::string&) {}});
  CHECK(e.dimension() == 384);
  SUBCASE("from the committed ids, in batches of 8") {
    check_agreement(compare_rows(e.embed_ids(ids), want, ids.size(), 384));
    std::size_t made = 0, shared = 0;
    for (const auto& b : e.buckets())
      if (b) {
        CHECK(b->stats().interpreted_groups == 0);
        // One copy of the GEMM panels for all buckets: each reads the same shared bytes.
        CHECK(b->footprint().packed_weights <= 128);
        CHECK(b->footprint().shared_weights > 0);
        CHECK((shared == 0 || b->footprint().shared_weights == shared));
        shared = b->footprint().shared_weights;
        ++made;
      }
    CHECK(made >= 2);
    CHECK(e.stats().sentences == ids.size());
    CHECK(e.stats().padded_tokens >= e.stats().tokens);
    CHECK(e.stats().encoder_calls == std::int64_t((ids.size() + 7) / 8));
  }
  SUBCASE("the default split: fewer padded tokens, the same embeddings") {
    models::sentence_embedder def(
        model_dir(), {&models::minilm_l6_variant(), 1},
        {.threads = fd::cpu::threads{1}, .max_batch = 8, .warn = [](const std::string&) {}});
    check_agreement(compare_rows(def.embed_ids(ids), want, ids.size(), 384));
    e.embed_ids(ids);
    // The split minimises padded tokens + 2 per call on one thread: no worse than chunks of 8.
    const auto cost = [](const models::embedder_stats& s) {
      return s.padded_tokens + 2 * s.encoder_calls;
    };
    CHECK(cost(def.stats()) <= cost(e.stats()));
    CHECK(def.stats().padded_tokens < e.stats().padded_tokens);
  }
  SUBCASE("from the text, through fusedsl's tokenizer") {
    check_agreement(compare_rows(e.embed(texts), want, texts.size(), 384));
  }
  SUBCASE("one sentence per encoder call, on two threads") {
    models::sentence_embedder one(
        model_dir(), {&models::minilm_l6_variant(), 1},
        {.threads = fd::cpu::threads{2}, .max_batch = 1, .warn = [](const std::string&) {}});
    const std::vector<float> got = one.embed_ids(ids);
    check_agreement(compare_rows(got, want, ids.size(), 384));
    CHECK(one.stats().encoder_calls == ids.size());
  }
}

namespace {

using cfg = models::minilm_l6_config;
constexpr std::int64_t hidden_len = 64;  // the three sentences have 12, 12 and 44 tokens
constexpr auto ids_in = models::bert_ids<hidden_len>();
constexpr auto x_in = fd::input<"x", float, hidden_len, 384>();
constexpr auto mask_in = models::bert_mask<hidden_len>();
constexpr auto embeddings_program = fd::compile(models::bert_embeddings<cfg>(ids_in));
constexpr auto layer_program = fd::compile(models::bert_layers<cfg, 1>(x_in, mask_in));

// The checkpoint's layer `k` as the one-layer program's "encoder.layer.0.*"; the rest ignored.
io::checkpoint_options layer_options(int k) {
  io::checkpoint_options o;
  o.rename = [k](std::string_view n) -> std::optional<std::string> {
    const std::string prefix = "encoder.layer." + std::to_string(k) + ".";
    if (!n.starts_with(prefix)) return std::nullopt;
    return "encoder.layer.0." + std::string(n.substr(prefix.size()));
  };
  return o;
}

}  // namespace

TEST_CASE("the embedding layer and each encoder layer match sentence-transformers' hidden states") {
  std::ifstream mf(data_dir + "/minilm_reference.json");
  const nlohmann::json meta = nlohmann::json::parse(mf);
  const auto sentences = ft::read_reference(data_dir + "/minilm_sentences.jsonl");
  const io::safetensors_file file = io::safetensors_file::open(model_dir() / "model.safetensors");
  fd::cpu::executor emb{embeddings_program};
  io::checkpoint_options embeddings_only;
  embeddings_only.rename = [](std::string_view n) -> std::optional<std::string> {
    if (n.starts_with("embeddings.") && n != "embeddings.position_ids") return std::string(n);
    return std::nullopt;
  };
  const io::checkpoint_binding eb = io::bind_checkpoint(emb, file, embeddings_only);
  CHECK(eb.bound.size() == 5);
  // Executors are not movable: one allocation each.
  std::vector<std::unique_ptr<fd::cpu::executor<decltype(layer_program)>>> layers;
  std::vector<io::checkpoint_binding> lb;
  for (int k = 0; k < 6; ++k) {
    layers.push_back(std::make_unique<fd::cpu::executor<decltype(layer_program)>>(layer_program));
    lb.push_back(io::bind_checkpoint(*layers.back(), file, layer_options(k)));
    CHECK(lb.back().bound.size() == 16);
  }
  std::vector<std::int32_t> ids(hidden_len, 0);
  std::vector<unsigned char> mask(hidden_len, 0);
  std::vector<float> x(hidden_len * 384), y(hidden_len * 384);
  emb.bind("input_ids", fd::tensor_ref{ids.data(), fd::dtype::i32, fd::make_dims(hidden_len)});
  emb.bind_output(0, fd::tensor_ref{x.data(), fd::dtype::f32, fd::make_dims(hidden_len, 384)});
  for (auto& l : layers) {
    models::bind_input(*l, "attention_mask",
                       fd::tensor_ref{mask.data(), fd::dtype::boolean, fd::make_dims(hidden_len)});
    CHECK(l->stats().interpreted_groups == 0);
  }
  REQUIRE(meta.at("hidden_states").size() == 3);
  for (const nlohmann::json& h : meta.at("hidden_states")) {
    const auto s = h.at("sentence").get<std::size_t>();
    const auto tokens = h.at("tokens").get<std::int64_t>();
    CAPTURE(s);
    REQUIRE(tokens <= hidden_len);
    const std::vector<float> want =
        io::read_npy(data_dir + "/" + h.at("file").get<std::string>()).values<float>();
    std::fill(ids.begin(), ids.end(), 0);
    std::fill(mask.begin(), mask.end(), static_cast<unsigned char>(0));
    std::copy(sentences[s].ids.begin(), sentences[s].ids.end(), ids.begin());
    std::fill_n(mask.begin(), tokens, static_cast<unsigned char>(1));
    emb.run();
    for (int layer = 0; layer <= 6; ++layer) {
      CAPTURE(layer);
      if (layer > 0) {
        auto& l = *layers[std::size_t(layer - 1)];
        l.bind("x", fd::tensor_ref{x.data(), fd::dtype::f32, fd::make_dims(hidden_len, 384)});
        l.bind_output(0, fd::tensor_ref{y.data(), fd::dtype::f32, fd::make_dims(hidden_len, 384)});
        l.run();
        std::swap(x, y);
      }
      // The real tokens' rows (the padded rows differ: sentence-transformers ran unpadded).
      const std::vector<float> got(x.begin(), x.begin() + tokens * 384);
      const std::vector<float> ref(want.begin() + layer * tokens * 384,
                                   want.begin() + (layer + 1) * tokens * 384);
      CHECK(ft::compare(got, ref, ft::allclose(2e-5, 2e-5)));
    }
  }
}

TEST_CASE(
    "bind_checkpoint binds the real checkpoint whole and lists what the encoder does not use") {
  const io::safetensors_file file = io::safetensors_file::open(model_dir() / "model.safetensors");
  const std::unique_ptr<models::encoder_bucket> b =
      models::minilm_l6_variant().make({1, 16}, fd::cpu::threads{1});
  std::vector<io::checkpoint_param> params;
  for (const auto& info : b->bindings())
    if (info.kind == fd::graph::op_kind::param)
      params.push_back({info.name, info.type, info.shape});
  std::vector<std::string> names;
  const auto bind = [&](const std::string& n, fd::tensor_ref) { names.push_back(n); };
  const io::checkpoint_binding bound = io::bind_checkpoint(
      params, file, bind, {.rename = models::bert_checkpoint_name, .convert = true});
  CHECK(bound.bound.size() == 101);  // 5 embedding tensors and 16 per layer
  CHECK(names == bound.bound);
  CHECK(bound.converted.empty());
  CHECK(bound.storage.empty());
  CHECK(bound.ignored == std::vector<std::string>{"embeddings.position_ids", "pooler.dense.bias",
                                                  "pooler.dense.weight"});
  // Every tensor name-for-name: without the rename, the unused ones are unexpected.
  try {
    io::bind_checkpoint(params, file, bind);
    FAIL("the unused tensors were not reported");
  } catch (const io::checkpoint_error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("(3 problems)") != std::string::npos);
    CHECK(msg.find("unexpected: 'pooler.dense.weight' F32[384,384]") != std::string::npos);
    CHECK(msg.find("unexpected: 'embeddings.position_ids' I64[1,512]") != std::string::npos);
  }
}
