// The GPT-2 decode step exported as HLO (one module per program: the embedding, the layer, the
// head), for XLA (tests/models/gpt2/run_decode_xla.py) and the TPU-style backend
// (tests/models/gpt2/run_decode_tpu.py):
//   <dir>/tiny/<k>_<program>/   the small reference model's step at position 20 after a 20-token
//                               prompt: module.hlo, <N>.npy for entry parameter N (the
//                               checkpoint's weights, the caches after the prompt, the token and
//                               position, the hidden state from the program before), out<N>.npy
//                               the CPU executor's outputs, parameters.txt the parameters' names
//   <dir>/tiny/reference/       transformers' logits for that step and its greedy token
//   <dir>/small/<program>/      GPT-2 small's programs (module.hlo only: the TPU-style backend
//                               costs them on random values), and bytes.txt: the weight and
//                               cache bytes one step must read
// The case directory is FUSEDSL_GPT2_DECODE_HLO_DIR.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../../common/test_paths.hpp"
#include "fusedsl/export/export.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "fusedsl/runtime/gpt2_generator.hpp"
#include "reference.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;
namespace fs = std::filesystem;
using namespace gpt2_reference;

namespace {

const fs::path out_dir = fusedsl::test::test_path(FUSEDSL_GPT2_DECODE_HLO_DIR);

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  REQUIRE(f);
  f << s;
  REQUIRE(f);
}

std::vector<std::int64_t> dims_of(const fd::dims& d) {
  std::vector<std::int64_t> v;
  for (int i = 0; i < d.rank; ++i) v.push_back(d[i]);
  return v;
}

template <class T>
void write_values(const fs::path& p, const T* data, const fd::dims& d) {
  const auto shape = dims_of(d);
  fd::io::write_npy<T>(p.string(), std::span<const T>(data, std::size_t(d.size())), shape);
}

fd::hlo::export_options fused_form() {
  fd::hlo::export_options o;
  o.form = fd::hlo::export_form::fused;
  o.groups = fd::hlo::group_calls::call;
  return o;
}

// Writes program P's module and, when `file` is given, its entry parameters' values (params
// from `file` under `prefix`, the rest from `values` by name) and its outputs.
template <class P>
void write_program(const fs::path& d, const fd::io::safetensors_file* file = nullptr,
                   const std::string& prefix = "",
                   const std::vector<std::pair<std::string, const void*>>& values = {},
                   const std::vector<const void*>& outputs = {}) {
  fs::create_directories(d);
  write_text(d / "module.hlo", fd::hlo::to_text(fd::hlo::to_module(P{}, fused_form())));
  if (file == nullptr) return;
  const fd::graph::graph_view g(P::graph);
  const auto bs = fd::hlo::export_bindings(g);
  std::string names;
  for (std::size_t n = 0; n < bs.size(); ++n) {
    const auto& b = bs[n];
    names += b.name + "\n";
    const fs::path p = d / (std::to_string(n) + ".npy");
    if (b.kind == fd::graph::op_kind::param) {
      std::string key = prefix + b.name;
      if (!file->contains(key)) key = "transformer." + key;
      const auto v = file->view(key);
      REQUIRE(v.dtype == fd::io::safetensors_dtype::f32);
      write_values(p, v.as<float>().data(), b.shape);
      continue;
    }
    const void* data = nullptr;
    for (const auto& [name, ptr] : values)
      if (name == b.name) data = ptr;
    REQUIRE_MESSAGE(data != nullptr, "no value for " << b.name);
    if (b.type == fd::dtype::i32)
      write_values(p, static_cast<const std::int32_t*>(data), b.shape);
    else
      write_values(p, static_cast<const float*>(data), b.shape);
  }
  write_text(d / "parameters.txt", names);
  REQUIRE(int(outputs.size()) == P::graph.n_outputs);
  for (int k = 0; k < P::graph.n_outputs; ++k) {
    const auto& n = P::graph[P::graph.outputs[std::size_t(k)]];
    const fs::path p = d / ("out" + std::to_string(k) + ".npy");
    if (n.type == fd::dtype::i32)
      write_values(p, static_cast<const std::int32_t*>(outputs[std::size_t(k)]), n.shape);
    else
      write_values(p, static_cast<const float*>(outputs[std::size_t(k)]), n.shape);
  }
}

}  // namespace

TEST_CASE("the small reference model's decode step: modules, inputs and the executor's outputs") {
  using embed_p = fm::gpt2_decode_embed_program<small_cfg>;
  using layer_p = fm::gpt2_decode_layer_program<small_cfg>;
  using head_p = fm::gpt2_head_program<small_cfg, 1>;
  constexpr std::int64_t D = small_cfg::d;
  const auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
  const auto prompt = read_ids("prompt_ids.npy");
  const auto ids = read_ids("generated_ids.npy");
  const auto step_logits = read_floats("step_logits.npy", 64);
  // The prompt's caches from the generator, then one step (the token transformers chose after
  // the prompt, at position 20) through executors of the three programs.
  fm::gpt2_generator<small_cfg, 32> gen(file);
  gen.prefill(prompt);
  const fs::path tiny = out_dir / "tiny";
  fs::remove_all(tiny);

  fd::tensor<std::int32_t, 1> token;
  fd::tensor<std::int32_t> pos;
  token[0] = ids[0];
  pos() = 20;
  std::vector<fd::tensor<float, 1, D>> hidden(small_cfg::layers + 1);

  fd::cpu::executor<embed_p> embed{embed_p{}};
  fm::detail::bind_gpt2_weights(embed, file, "", "the embeddings");
  embed.bind("input_ids", token);
  embed.bind("pos", pos);
  embed.bind_output(0, hidden[0]);
  embed.run();
  write_program<embed_p>(tiny / "0_embed", &file, "",
                         {{"input_ids", token.data()}, {"pos", pos.data()}}, {hidden[0].data()});

  for (int i = 0; i < small_cfg::layers; ++i) {
    fd::cpu::executor<layer_p> ex{layer_p{}};
    const std::string prefix = "h." + std::to_string(i) + ".";
    fm::detail::bind_gpt2_weights(ex, file, prefix, "layer " + std::to_string(i));
    for (const bool values : {false, true}) {
      const fd::tensor_ref s = ex.state(values ? "attn.v_cache" : "attn.k_cache");
      std::memcpy(s.data, gen.cache(i, values), s.bytes());
    }
    ex.bind("x", hidden[std::size_t(i)]);
    ex.bind("pos", pos);
    ex.bind_output(fm::gpt2_outputs::hidden, hidden[std::size_t(i + 1)]);
    const fs::path d = tiny / (std::to_string(i + 1) + "_layer" + std::to_string(i));
    // The caches before the step are its inputs; after it, its outputs.
    const fd::tensor_ref k = ex.state("attn.k_cache"), v = ex.state("attn.v_cache");
    const std::vector<float> k_before(k.as<float>(), k.as<float>() + k.shape.size()),
        v_before(v.as<float>(), v.as<float>() + v.shape.size());
    ex.run();
    write_program<layer_p>(d, &file, prefix,
                           {{"x", hidden[std::size_t(i)].data()},
                            {"pos", pos.data()},
                            {"attn.k_cache", k_before.data()},
                            {"attn.v_cache", v_before.data()}},
                           {k.data, v.data, hidden[std::size_t(i + 1)].data()});
  }

  fd::cpu::executor<head_p> head{head_p{}};
  fm::detail::bind_gpt2_weights(head, file, "", "the LM head");
  fd::tensor<float, 1, small_cfg::vocab> logits;
  fd::tensor<std::int32_t, 1> argmax;
  head.bind("h", hidden.back());
  head.bind_output(fm::gpt2_outputs::logits, logits);
  head.bind_output(fm::gpt2_outputs::argmax, argmax);
  head.run();
  const std::string head_dir = std::to_string(small_cfg::layers + 1) + "_head";
  write_program<head_p>(tiny / head_dir, &file, "", {{"h", hidden.back().data()}},
                        {logits.data(), argmax.data()});

  // The executors' step is transformers' step 1 (logits after the prompt and ids[0]).
  CHECK(max_diff({logits.data(), std::size_t(V)}, step_logits.data() + V) <= 1e-3);
  CHECK(argmax[0] == ids[1]);
  fs::create_directories(tiny / "reference");
  write_values(tiny / "reference" / "logits.npy", step_logits.data() + V, fd::make_dims(1, V));
  write_values(tiny / "reference" / "token.npy", &ids[1], fd::make_dims(1));
}

TEST_CASE("GPT-2 small's decode programs as HLO modules, with the bytes a step must read") {
  using cfg = fm::gpt2_small_config;
  const fs::path small = out_dir / "small";
  fs::remove_all(small);
  write_program<fm::gpt2_decode_embed_program<cfg>>(small / "embed");
  write_program<fm::gpt2_decode_layer_program<cfg>>(small / "layer");
  write_program<fm::gpt2_head_program<cfg, 1>>(small / "head");
  // The HLO step reads each layer's whole cache (static shapes: attention over all n_positions
  // rows, the rows past pos masked), so its bytes count the capacity.
  const double weights = cfg::weight_bytes();
  const double cache = cfg::cache_bytes_per_position() * double(cfg::positions);
  write_text(small / "bytes.txt", "layers " + std::to_string(cfg::layers) + "\nweights " +
                                      std::to_string(std::int64_t(weights)) + "\ncache " +
                                      std::to_string(std::int64_t(cache)) + "\n");
  CHECK(fs::exists(small / "layer" / "module.hlo"));
}
