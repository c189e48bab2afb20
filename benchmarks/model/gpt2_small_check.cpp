// GPT-2 small (models::gpt2_small_config) through models::gpt2_generator against Hugging Face
// transformers' GPT2LMHeadModel, from the files `tests/models/make_gpt2_reference.py gpt2-small
// DIR` writes (random weights, a random prompt, greedy steps with transformers' KV cache): the
// prompt prefilled, then every step fed the reference's token (teacher forcing). Per step: the
// largest logit difference and whether the argmax is the reference's greedy token, which it must
// be wherever the reference's top-2 logit gap exceeds 1e-2.
//
//   gpt2_small_check DIR [--json OUT.json]
//
// Prints a summary; exit 0 when every step's logits are within 1e-3 and every decisive greedy
// token agrees, 1 otherwise, 2 for bad usage or unreadable files.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "fusedsl/io/npy.hpp"
#include "fusedsl/runtime/gpt2_generator.hpp"

namespace fd = fusedsl;
namespace fm = fusedsl::models;

namespace {

using cfg = fm::gpt2_small_config;
constexpr std::int64_t V = cfg::vocab;

std::vector<std::int32_t> read_ids(const std::string& path) {
  const auto v = fd::io::read_npy(path).values<std::int64_t>();
  return {v.begin(), v.end()};
}

// The gap between the largest and the second largest of row[0..V).
double top2_gap(const float* row) {
  double a = -INFINITY, b = -INFINITY;
  for (std::int64_t j = 0; j < V; ++j) {
    const double x = row[j];
    if (x > a)
      b = a, a = x;
    else if (x > b)
      b = x;
  }
  return a - b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--json")) {
    std::cerr << "usage: gpt2_small_check DIR [--json OUT.json]\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    const auto prompt = read_ids(dir + "/prompt_ids.npy");
    const auto ids = read_ids(dir + "/generated_ids.npy");
    const fd::io::npy_array ref = fd::io::read_npy(dir + "/step_logits.npy");
    const std::int64_t steps = std::int64_t(ids.size());
    if (ref.shape != std::vector<std::int64_t>{steps, V}) {
      std::cerr << "gpt2_small_check: step_logits.npy is not [" << steps << ", " << V << "]\n";
      return 2;
    }
    const std::vector<float> want = ref.values<float>();
    const auto file = fd::io::safetensors_file::open(dir + "/model.safetensors");
    auto gen = std::make_unique<fm::gpt2_generator<cfg, 64>>(file);
    std::vector<double> diffs;
    int decisive = 0, decisive_equal = 0, equal = 0;
    double worst = 0, min_gap = INFINITY;
    std::span<const float> logits = gen->prefill(prompt);
    for (std::int64_t k = 0; k < steps; ++k) {
      if (k > 0) logits = gen->step(ids[std::size_t(k - 1)]);
      const float* w = want.data() + k * V;
      double d = 0;
      for (std::int64_t j = 0; j < V; ++j) {
        const double e = std::fabs(double(logits[std::size_t(j)]) - double(w[j]));
        if (!(e <= d)) d = e;  // NaN sticks
      }
      diffs.push_back(d);
      if (!(d <= worst)) worst = d;
      const double gap = top2_gap(w);
      min_gap = std::min(min_gap, gap);
      const bool same = gen->greedy() == ids[std::size_t(k)];
      equal += same;
      if (gap > 1e-2) decisive += 1, decisive_equal += same;
    }
    const bool ok = worst <= 1e-3 && decisive_equal == decisive;
    std::string json =
        "{\"prompt_tokens\": " + std::to_string(prompt.size()) +
        ", \"steps\": " + std::to_string(steps) + ", \"max_abs_diff\": " + std::to_string(worst) +
        ", \"greedy_equal\": " + std::to_string(equal) +
        ", \"decisive_steps\": " + std::to_string(decisive) +
        ", \"decisive_equal\": " + std::to_string(decisive_equal) +
        ", \"min_top2_gap\": " + std::to_string(min_gap) +
        ", \"interpreted_groups\": " + std::to_string(gen->interpreted_groups()) +
        ", \"passed\": " + (ok ? "true" : "false") + ", \"max_abs_diff_per_step\": [";
    for (std::size_t k = 0; k < diffs.size(); ++k) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3g", diffs[k]);
      json += (k ? ", " : "") + std::string(buf);
    }
    json += "]}\n";
    if (argc == 4) std::ofstream(argv[3]) << json;
    std::printf(
        "GPT-2 small against transformers: %zu prompt tokens, %lld teacher-forced steps; largest "
        "logit difference %.3g (<= 1e-3: %s); greedy token equal at %d of %lld steps, at %d of "
        "%d with a top-2 gap above 1e-2\n",
        prompt.size(), static_cast<long long>(steps), worst, worst <= 1e-3 ? "yes" : "no", equal,
        static_cast<long long>(steps), decisive_equal, decisive);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "gpt2_small_check: " << e.what() << "\n";
    return 2;
  }
}
