#pragma once
// A WordPiece tokenizer configured from a Hugging Face / sentence-transformers model directory:
//
//   vocab.txt                  the vocabulary (required)
//   tokenizer.json             when present, what the reference tokenizer runs: the BertNormalizer
//                              flags, the WordPiece model's unk token, "##" prefix and
//                              max_input_chars_per_word, the added tokens; its vocabulary must
//                              equal vocab.txt. Its "truncation" block (128 for all-MiniLM-L6-v2)
//                              is ignored: transformers replaces it on every call.
//   tokenizer_config.json      otherwise: do_lower_case, strip_accents, tokenize_chinese_chars and
//                              the special tokens; also model_max_length
//   sentence_bert_config.json  max_seq_length, the truncation length sentence-transformers uses
//                              (256 for all-MiniLM-L6-v2); without it, model_max_length
//
// Needs nlohmann-json. A missing or malformed file is a text_error naming it.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fusedsl/io/read_file.hpp"
#include "fusedsl/text/wordpiece.hpp"

namespace fusedsl::text {

namespace detail {

using json = nlohmann::json;

// The file's JSON object; nullopt when there is no such file.
inline std::optional<json> read_json(const std::filesystem::path& path) {
  const std::optional<std::string> text = io::read_file(path);
  if (!text) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw text_error("wordpiece: '" + path.string() + "' is not a JSON object");
  return j;
}

// A token given as "[UNK]" or as an added-token object {"content": "[UNK]", ...}.
inline std::optional<std::string> token_field(const json& j, const char* key,
                                              const std::filesystem::path& file) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  throw text_error("wordpiece: '" + file.string() + "': \"" + key + "\" is not a token");
}

template <class T>
std::optional<T> field(const json& j, const char* key, const std::filesystem::path& file) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw text_error("wordpiece: '" + file.string() + "': \"" + key + "\" has the wrong type");
  }
}

inline void read_tokenizer_json(const json& t, const std::filesystem::path& file,
                                const vocabulary& vocab, wordpiece_config& c) {
  const auto fail = [&](const std::string& what) {
    throw text_error("wordpiece: '" + file.string() + "': " + what);
  };
  const json& norm = t.value("normalizer", json());
  if (!norm.is_object() || norm.value("type", "") != "BertNormalizer")
    fail("the normalizer is not a BertNormalizer");
  c.normalizer.clean_text = field<bool>(norm, "clean_text", file).value_or(true);
  c.normalizer.handle_chinese_chars =
      field<bool>(norm, "handle_chinese_chars", file).value_or(true);
  c.normalizer.strip_accents = field<bool>(norm, "strip_accents", file);
  c.normalizer.lowercase = field<bool>(norm, "lowercase", file).value_or(true);
  const json& pre = t.value("pre_tokenizer", json());
  if (!pre.is_object() || pre.value("type", "") != "BertPreTokenizer")
    fail("the pre-tokenizer is not a BertPreTokenizer");
  const json& model = t.value("model", json());
  if (!model.is_object() || model.value("type", "") != "WordPiece")
    fail("the model is not WordPiece");
  c.unk_token = field<std::string>(model, "unk_token", file).value_or(c.unk_token);
  c.continuing_subword_prefix =
      field<std::string>(model, "continuing_subword_prefix", file).value_or("##");
  c.max_input_chars_per_word =
      field<std::size_t>(model, "max_input_chars_per_word", file).value_or(100);
  const json& v = model.value("vocab", json());
  if (!v.is_object() || v.size() != vocab.size())
    fail("its vocabulary has " + std::to_string(v.is_object() ? v.size() : 0) +
         " tokens, vocab.txt " + std::to_string(vocab.size()));
  for (const auto& [token, id] : v.items())
    if (!id.is_number_integer() || vocab.find(token) != id.get<std::int32_t>())
      fail("its vocabulary and vocab.txt disagree on '" + token + "'");
  c.special_tokens.clear();
  for (const json& a : t.value("added_tokens", json::array())) {
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string())
      fail("an added token has no content");
    if (a.value("normalized", false) || a.value("lstrip", false) || a.value("rstrip", false) ||
        a.value("single_word", false))
      fail("added token '" + a["content"].get<std::string>() +
           "' is normalized, stripped or single-word, which this tokenizer does not do");
    c.special_tokens.push_back(a["content"].get<std::string>());
  }
}

}  // namespace detail

inline wordpiece_config read_wordpiece_config(const std::filesystem::path& dir,
                                              const vocabulary& vocab) {
  wordpiece_config c;
  const auto tc_path = dir / "tokenizer_config.json";
  if (const auto tc = detail::read_json(tc_path)) {
    c.normalizer.lowercase = detail::field<bool>(*tc, "do_lower_case", tc_path).value_or(true);
    c.normalizer.strip_accents = detail::field<bool>(*tc, "strip_accents", tc_path);
    c.normalizer.handle_chinese_chars =
        detail::field<bool>(*tc, "tokenize_chinese_chars", tc_path).value_or(true);
    std::vector<std::string> specials;
    const std::pair<const char*, std::string*> roles[] = {{"pad_token", &c.pad_token},
                                                          {"unk_token", &c.unk_token},
                                                          {"cls_token", &c.cls_token},
                                                          {"sep_token", &c.sep_token},
                                                          {"mask_token", nullptr}};
    for (auto [key, slot] : roles) {
      if (auto t = detail::token_field(*tc, key, tc_path)) {
        if (slot) *slot = *t;
        specials.push_back(*t);
      }
    }
    c.special_tokens = specials;
    if (const auto m = detail::field<double>(*tc, "model_max_length", tc_path);
        m && *m >= 2 && *m < 1e9)  // transformers writes 1e30 for "no limit"
      c.max_length = static_cast<std::size_t>(*m);
  }
  const auto tj_path = dir / "tokenizer.json";
  if (const auto tj = detail::read_json(tj_path))
    detail::read_tokenizer_json(*tj, tj_path, vocab, c);
  const auto sb_path = dir / "sentence_bert_config.json";
  if (const auto sb = detail::read_json(sb_path)) {
    if (detail::field<bool>(*sb, "do_lower_case", sb_path).value_or(false))
      throw text_error("wordpiece: '" + sb_path.string() +
                       "': do_lower_case (Python's str.lower before tokenizing) is not supported");
    if (const auto m = detail::field<std::size_t>(*sb, "max_seq_length", sb_path))
      c.max_length = *m;
  }
  return c;
}

// The tokenizer of the model directory `dir` (see the top of this file).
inline wordpiece_tokenizer load_wordpiece_tokenizer(const std::filesystem::path& dir) {
  vocabulary vocab = vocabulary::from_file(dir / "vocab.txt");
  wordpiece_config config = read_wordpiece_config(dir, vocab);
  return wordpiece_tokenizer(std::move(vocab), std::move(config));
}

}  // namespace fusedsl::text
