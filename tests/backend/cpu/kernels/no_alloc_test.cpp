// The kernels never allocate: global operator new is counted around calls to each of them.
#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "fusedsl/backend/cpu/kernels/attention.hpp"
#include "fusedsl/backend/cpu/kernels/elementwise.hpp"
#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "fusedsl/backend/cpu/kernels/row.hpp"
#include "test_util.hpp"

namespace {
std::atomic<long> g_news{0};
}  // namespace

void* operator new(std::size_t n) {
  ++g_news;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace k = fusedsl::cpu::kernels;

TEST_CASE("gemm, flash attention, row kernels and map do not allocate, with or without a pool") {
  const std::ptrdiff_t m = 70, n = 90, kk = 40, l = 100, d = 32;
  auto a = fusedsl_test::random_floats(std::size_t(m * kk), 1);
  auto b = fusedsl_test::random_floats(std::size_t(kk * n), 2);
  auto qkv = fusedsl_test::random_floats(std::size_t(l * d), 3);
  std::vector<float> packed(k::packed_b_floats(kk, n)), c(std::size_t(m * n)),
      gws(k::gemm_workspace_floats(kk, 2)), aws(k::attention_workspace_floats(d, 2)),
      o(std::size_t(l * d));
  const auto pb = k::pack_b(kk, n, b.data(), n, false, packed.data());
  k::attention_args args;
  args.q = args.k = args.v = qkv.data();
  args.o = o.data();
  args.q_row_stride = args.k_row_stride = args.v_row_stride = args.o_row_stride = d;
  args.causal = true;
  k::thread_pool pool(2);  // threads start here, outside the counted region
  k::gemm_epilogue ep;
  ep.act = fusedsl::graph::op_kind::gelu_erf;
  const long before = g_news.load();
  for (k::thread_pool* p : {static_cast<k::thread_pool*>(nullptr), &pool}) {
    k::gemm(m, n, kk, a.data(), kk, false, pb, c.data(), n, ep, gws.data(), p);
    k::flash_attention({l, l, 1, 1, d}, args, aws.data(), p);
  }
  k::softmax_rows(m, n, c.data(), n, c.data(), n);
  k::layernorm_rows(m, n, c.data(), n, nullptr, nullptr, 1e-5f, c.data(), n);
  k::map(
      m, n, [](auto x) { return k::silu(x); }, c.data(), n, k::input{c.data(), n});
  CHECK(g_news.load() - before == 0);
}
