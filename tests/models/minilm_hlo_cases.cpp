// The all-MiniLM-L6-v2 sentence encoder (batch 4, length 32) exported as HLO, for XLA
// (tests/models/run_minilm_xla.py) and the TPU-style backend (fusedsl-tpu --check):
//   <dir>/module.hlo      the fused form of the whole encoder: embeddings, 6 layers, pooling
//   <dir>/<N>.npy         entry parameter N: the checkpoint's tensors, the ids and the mask of 4
//                         reference sentences (padded to 32 tokens)
//   <dir>/out0.npy        the CPU executor's embeddings [4, 384]
//   <dir>/reference.npy   sentence-transformers' embeddings of the same sentences (committed)
//   parameters.txt        the parameters' names, in entry order
// The case directory is FUSEDSL_MINILM_HLO_DIR; the model comes from FUSEDSL_MINILM_DIR
// (scripts/with-model-files minilm).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../common/test_paths.hpp"
#include "fusedsl/export/export.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/runtime/bert_bucket.hpp"
#include "reference_file.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;
namespace fs = std::filesystem;
namespace io = fusedsl::io;

namespace {

constexpr std::int64_t B = 4, L = 32, D = fm::minilm_l6_config::d;
using program = fm::bert_bucket_program<fm::minilm_l6_config, B, L>::type;

fs::path model_dir() {
  const char* d = std::getenv("FUSEDSL_MINILM_DIR");
  REQUIRE_MESSAGE(d != nullptr,
                  "FUSEDSL_MINILM_DIR is not set (run through scripts/with-model-files minilm)");
  return d;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  REQUIRE(f);
  f << s;
  REQUIRE(f);
}

template <class T>
void write_values(const fs::path& p, const std::vector<T>& v, const std::vector<std::int64_t>& s) {
  io::write_npy<T>(p.string(), std::span<const T>(v.data(), v.size()), s);
}

std::vector<std::int64_t> dims_of(const fd::dims& d) {
  std::vector<std::int64_t> v;
  for (int i = 0; i < d.rank; ++i) v.push_back(d[i]);
  return v;
}

}  // namespace

TEST_CASE("all-MiniLM-L6-v2 as HLO: the module, its parameters and the CPU executor's output") {
  const std::string data = fusedsl::test::test_path(FUSEDSL_MODELS_TEST_DATA);
  const auto sentences = fd::test::read_reference(data + "/minilm_sentences.jsonl");
  const std::vector<float> all_ref = io::read_npy(data + "/minilm_embeddings.npy").values<float>();
  REQUIRE(all_ref.size() == sentences.size() * std::size_t(D));
  // Four sentences of different lengths that fit the bucket: the shortest, the longest, two
  // between.
  std::vector<std::size_t> pick;
  for (std::size_t s = 0; s < sentences.size() && pick.size() < 4; ++s) {
    const std::size_t n = sentences[s].ids.size();
    bool new_length = n <= std::size_t(L);
    for (std::size_t p : pick) new_length = new_length && sentences[p].ids.size() != n;
    if (new_length) pick.push_back(s);
  }
  REQUIRE(pick.size() == 4);
  std::vector<std::int32_t> ids(std::size_t(B * L), 0);
  const std::unique_ptr<bool[]> mask(new bool[std::size_t(B * L)]());
  std::vector<unsigned char> mask_bytes(std::size_t(B * L), 0);
  std::vector<float> reference;
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& s = sentences[pick[std::size_t(b)]];
    for (std::size_t t = 0; t < s.ids.size(); ++t) {
      ids[std::size_t(b * L) + t] = s.ids[t];
      mask[std::size_t(b * L) + t] = true;
      mask_bytes[std::size_t(b * L) + t] = 1;
    }
    const float* r = all_ref.data() + pick[std::size_t(b)] * std::size_t(D);
    reference.insert(reference.end(), r, r + D);
  }

  const io::safetensors_file file = io::safetensors_file::open(model_dir() / "model.safetensors");
  fd::cpu::executor<program> ex{program{}};
  const io::checkpoint_binding w =
      io::bind_checkpoint(ex, file, {.rename = fm::bert_checkpoint_name, .convert = true});
  CHECK(ex.stats().interpreted_groups == 0);
  fm::bind_input(ex, fm::bert_ids_name,
                 fd::tensor_ref{ids.data(), fd::dtype::i32, fd::make_dims(B, L)});
  fm::bind_input(ex, fm::bert_mask_name,
                 fd::tensor_ref{mask_bytes.data(), fd::dtype::boolean, fd::make_dims(B, L)});
  std::vector<float> out(std::size_t(B * D));
  ex.bind_output(0, fd::tensor_ref{out.data(), fd::dtype::f32, fd::make_dims(B, D)});
  ex.run();
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    worst = std::max(worst, std::abs(double(out[i]) - reference[i]));
  INFO("largest |executor - sentence-transformers| " << worst);
  CHECK(worst <= 1e-4);  // fails on NaN too: the comparison is false

  const fs::path dir = fusedsl::test::test_path(FUSEDSL_MINILM_HLO_DIR);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fd::hlo::export_options o;
  o.form = fd::hlo::export_form::fused;
  o.groups = fd::hlo::group_calls::call;
  write_text(dir / "module.hlo", fd::hlo::to_text(fd::hlo::to_module(program{}, o)));
  // Checkpoint tensors by the encoder's names.
  std::map<std::string, const io::safetensors_tensor*> by_name;
  for (const io::safetensors_tensor& t : file.tensors())
    if (const auto n = fm::bert_checkpoint_name(t.name)) by_name[*n] = &t;
  const auto bindings = fd::hlo::export_bindings(fd::graph::graph_view(program::graph));
  std::string names;
  for (std::size_t n = 0; n < bindings.size(); ++n) {
    const auto& b = bindings[n];
    CAPTURE(b.name);
    names += b.name + "\n";
    const fs::path p = dir / (std::to_string(n) + ".npy");
    if (b.name == fm::bert_ids_name) {
      write_values(p, ids, {B, L});
    } else if (b.name == fm::bert_mask_name) {
      const std::vector<std::int64_t> shape{B, L};
      io::write_npy<bool>(p.string(), std::span<const bool>(mask.get(), std::size_t(B * L)), shape);
    } else {
      REQUIRE(b.kind == fd::graph::op_kind::param);
      const auto it = by_name.find(b.name);
      REQUIRE(it != by_name.end());
      const auto v = file.view(it->second->name);
      REQUIRE(v.dtype == io::safetensors_dtype::f32);
      const auto values = v.as<float>();
      REQUIRE(std::int64_t(values.size()) == b.shape.size());
      const std::vector<std::int64_t> shape = dims_of(b.shape);
      io::write_npy<float>(p.string(), values, shape);
    }
  }
  CHECK(bindings.size() == 2 + w.bound.size());
  write_text(dir / "parameters.txt", names);
  write_values(dir / "out0.npy", out, {B, D});
  write_values(dir / "reference.npy", reference, {B, D});
}
