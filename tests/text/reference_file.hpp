#pragma once
// Reads tests/text/data/minilm_wordpiece_reference.jsonl (make_wordpiece_reference.py): a header
// line, then one sentence per line with the ids the Python tokenizer gave it.
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace fusedsl::test {

struct reference_sentence {
  std::string group;
  std::string bytes;  // what the tokenizer is given
  std::vector<std::int32_t> ids;
  std::size_t untruncated = 0;
};

inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

inline std::vector<reference_sentence> read_reference(const std::string& path,
                                                      nlohmann::json* header = nullptr) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<reference_sentence> out;
  std::string line;
  std::getline(f, line);
  if (header) *header = nlohmann::json::parse(line);
  while (std::getline(f, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    reference_sentence s;
    s.group = j.at("group").get<std::string>();
    s.bytes =
        j.contains("hex") ? from_hex(j["hex"].get<std::string>()) : j.at("text").get<std::string>();
    s.ids = j.at("ids").get<std::vector<std::int32_t>>();
    s.untruncated = j.at("untruncated").get<std::size_t>();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace fusedsl::test
