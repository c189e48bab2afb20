#pragma once
// A small fixed thread pool. Work is split statically (thread t always gets the same index
// range for the same sizes), and every kernel computes each output element on one thread in a
// fixed order, so results are bitwise identical from run to run and for any thread count.
// run() does not allocate: the task is passed as a pointer to the caller's callable.
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fusedsl::cpu::kernels {

class thread_pool {
 public:
  // `threads` >= 1 threads in all: the caller plus threads - 1 workers started here.
  explicit thread_pool(int threads) : size_(threads) {
    if (threads < 1)
      throw std::invalid_argument("thread_pool: thread count must be >= 1, got " +
                                  std::to_string(threads));
    workers_.reserve(std::size_t(threads - 1));
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { work(t); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    start_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return size_; }

  // Calls f(thread_index, thread_count) once on each thread (index 0 on the caller) and
  // returns when all have finished. Not reentrant: one run at a time per pool.
  template <class F>
  void run(F&& f) {
    if (size_ == 1) {
      f(0, 1);
      return;
    }
    using fn_t = std::remove_reference_t<F>;
    {
      std::lock_guard lock(mutex_);
      task_ = [](void* ctx, int t, int n) { (*static_cast<fn_t*>(ctx))(t, n); };
      ctx_ = const_cast<void*>(static_cast<const void*>(&f));
      pending_ = size_ - 1;
      ++generation_;
    }
    start_.notify_all();
    f(0, size_);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  void work(int index) {
    unsigned long seen = 0;
    for (;;) {
      void (*task)(void*, int, int);
      void* ctx;
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
        task = task_;
        ctx = ctx_;
      }
      task(ctx, index, size_);
      {
        std::lock_guard lock(mutex_);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  int size_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  unsigned long generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
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
