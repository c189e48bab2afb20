// The fusedsl peer of the embedding benchmark (embed.py): sentence_embedder on all-MiniLM-L6-v2,
// tokenisation included.
//
//   race_embed_fusedsl --fma-peak
//       the start-up FMA-chain peak of the core it runs on (fma_peak.hpp)
//   race_embed_fusedsl --model DIR --sentences FILE --output FILE.npy [--threads N] [--spin-us U]
//                      [--call-cost C]
//       embeds the sentences (one per line) once in calls of 32 (on cpu::threads{N, U us}: U > 0
//       is a pool that polls U microseconds for work; C: embedder_options::call_cost_tokens,
//       default the embedder's), writes the embeddings, replies
//       ready, then serves the driver on stdin: `run B K W` (W untimed passes over every sentence
//       in calls of B sentences, then K timed ones) and `quit`.
//
// Every reply is one line on stdout starting with "@@race " and holding a JSON object; times are
// wall-clock seconds per pass (CLOCK_MONOTONIC). Errors go to stderr, with exit status 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/runtime/sentence_embedder.hpp"
#include "minilm_l6.hpp"

namespace fd = fusedsl;
namespace models = fusedsl::models;

namespace {

void reply(const std::string& json) {
  std::printf("@@race %s\n", json.c_str());
  std::fflush(stdout);
}

// VmHWM (peak resident set) of this process, in bytes.
long long peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw fd::error("cannot open the sentences file '" + path + "'");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(f, line)) lines.push_back(line);
  return lines;
}

// One pass over every sentence in calls of `batch`; the embeddings of the pass.
std::vector<float> pass(models::sentence_embedder& e, const std::vector<std::string>& s,
                        std::size_t batch) {
  std::vector<float> out;
  out.reserve(s.size() * std::size_t(e.dimension()));
  for (std::size_t at = 0; at < s.size(); at += batch) {
    const std::size_t n = std::min(batch, s.size() - at);
    const std::vector<float> v = e.embed(std::span<const std::string>(s.data() + at, n));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

int serve(const std::map<std::string, std::string>& opt) {
  const auto get = [&](const std::string& k) {
    const auto it = opt.find(k);
    if (it == opt.end()) throw fd::error("--" + k + " is required");
    return it->second;
  };
  const int threads = opt.count("threads") ? std::stoi(opt.at("threads")) : 1;
  const long spin_us = opt.count("spin-us") ? std::stol(opt.at("spin-us")) : 0;
  const double call_cost = opt.count("call-cost") ? std::stod(opt.at("call-cost")) : -1.0;
  const std::vector<std::string> sentences = read_lines(get("sentences"));
  models::sentence_embedder e(
      get("model"), {&models::minilm_l6_variant(), 1},
      {.threads = fd::cpu::threads{threads, std::chrono::microseconds(spin_us)},
       .max_batch = 32,
       .call_cost_tokens = call_cost,
       .warn = {}});
  const std::vector<float> emb = pass(e, sentences, 32);
  const std::vector<std::int64_t> shape = {std::int64_t(sentences.size()), e.dimension()};
  fd::io::write_npy<float>(get("output"), emb, shape);
  std::ostringstream r;
  r << "{\"ready\": true, \"threads\": " << threads << ", \"spin_us\": " << spin_us
    << ", \"sentences\": " << sentences.size()
    << ", \"tokens\": " << e.stats().tokens << ", \"rss_bytes\": " << peak_rss_bytes() << "}";
  reply(r.str());
  std::string cmd;
  while (std::cin >> cmd) {
    if (cmd == "quit") break;
    if (cmd != "run") throw fd::error("unknown request '" + cmd + "'");
    std::size_t batch = 0, k = 0, warm = 0;
    std::cin >> batch >> k >> warm;
    if (batch < 1 || k < 1) throw fd::error("run B K W: B and K must be positive");
    // Untimed: every bucket the passes need is made and its weights packed.
    for (std::size_t i = 0; i < warm; ++i) pass(e, sentences, batch);
    const models::embedder_stats before = e.stats();
    std::ostringstream t;
    t << "{\"times\": [";
    for (std::size_t i = 0; i < k; ++i) {
      const double t0 = fusedsl_bench::wall_seconds();
      pass(e, sentences, batch);
      t << (i ? ", " : "") << fusedsl_bench::wall_seconds() - t0;
    }
    const models::embedder_stats after = e.stats();
    t << "], \"padded_tokens_per_pass\": "
      << (after.padded_tokens - before.padded_tokens) / std::int64_t(k)
      << ", \"encoder_calls_per_pass\": "
      << (after.encoder_calls - before.encoder_calls) / std::int64_t(k) << "}";
    reply(t.str());
  }
  reply("{\"peak_rss_bytes\": " + std::to_string(peak_rss_bytes()) + "}");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::map<std::string, std::string> opt;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--fma-peak") {
        std::ostringstream r;
        r << "{\"fma_peak_flops\": " << fusedsl_bench::measure_fma_peak() << "}";
        reply(r.str());
        return 0;
      }
      if (a.rfind("--", 0) != 0 || i + 1 >= argc)
        throw fd::error("unknown argument " + a + " (see the top of embed_peer.cpp)");
      opt[a.substr(2)] = argv[++i];
    }
    return serve(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "race_embed_fusedsl: %s\n", e.what());
    return 1;
  }
}
