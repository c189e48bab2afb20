#include "fusedsl/backend/cpu/kernels/threads.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_util.hpp"

namespace k = fusedsl::cpu::kernels;

TEST_CASE("share_of splits n items into contiguous, covering, balanced ranges") {
  for (int count : {1, 2, 3, 5})
    for (std::ptrdiff_t n : {0, 1, 2, 7, 64, 100}) {
      std::ptrdiff_t next = 0;
      for (int t = 0; t < count; ++t) {
        const auto r = k::share_of(n, t, count);
        CHECK(r.begin == next);
        CHECK(r.end - r.begin <= n / count + 1);
        next = r.end;
      }
      CHECK(next == n);
    }
}

TEST_CASE("thread_pool runs every index once per run, repeatedly") {
  k::thread_pool pool(3);
  CHECK(pool.size() == 3);
  for (int rep = 0; rep < 50; ++rep) {
    std::vector<std::atomic<int>> hits(1000);
    k::parallel_for(&pool, 1000, [&](std::ptrdiff_t b, std::ptrdiff_t e, int) {
      for (std::ptrdiff_t i = b; i < e; ++i) hits[std::size_t(i)]++;
    });
    int wrong = 0;
    for (auto& h : hits) wrong += h.load() != 1;
    CHECK(wrong == 0);
  }
}

TEST_CASE("thread_pool rejects a thread count below one") {
  CHECK_THROWS_AS(k::thread_pool(0), std::invalid_argument);
}

TEST_CASE("thread_pool wakes polling and sleeping workers alike") {
  using namespace std::chrono_literals;
  // spin 0 (the default): every run wakes a sleeping worker; 200 us with 1 ms pauses: the
  // worker polls, gives up, sleeps, and is woken; 20 ms: it is still polling.
  for (auto spin : {0us, 200us, 20000us}) {
    k::thread_pool pool(2, spin);
    for (int rep = 0; rep < 20; ++rep) {
      std::atomic<int> calls{0}, second{0};
      pool.run([&](int t, int n) {
        calls++;
        second += t == 1;
        CHECK(n == 2);
      });
      CHECK(calls.load() == 2);
      CHECK(second.load() == 1);
      if (rep % 5 == 4) std::this_thread::sleep_for(1ms);
    }
  }
}

TEST_CASE("thread_pool rejects a negative spin time") {
  CHECK_THROWS_AS(k::thread_pool(2, std::chrono::microseconds(-1)), std::invalid_argument);
}
