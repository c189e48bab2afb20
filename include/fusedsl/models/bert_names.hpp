#pragma once
// bert_checkpoint_name: the names of BERT checkpoints as models/bert.hpp's encoder declares its
// parameters (Hugging Face BertModel's, without a prefix). Apart from the encoder so that a
// checkpoint can be checked and bound without compiling it.
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fusedsl::models {

// The name models/bert.hpp's encoder gives a tensor of a BERT checkpoint, or nullopt for a tensor
// it does not use (the pooler, the pre-training heads, the position-id buffer). Other BERT
// checkpoints differ from BertModel's own names in these ways:
//   "bert." prefix              BertForMaskedLM, BertForSequenceClassification, ... save the
//   encoder
//                               under it ("bert.encoder.layer.0...")
//   "LayerNorm.gamma" / ".beta" checkpoints converted from the original TensorFlow code
//   "0.auto_model." prefix      sentence-transformers models saved whole (module 0 of the pipeline)
inline std::optional<std::string> bert_checkpoint_name(std::string_view name) {
  for (std::string_view prefix : {"0.auto_model.", "bert."})
    if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
  if (name.starts_with("pooler.") || name.starts_with("cls.") ||
      name == "embeddings.position_ids" || name.starts_with("classifier.") ||
      name.starts_with("qa_outputs."))
    return std::nullopt;
  std::string n(name);
  for (auto [from, to] :
       {std::pair<std::string_view, std::string_view>{"LayerNorm.gamma", "LayerNorm.weight"},
        {"LayerNorm.beta", "LayerNorm.bias"}})
    if (n.ends_with(from)) n.replace(n.size() - from.size(), from.size(), to);
  return n;
}

}  // namespace fusedsl::models
