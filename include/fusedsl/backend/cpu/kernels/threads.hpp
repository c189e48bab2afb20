#pragma once
// A small fixed thread pool. Work is split statically (thread t always gets the same index
// range for the same sizes), and every kernel computes each output element on one thread in a
// fixed order, so results are bitwise identical from run to run and for any thread count.
// run() does not allocate: the task is passed as a pointer to the caller's callable.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace fusedsl::cpu::kernels {

class thread_pool {
 public:
  // How long an idle thread polls for the next run (and the caller for the workers' end) before
  // it sleeps on a condition variable. Waking a sleeping worker costs far more than polling, but
  // a polling thread holds its CPU: on cores shared with other processes, polling makes models
  // slower, on cores of their own faster (docs/performance.md, "Threads"). So the default is not
  // to poll; OpenMP's KMP_BLOCKTIME is the same trade-off.
  static constexpr std::chrono::microseconds default_spin{0};

  // `threads` >= 1 threads in all: the caller plus threads - 1 workers started here.
  explicit thread_pool(int threads, std::chrono::microseconds spin = default_spin)
      : size_(threads), spin_(spin) {
    if (threads < 1)
      throw std::invalid_argument("thread_pool: thread count must be >= 1, got " +
                                  std::to_string(threads));
    if (spin.count() < 0)
      throw std::invalid_argument("thread_pool: spin time must be >= 0, got " +
                                  std::to_string(spin.count()) + " us");
    workers_.reserve(std::size_t(threads - 1));
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { work(t); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stop_.store(true, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    start_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return size_; }
  std::chrono::microseconds spin() const { return spin_; }

  // Calls f(thread_index, thread_count) once on each thread (index 0 on the caller) and
  // returns when all have finished. Not reentrant: one run at a time per pool.
  template <class F>
  void run(F&& f) {
    if (size_ == 1) {
      f(0, 1);
      return;
    }
    using fn_t = std::remove_reference_t<F>;
    task_ = [](void* ctx, int t, int n) { (*static_cast<fn_t*>(ctx))(t, n); };
    ctx_ = const_cast<void*>(static_cast<const void*>(&f));
    pending_.store(size_ - 1, std::memory_order_relaxed);
    {
      // Under the lock, so a worker between its last poll and its sleep cannot miss the change.
      std::lock_guard lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);  // publishes task_, ctx_, pending_
    }
    start_.notify_all();
    f(0, size_);
    if (!poll([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    }
  }

 private:
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
  }

  // Polls `ready` for up to spin_; true as soon as it holds.
  template <class Ready>
  bool poll(const Ready& ready) const {
    if (ready()) return true;
    if (spin_.count() == 0) return false;
    const auto until = std::chrono::steady_clock::now() + spin_;
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (ready()) return true;
        pause();
      }
      if (std::chrono::steady_clock::now() >= until) return ready();
    }
  }

  void work(int index) {
    unsigned long seen = 0;
    for (;;) {
      auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!poll(fresh)) {
        std::unique_lock lock(mutex_);
        start_.wait(lock, fresh);
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_relaxed)) return;
      task_(ctx_, index, size_);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mutex_);  // the caller may be about to sleep on done_
        done_.notify_one();
      }
    }
  }

  int size_;
  std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::atomic<unsigned long> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  void (*task_)(void*, int, int) = nullptr;
  void* ctx_ = nullptr;
};

// The contiguous share [begin, end) of `n` items that thread `t` of `count` takes.
struct index_range {
  std::ptrdiff_t begin, end;
};
constexpr index_range share_of(std::ptrdiff_t n, int t, int count) {
  const std::ptrdiff_t base = n / count, extra = n % count;
  const std::ptrdiff_t begin = t * base + (t < extra ? t : extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

// f(begin, end, thread_index) over a static split of [0, n); runs inline when pool is null.
template <class F>
void parallel_for(thread_pool* pool, std::ptrdiff_t n, F&& f) {
  if (pool == nullptr || pool->size() == 1 || n <= 1) {
    f(std::ptrdiff_t(0), n, 0);
    return;
  }
  pool->run([&](int t, int count) {
    const index_range r = share_of(n, t, count);
    if (r.begin < r.end) f(r.begin, r.end, t);
  });
}

}  // namespace fusedsl::cpu::kernels
