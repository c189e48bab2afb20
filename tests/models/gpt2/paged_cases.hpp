#pragma once
// The paged decoder's runs against the small GPT-2 reference (tests/models/data/gpt2_small_test),
// shared by the f32-page and bf16-page tests: 64 teacher-forced steps through scattered pages, and
// four sequences joining and leaving a continuous batch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fusedsl/runtime/gpt2_paged.hpp"
#include "reference.hpp"

namespace gpt2_reference {

// The pages of the teacher-forced run: out of order and far apart; 20 + 63 positions need 11
// pages of 8.
inline const std::vector<std::int32_t> scattered_pages{39, 3, 17, 0, 25, 8, 31, 12, 2, 36, 21};

// The reference prompt prefilled into scattered_pages, then 63 steps fed transformers' tokens:
// each step's logits within tolerance(row) of transformers' row (max |difference|), the greedy
// token transformers'. Returns the largest difference over tolerance(row).
template <class Decoder, class Tolerance>
double check_teacher_forced(Decoder& dec, Tolerance tolerance) {
  const auto prompt = read_ids("prompt_ids.npy");
  const auto ids = read_ids("generated_ids.npy");
  const auto step_logits = read_floats("step_logits.npy", 64);
  auto row = [&](int k) { return std::span<const float>(step_logits.data() + k * V, V); };
  double worst = max_diff(dec.prefill(prompt, scattered_pages), row(0).data()) / tolerance(row(0));
  CHECK(worst <= 1);
  CHECK(dec.prefill_greedy() == ids[0]);
  for (int k = 1; k < 64; ++k) {
    const typename Decoder::row r{ids[std::size_t(k - 1)], 20 + k - 1, scattered_pages};
    dec.step(std::span(&r, 1));
    const double d = max_diff(dec.logits(0), row(k).data()) / tolerance(row(k));
    CHECK_MESSAGE(d <= 1, "step " << k);
    worst = std::max(worst, d);
    CHECK_MESSAGE(dec.greedy(0) == ids[std::size_t(k)], "step " << k);
  }
  CHECK(dec.interpreted_groups() == 0);
  return worst;
}

// batch.json's four prompts through a continuous batch of 4 (a pool of 40 pages): each sequence
// generates transformers' greedy tokens; 0 and 1 start together, 2 joins after 5 steps, 3 after
// 12; a sequence leaves when it has its tokens, and its pages go to later ones. Sequence 1 stops
// early (after 20 tokens); the pool hands out the pages freed last first, so the next page any
// sequence enters is one that sequence 1 held.
template <class Batch>
void check_continuous_batch(Batch& cb) {
  const auto b = read_batch();
  const std::size_t n = b["prompts"].size();
  REQUIRE(n == 4);
  std::vector<std::vector<std::int32_t>> prompts, want, got(n);
  for (std::size_t s = 0; s < n; ++s) {
    prompts.push_back(b["prompts"][s].get<std::vector<std::int32_t>>());
    want.push_back(b["generated"][s].get<std::vector<std::int32_t>>());
  }
  const std::vector<std::size_t> limit{want[0].size(), 20, want[2].size(), want[3].size()};
  std::vector<int> id(n, -1);
  std::vector<bool> done(n, false);
  auto start = [&](std::size_t s) {
    id[s] = cb.join(prompts[s]);
    got[s].push_back(cb.greedy(id[s]));
  };
  start(0);
  start(1);
  for (int step = 0; std::find(done.begin(), done.end(), false) != done.end(); ++step) {
    if (step == 5) start(2);
    if (step == 12) start(3);
    std::vector<typename Batch::feed> feeds;
    for (std::size_t s = 0; s < n; ++s) {
      if (id[s] < 0 || done[s]) continue;
      if (got[s].size() == limit[s]) {
        cb.leave(id[s]);
        done[s] = true;
        continue;
      }
      feeds.push_back({id[s], got[s].back()});
    }
    if (feeds.empty()) continue;
    cb.step(feeds);
    for (const typename Batch::feed& f : feeds)
      for (std::size_t s = 0; s < n; ++s)
        if (id[s] == f.sequence) got[s].push_back(cb.greedy(f.sequence));
  }
  for (std::size_t s = 0; s < n; ++s) {
    const std::vector<std::int32_t> expect(want[s].begin(),
                                           want[s].begin() + std::ptrdiff_t(limit[s]));
    CHECK_MESSAGE(got[s] == expect,
                  "sequence " << s << " (" << prompts[s].size() << "-token prompt)");
  }
  CHECK(cb.sequences() == 0);
  CHECK(cb.free_pages() == 40);  // every page back in the pool
  CHECK(cb.interpreted_groups() == 0);
}

}  // namespace gpt2_reference
