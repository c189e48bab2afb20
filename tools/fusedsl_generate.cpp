// fusedsl-generate: text from a GPT-2 checkpoint directory, decoded with the KV cache.
//
//   fusedsl-generate CHECKPOINT_DIR (--prompt TEXT | --prompt-ids "ID ...") [--max-tokens N]
//                    [--temperature T --top-k K --seed S] [--weights f32|int8] [--print-ids]
//
// CHECKPOINT_DIR holds config.json, model.safetensors, vocab.json and merges.txt (Hugging Face's
// GPT-2 files). The shapes are compiled in: config.json must match one of the shapes this build
// carries (the error lists them). The text streams to standard output as it is decoded, never
// splitting a UTF-8 character across writes; standard error gets the speed at the end. Generation
// stops after N tokens (default 32), at <|endoftext|> (not printed) when the vocabulary has it, or
// when the context holds n_positions tokens. --temperature 0 (the default) decodes greedily;
// otherwise the next token is drawn from softmax(logits / T) over the K most likely ones (--top-k
// 0: all), with std::mt19937_64 seeded by S (default 0): the same seed gives the same tokens.
// --weights int8 runs the same model with int8 weights: every linear layer and the tied embedding
// quantized per output channel when the checkpoint is loaded (docs/quantization.md). With
// --print-ids the last line of standard output is the generated ids, space-separated.
// Exit status: 0 on success, 1 on an error (its message on standard error), 2 on bad usage.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli_number.hpp"
#include "fusedsl/io/safetensors.hpp"
#include "fusedsl/text/bpe.hpp"
#include "gpt2_variants.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::tools;
using json = nlohmann::json;

namespace {

constexpr const char* usage =
    "usage: fusedsl-generate CHECKPOINT_DIR (--prompt TEXT | --prompt-ids \"ID ...\")\n"
    "                        [--max-tokens N] [--temperature T] [--top-k K] [--seed S]\n"
    "                        [--weights f32|int8] [--print-ids]\n"
    "  CHECKPOINT_DIR   config.json, model.safetensors, vocab.json, merges.txt of a GPT-2\n"
    "  --prompt TEXT    the text to continue\n"
    "  --prompt-ids IDS the prompt as token ids, separated by spaces or commas\n"
    "  --max-tokens N   tokens to generate at most (default 32)\n"
    "  --temperature T  0: greedy (default); > 0: sample from softmax(logits / T)\n"
    "  --top-k K        sample among the K most likely tokens (default 0: all)\n"
    "  --seed S         the sampler's seed (std::mt19937_64; default 0)\n"
    "  --weights W      f32 (default), or int8: the linear layers and the tied embedding\n"
    "                   quantized per output channel when the checkpoint is loaded\n"
    "  --print-ids      end with a line of the generated token ids\n";

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct tool_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const std::vector<const ft::gpt2_variant*>& variants() {
  static const std::vector<const ft::gpt2_variant*> v{
      &ft::gpt2_variant_small(), &ft::gpt2_variant_medium(), &ft::gpt2_variant_tiny()};
  return v;
}

json read_json(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw tool_error("cannot open '" + file.string() + "'");
  try {
    return json::parse(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const json::exception& e) {
    throw tool_error("'" + file.string() + "' is not valid JSON: " + e.what());
  }
}

std::int64_t int_field(const json& j, const char* key, const std::filesystem::path& file) {
  if (!j.contains(key) || !j[key].is_number_integer())
    throw tool_error("'" + file.string() + "': \"" + key + "\" must be an integer");
  return j[key].get<std::int64_t>();
}

std::string describe(const ft::gpt2_variant& v) {
  return std::string(v.name) + ": n_layer " + std::to_string(v.layers) + ", n_embd " +
         std::to_string(v.d) + ", n_head " + std::to_string(v.heads) + ", vocab_size " +
         std::to_string(v.vocab) + ", n_positions " + std::to_string(v.positions);
}

// The compiled shape config.json describes.
const ft::gpt2_variant& pick_variant(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "config.json";
  const json c = read_json(file);
  if (c.value("model_type", std::string("gpt2")) != "gpt2")
    throw tool_error("'" + file.string() + "': model_type is not gpt2");
  if (c.value("activation_function", std::string("gelu_new")) != "gelu_new")
    throw tool_error("'" + file.string() + "': activation_function must be gelu_new");
  if (std::fabs(c.value("layer_norm_epsilon", 1e-5) - 1e-5) > 1e-12)
    throw tool_error("'" + file.string() + "': layer_norm_epsilon must be 1e-5");
  const std::int64_t layers = int_field(c, "n_layer", file), d = int_field(c, "n_embd", file),
                     heads = int_field(c, "n_head", file), vocab = int_field(c, "vocab_size", file),
                     positions = int_field(c, "n_positions", file);
  const std::int64_t inner =
      c.contains("n_inner") && !c["n_inner"].is_null() ? int_field(c, "n_inner", file) : 4 * d;
  for (const ft::gpt2_variant* v : variants())
    if (v->layers == layers && v->d == d && v->heads == heads && v->vocab == vocab &&
        v->positions == positions && v->inner == inner)
      return *v;
  std::string msg = "'" + file.string() + "' describes n_layer " + std::to_string(layers) +
                    ", n_embd " + std::to_string(d) + ", n_head " + std::to_string(heads) +
                    ", vocab_size " + std::to_string(vocab) + ", n_positions " +
                    std::to_string(positions) + ", n_inner " + std::to_string(inner) +
                    "; this build carries:";
  for (const ft::gpt2_variant* v : variants()) msg += "\n  " + describe(*v);
  throw tool_error(msg);
}

long parse_int(const std::string& flag, const std::string& v, long lo) {
  const std::optional<long long> n = fusedsl::tools::parse_whole_integer(v);
  if (!n || *n < lo)
    throw usage_error(flag + " takes an integer >= " + std::to_string(lo) + ", not '" + v + "'");
  return long(*n);
}

double parse_real(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  double x = -1;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || !(x >= 0) || !std::isfinite(x))
    throw usage_error(flag + " takes a finite number >= 0, not '" + v + "'");
  return x;
}

// "1 2 3" or "1,2,3": ids >= 0 (the model checks them against its vocabulary).
std::vector<std::int32_t> parse_ids(const std::string& flag, const std::string& v) {
  std::vector<std::int32_t> ids;
  std::string item;
  for (std::size_t i = 0; i <= v.size(); ++i) {
    if (i == v.size() || v[i] == ' ' || v[i] == ',') {
      if (!item.empty()) {
        const long id = parse_int(flag, item, 0);
        if (id > 2147483647) throw usage_error(flag + ": the id " + item + " is too large");
        ids.push_back(std::int32_t(id));
      }
      item.clear();
    } else {
      item += v[i];
    }
  }
  return ids;
}

// A uniform double in [0, 1) from 53 bits of the generator (the same on every platform).
double uniform(std::mt19937_64& rng) {
  return double(rng() >> 11) * 0x1.0p-53;
}

// The next token: softmax(logits / t) over the k most likely (ties by lower id), drawn with rng.
std::int32_t sample(std::span<const float> logits, double t, long k, std::mt19937_64& rng) {
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t keep = k == 0 ? order.size() : std::min(order.size(), std::size_t(k));
  std::partial_sort(order.begin(), order.begin() + long(keep), order.end(),
                    [&](std::int32_t a, std::int32_t b) {
                      return logits[std::size_t(a)] > logits[std::size_t(b)] ||
                             (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
                    });
  const double top = logits[std::size_t(order[0])];
  std::vector<double> w(keep);
  double sum = 0;
  for (std::size_t i = 0; i < keep; ++i)
    sum += w[i] = std::exp((double(logits[std::size_t(order[i])]) - top) / t);
  double u = uniform(rng) * sum;
  for (std::size_t i = 0; i < keep; ++i) {
    if (u < w[i]) return order[i];
    u -= w[i];
  }
  return order[keep - 1];
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::filesystem::path dir;
  std::string prompt;
  std::vector<std::int32_t> prompt_ids;
  bool have_prompt = false, have_ids = false, print_ids = false, int8 = false;
  long max_tokens = 32, top_k = 0;
  double temperature = 0;
  std::uint64_t seed = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw usage_error(a + " needs a value");
      return args[++i];
    };
    if (a == "--prompt")
      prompt = value(), have_prompt = true;
    else if (a == "--prompt-ids")
      prompt_ids = parse_ids(a, value()), have_ids = true;
    else if (a == "--max-tokens")
      max_tokens = parse_int(a, value(), 1);
    else if (a == "--temperature")
      temperature = parse_real(a, value());
    else if (a == "--top-k")
      top_k = parse_int(a, value(), 0);
    else if (a == "--seed")
      seed = std::uint64_t(parse_int(a, value(), 0));
    else if (a == "--print-ids")
      print_ids = true;
    else if (a == "--weights") {
      const std::string& w = value();
      if (w != "f32" && w != "int8")
        throw usage_error("--weights takes f32 or int8, not '" + w + "'");
      int8 = w == "int8";
    } else if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    } else if (a.starts_with("--"))
      throw usage_error("unknown option " + a);
    else if (dir.empty())
      dir = a;
    else
      throw usage_error("one checkpoint directory, not two ('" + a + "')");
  }
  if (dir.empty()) throw usage_error("no checkpoint directory");
  if (have_prompt == have_ids) throw usage_error("give --prompt or --prompt-ids (one of them)");

  const ft::gpt2_variant& variant = pick_variant(dir);
  const json vocab = read_json(dir / "vocab.json");
  fd::text::bpe_options options;
  if (!vocab.is_object() || !vocab.contains("<|endoftext|>")) options.special_tokens.clear();
  const auto tokenizer = fd::text::bpe_tokenizer::from_directory(dir, options);
  const std::int32_t eos =
      options.special_tokens.empty() ? -1 : tokenizer.special_id("<|endoftext|>");
  const auto file = fd::io::safetensors_file::open(dir / "model.safetensors");
  const auto model = int8 ? variant.make_int8(file) : variant.make(file);

  const std::vector<std::int32_t> ids = have_ids ? prompt_ids : tokenizer.encode(prompt);
  if (ids.empty()) throw tool_error("the prompt is empty: it encodes to no tokens");
  std::mt19937_64 rng(seed);
  fd::text::bpe_stream_decoder out(tokenizer);
  std::vector<std::int32_t> generated;
  const auto t0 = std::chrono::steady_clock::now();
  std::span<const float> logits = model->prefill(ids);
  while (true) {
    const std::int32_t next =
        temperature == 0 ? model->greedy() : sample(logits, temperature, top_k, rng);
    if (next == eos) break;
    generated.push_back(next);
    const std::string piece = out.push(next);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (long(generated.size()) >= max_tokens || model->length() >= variant.positions) break;
    logits = model->step(next);
  }
  const std::string rest = out.finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << '\n';
  if (print_ids) {
    for (std::size_t i = 0; i < generated.size(); ++i) std::cout << (i ? " " : "") << generated[i];
    std::cout << '\n';
  }
  std::cout.flush();
  std::fprintf(stderr, "%zu tokens (prompt %zu) in %.3f s: %.1f tokens/s [%s]\n", generated.size(),
               ids.size(), s, double(generated.size()) / s, std::string(variant.name).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "fusedsl-generate: %s\n%s", e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusedsl-generate: %s\n", e.what());
    return 1;
  }
}
