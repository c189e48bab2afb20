// Loop-fusion kernels: a whole elementwise group in one launch, against CPU loops.
#include <doctest/doctest.h>

#include <fusedsl/backend/cuda/elementwise.cuh>

#include "cuda_test_util.hpp"
#include "reference.hpp"

namespace fc = fusedsl::cuda;
using fusedsl::graph::op_kind;
namespace ft = fusedsl::cuda::testing;
namespace ref = fusedsl::cuda::reference;

namespace {
// gelu(a * b + c): three inputs, one output, no intermediate in memory.
struct fused_mul_add_gelu {
  __device__ float operator()(float a, float b, float c) const {
    return fc::apply_op<op_kind::gelu_erf>(a * b + c);
  }
};

// A loop body that broadcasts a per-column bias over rows: out[r, c] = relu(x[r, c] + bias[c]).
template <int Cols>
struct bias_relu_rows {
  const float* x;
  const float* bias;
  float* out;
  __device__ void operator()(long i) const {
    out[i] = fc::apply_op<op_kind::relu>(x[i] + bias[i % Cols]);
  }
};
}  // namespace

TEST_CASE("a fused gelu(a * b + c) group over 2^20 + 3 f32 elements matches within 1e-5") {
  constexpr long N = (1L << 20) + 3;
  std::vector<float> af, bf, cf;
  auto a = ft::random_values<float>(N, af, -3.0f, 3.0f), b = ft::random_values<float>(N, bf),
       c = ft::random_values<float>(N, cf);
  ft::device_buffer<float> da(a), db(b), dc(c), dout(N);
  dout.poison();
  fc::launch_map<N>(nullptr, fused_mul_add_gelu{}, dout.get(), da.get(), db.get(), dc.get());
  const auto out = ft::widen(dout.download());
  std::vector<double> expect(N);
  for (long i = 0; i < N; ++i) expect[i] = ref::gelu(static_cast<double>(af[i]) * bf[i] + cf[i]);
  const double err = ft::rel_l2(out, expect);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<float>);
}

TEST_CASE(
    "a silu(a + b) group reads bf16 and writes bf16 within 1e-2 (scalar path: N is no multiple of "
    "8)") {
  constexpr long N = 3 * 4096 + 17;
  std::vector<float> af, bf;
  auto a = ft::random_values<fc::bf16>(N, af, -4.0f, 4.0f), b = ft::random_values<fc::bf16>(N, bf);
  ft::device_buffer<fc::bf16> da(a), db(b), dout(N);
  dout.poison();
  using group = fc::ops::then<fc::ops::unary<op_kind::silu>, fc::ops::add>;
  fc::launch_map<N>(nullptr, group{}, dout.get(), da.get(), db.get());
  const auto out = ft::widen(dout.download());
  std::vector<double> expect(N);
  for (long i = 0; i < N; ++i) expect[i] = ref::silu(static_cast<double>(af[i]) + bf[i]);
  const double err = ft::rel_l2(out, expect);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::bf16>);
}

TEST_CASE("a scale-then-relu group casts f32 inputs to an f16 output") {
  constexpr long N = 10000;
  std::vector<float> af;
  auto a = ft::random_values<float>(N, af);
  ft::device_buffer<float> da(a);
  ft::device_buffer<fc::f16> dout(N);
  dout.poison();
  using group = fc::ops::then<fc::ops::unary<op_kind::relu>, fc::ops::scale>;
  fc::launch_map<N>(nullptr, group{fc::ops::scale{2.5f}, {}}, dout.get(), da.get());
  const auto out = ft::widen(dout.download());
  std::vector<double> expect(N);
  for (long i = 0; i < N; ++i) expect[i] = ref::relu(2.5 * af[i]);
  const double err = ft::rel_l2(out, expect);
  INFO("relative error " << err);
  CHECK(err < ft::tolerance<fc::f16>);
}

TEST_CASE("an index loop body broadcasts a row bias: relu(x + bias[col]) over [333, 256] in f32") {
  constexpr int R = 333, C = 256;
  std::vector<float> xf, bf;
  auto x = ft::random_values<float>(static_cast<std::size_t>(R) * C, xf),
       bias = ft::random_values<float>(C, bf);
  ft::device_buffer<float> dx(x), dbias(bias), dout(x.size());
  dout.poison();
  fc::launch_loop<static_cast<long>(R) * C>(nullptr,
                                            bias_relu_rows<C>{dx.get(), dbias.get(), dout.get()});
  const auto out = ft::widen(dout.download());
  std::vector<double> expect(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    expect[i] = ref::relu(static_cast<double>(xf[i]) + bf[i % C]);
  CHECK(ft::compare_rel_l2(out, expect, ft::tolerance<float>));
}

TEST_CASE(
    "the 16-byte vectorised path (N a multiple of 8, aligned pointers) mixes bf16 and f32 inputs "
    "into f32") {
  constexpr long N = 8 * 12345;
  std::vector<float> af, bf;
  auto a = ft::random_values<fc::bf16>(N, af);
  auto b = ft::random_values<float>(N, bf);
  ft::device_buffer<fc::bf16> da(a);
  ft::device_buffer<float> db(b), dout(N);
  dout.poison();
  fc::launch_map<N>(nullptr, fc::ops::mul{}, dout.get(), da.get(), db.get());
  const auto out = ft::widen(dout.download());
  std::vector<double> expect(N);
  for (long i = 0; i < N; ++i) expect[i] = static_cast<double>(af[i]) * bf[i];
  CHECK(ft::compare_rel_l2(out, expect, ft::tolerance<float>));
}

TEST_CASE("a misaligned pointer falls back to the scalar path and still computes every element") {
  constexpr long N = 4096;
  std::vector<float> af;
  auto a = ft::random_values<float>(N + 1, af);
  ft::device_buffer<float> da(a), dout(N);
  dout.poison();
  fc::launch_map<N>(nullptr, fc::ops::scale{3.0f}, dout.get(),
                    static_cast<const float*>(da.get() + 1));
  const auto out = ft::widen(dout.download());
  std::vector<double> expect(N);
  for (long i = 0; i < N; ++i) expect[i] = 3.0 * af[i + 1];
  CHECK(ft::compare_rel_l2(out, expect, ft::tolerance<float>));
}
