// Flash attention against the CPU loop: multi-head, grouped and multi-query heads, causal with
// block skipping, seq_k > seq_q, packed QKV strides, and both ways of reading V.
#include <doctest/doctest.h>

#include <fusedsl/backend/cuda/attention.cuh>
#include <stdexcept>
#include <string>

#include "cuda_test_util.hpp"
#include "reference.hpp"

namespace fc = fusedsl::cuda;
namespace ft = fusedsl::cuda::testing;
namespace ref = fusedsl::cuda::reference;

namespace {

template <class T, int D, int B, int H, int KvH, int SQ, int SK, bool Causal, bool Ldmatrix = true,
          int BlockM = 64>
double run_dense() {
  std::vector<float> qf, kf, vf;
  auto q = ft::random_values<T>(static_cast<std::size_t>(B) * SQ * H * D, qf, -2.0f, 2.0f);
  auto k = ft::random_values<T>(static_cast<std::size_t>(B) * SK * KvH * D, kf, -2.0f, 2.0f);
  auto v = ft::random_values<T>(static_cast<std::size_t>(B) * SK * KvH * D, vf);
  ft::device_buffer<T> dq(q), dk(k), dv(v), dout(q.size());
  dout.poison();
  const auto args =
      fc::dense_attention_args<T, D, H, KvH, SQ, SK>(dq.get(), dk.get(), dv.get(), dout.get());
  fc::flash_attention<T, D, B, H, KvH, SQ, SK, Causal, Ldmatrix, BlockM>(nullptr, args);
  const auto out = ft::widen(dout.download());
  const auto expect = ref::attention(qf, kf, vf, B, H, KvH, SQ, SK, D, Causal, args.scale,
                                     args.q_row_stride, args.k_row_stride, args.v_row_stride);
  return ft::rel_l2(out, expect);
}

// Q, K and V as column slices of one packed [S, 3 * H * D] buffer; the output dense [S, H * D].
template <int D, int S, int H, bool Causal, int BlockM>
double run_packed() {
  constexpr int W = 3 * H * D;
  std::vector<float> qkv_f;
  auto qkv = ft::random_values<fc::bf16>(static_cast<std::size_t>(S) * W, qkv_f, -2.0f, 2.0f);
  ft::device_buffer<fc::bf16> dqkv(qkv), dout(static_cast<std::size_t>(S) * H * D);
  dout.poison();
  fc::attention_args<fc::bf16> a;
  a.q = dqkv.get(), a.k = dqkv.get() + H * D, a.v = dqkv.get() + 2 * H * D, a.o = dout.get();
  a.q_row_stride = a.k_row_stride = a.v_row_stride = W;
  a.o_row_stride = H * D;
  a.scale = 0.125f;
  fc::flash_attention<fc::bf16, D, 1, H, H, S, S, Causal, true, BlockM>(nullptr, a);
  const auto out = ft::widen(dout.download());
  // The reference sees the same slices: k and v start H*D and 2*H*D elements into the packed rows.
  const std::vector<float> k(qkv_f.begin() + H * D, qkv_f.end()),
      v(qkv_f.begin() + 2 * H * D, qkv_f.end());
  const auto expect = ref::attention(qkv_f, k, v, 1, H, H, S, S, D, Causal, 0.125, W, W, W);
  return ft::rel_l2(out, expect);
}

}  // namespace

TEST_CASE("bf16 multi-head attention without a mask matches the CPU loop within 1e-2") {
  const double err = run_dense<fc::bf16, 64, 2, 4, 4, 128, 128, false>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE(
    "bf16 causal grouped-query attention (8 heads over 2 kv heads, head_dim 128) skips blocks "
    "correctly") {
  const double err = run_dense<fc::bf16, 128, 1, 8, 2, 256, 256, true>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("f16 causal multi-query attention with seq_k > seq_q aligns the mask to the last query") {
  const double err = run_dense<fc::f16, 32, 2, 4, 1, 128, 256, true>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("reading K and V with plain shared loads instead of ldmatrix gives the same attention") {
  const double err = run_dense<fc::bf16, 64, 1, 2, 2, 192, 192, true, false>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE(
    "128-query blocks (8 warps sharing each K/V tile) give the same causal grouped-query "
    "attention") {
  const double err = run_dense<fc::bf16, 128, 1, 8, 2, 256, 256, true, true, 128>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("128-query blocks at head_dim 64 without a mask match the CPU loop") {
  const double err = run_dense<fc::bf16, 64, 2, 4, 4, 256, 256, false, true, 128>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE(
    "attention reads q, k and v as column slices of one packed [seq, 3 * heads * head_dim] "
    "buffer") {
  const double err = run_packed<32, 128, 4, false, 64>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

// The default block choice (BlockM = 0): on a Hopper device in an sm_90a build these run the
// wgmma + TMA kernel (attention_sm90.cuh); elsewhere the mma.sync kernel.
template <int D, int SQ, int SK>
void say_path() {
  const std::string path =
      fc::attention_takes_wgmma<D, SQ, SK>() ? "wgmma + TMA kernel" : "mma.sync kernel";
  MESSAGE(path);
}

TEST_CASE("default path, bf16, head_dim 64, 2 batches of 4 heads, no mask, 4 K/V tiles") {
  say_path<64, 256, 256>();
  const double err = run_dense<fc::bf16, 64, 2, 4, 4, 256, 256, false, true, 0>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("default path, bf16, head_dim 128, causal grouped-query (8 heads over 2), 2 Q blocks") {
  say_path<128, 256, 256>();
  const double err = run_dense<fc::bf16, 128, 1, 8, 2, 256, 256, true, true, 0>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("default path, f16, causal multi-query with seq_k > seq_q, 6 tiles through the ring") {
  say_path<64, 128, 384>();
  const double err = run_dense<fc::f16, 64, 2, 4, 1, 128, 384, true, true, 0>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("default path reads q, k and v as column slices of one packed QKV buffer (head_dim 64)") {
  say_path<64, 256, 256>();
  const double err = run_packed<64, 256, 2, true, 0>();
  INFO("relative error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("attention refuses missing operands and strides shorter than a row, naming the problem") {
  fc::attention_args<fc::bf16> a;
  CHECK_THROWS_WITH_AS((fc::flash_attention<fc::bf16, 32, 1, 4, 4, 64, 64, false>(nullptr, a)),
                       "flash_attention: q, k, v and o must all be set", std::invalid_argument);
  ft::device_buffer<fc::bf16> buf(64 * 128);
  a = fc::dense_attention_args<fc::bf16, 32, 4, 4, 64, 64>(buf.get(), buf.get(), buf.get(),
                                                           buf.get());
  a.k_row_stride = 64;
  CHECK_THROWS_WITH_AS((fc::flash_attention<fc::bf16, 32, 1, 4, 4, 64, 64, false>(nullptr, a)),
                       "flash_attention: a row stride is shorter than heads * head_dim",
                       std::invalid_argument);
}
