#pragma once
// The small GPT-2 reference (tests/models/data/gpt2_small_test, FUSEDSL_GPT2_SMALL_TEST_DATA):
// its shape and readers of its files, shared by the GPT-2 model tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "../../common/test_paths.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/models/gpt2.hpp"

namespace gpt2_reference {

inline const std::string dir = fusedsl::test::test_path(FUSEDSL_GPT2_SMALL_TEST_DATA);

// 2 layers, 64 wide, 4 heads, vocab 512, 128 positions.
using small_cfg = fusedsl::models::gpt2_config<2, 64, 4, 512, 128>;
inline constexpr std::int64_t V = small_cfg::vocab;

// A [rows, V] f32 array of the reference.
inline std::vector<float> read_floats(const std::string& name, std::int64_t rows) {
  const fusedsl::io::npy_array a = fusedsl::io::read_npy(dir + "/" + name);
  REQUIRE(a.shape == std::vector<std::int64_t>{rows, V});
  return a.values<float>();
}
// Token ids (saved as i64).
inline std::vector<std::int32_t> read_ids(const std::string& name) {
  const auto v = fusedsl::io::read_npy(dir + "/" + name).values<std::int64_t>();
  return {v.begin(), v.end()};
}
// batch.json: prompts of several lengths and their greedy tokens.
inline nlohmann::json read_batch() {
  std::ifstream in(dir + "/batch.json", std::ios::binary);
  REQUIRE(in);
  return nlohmann::json::parse(std::istreambuf_iterator<char>(in),
                               std::istreambuf_iterator<char>());
}

// The largest |a - b|; NaN when either holds a NaN or an infinity where the other does not.
inline double max_diff(std::span<const float> a, const float* b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= m)) m = d;  // NaN sticks
  }
  return m;
}

// The small model with a bf16 KV cache (gpt2_config::with_cache).
using bf16_cfg = small_cfg::with_cache<fusedsl::bf16>;

// A bf16 key or value is off by at most 2^-9 of itself; with a bf16 cache the logits stay within
// 2^-6 of the largest logit of their row (measured: at most 5.6e-3 over the 64 steps; a wrong key
// or value read moves them by the logits' own size).
inline constexpr double bf16_tolerance = 0x1p-6;

// The largest |x| of a row.
inline double largest(std::span<const float> row) {
  double m = 0;
  for (float x : row) m = std::max(m, double(std::fabs(x)));
  return m;
}

}  // namespace gpt2_reference
