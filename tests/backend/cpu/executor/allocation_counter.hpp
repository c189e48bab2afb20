#pragma once
// Counts every global operator new of the test program (include in exactly one translation unit
// of it). The replacements pair malloc with free, which GCC cannot see.
#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace fusedsl::test {
inline std::atomic<long> allocations{0};
}  // namespace fusedsl::test

void* operator new(std::size_t n) {
  fusedsl::test::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  fusedsl::test::allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t al = std::size_t(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
