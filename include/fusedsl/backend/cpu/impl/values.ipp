#pragma once
// The bodies of fusedsl/backend/cpu/values.hpp's functions: included at the end of that header
// in header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).
#include "fusedsl/backend/cpu/kernels/gen/machine.hpp"
#include "fusedsl/backend/cpu/values.hpp"

namespace fusedsl::cpu {

namespace detail {

// f(flat, offset) for each element of v: its row-major index over v's shape and its offset.
template <class F>
void for_each_in_view(const plan::strided_view& v, F&& f) {
  std::int64_t idx[max_rank]{}, off = v.offset;
  const std::int64_t total = v.shape.size();
  for (std::int64_t flat = 0; flat < total; ++flat) {
    f(flat, off);
    for (int c = v.shape.rank - 1; c >= 0; --c) {
      off += v.stride[std::size_t(c)];
      if (++idx[c] < v.shape[c]) break;
      off -= v.stride[std::size_t(c)] * v.shape[c];
      idx[c] = 0;
    }
  }
}

}  // namespace detail

FUSEDSL_DECL void store_from_f32(dtype t, const float* src, void* dst, std::int64_t n) {
  using namespace kernels::gen;
  for (std::int64_t i = 0; i < n; ++i) {
    switch (t) {
      case dtype::f32:
        static_cast<float*>(dst)[i] = src[i];
        break;
      case dtype::bf16:
        element_from_f32<dtype::bf16>(static_cast<std::uint16_t*>(dst) + i, src[i]);
        break;
      case dtype::f16:
        element_from_f32<dtype::f16>(static_cast<std::uint16_t*>(dst) + i, src[i]);
        break;
      case dtype::i32:
        element_from_f32<dtype::i32>(static_cast<std::int32_t*>(dst) + i, src[i]);
        break;
      case dtype::boolean:
        element_from_f32<dtype::boolean>(static_cast<unsigned char*>(dst) + i, src[i]);
        break;
      case dtype::i8:
        element_from_f32<dtype::i8>(static_cast<std::int8_t*>(dst) + i, src[i]);
        break;
      case dtype::u8:
        element_from_f32<dtype::u8>(static_cast<std::uint8_t*>(dst) + i, src[i]);
        break;
    }
  }
}

FUSEDSL_DECL void load_to_f32(dtype t, const void* src, float* dst, std::int64_t n) {
  using namespace kernels::gen;
  for (std::int64_t i = 0; i < n; ++i) {
    switch (t) {
      case dtype::f32:
        dst[i] = static_cast<const float*>(src)[i];
        break;
      case dtype::bf16:
        dst[i] = element_to_f32<dtype::bf16>(static_cast<const std::uint16_t*>(src) + i);
        break;
      case dtype::f16:
        dst[i] = element_to_f32<dtype::f16>(static_cast<const std::uint16_t*>(src) + i);
        break;
      case dtype::i32:
        dst[i] = element_to_f32<dtype::i32>(static_cast<const std::int32_t*>(src) + i);
        break;
      case dtype::boolean:
        dst[i] = element_to_f32<dtype::boolean>(static_cast<const unsigned char*>(src) + i);
        break;
      case dtype::i8:
        dst[i] = element_to_f32<dtype::i8>(static_cast<const std::int8_t*>(src) + i);
        break;
      case dtype::u8:
        dst[i] = element_to_f32<dtype::u8>(static_cast<const std::uint8_t*>(src) + i);
        break;
    }
  }
}

FUSEDSL_DECL void view_to_f32(dtype t, const void* base, const plan::strided_view& v, float* dst) {
  const char* src = static_cast<const char*>(base);
  detail::for_each_in_view(v, [&](std::int64_t flat, std::int64_t off) {
    load_to_f32(t, src + off * size_of(t), dst + flat, 1);
  });
}

FUSEDSL_DECL void f32_to_view(dtype t, const float* src, void* base, const plan::strided_view& v) {
  char* dst = static_cast<char*>(base);
  detail::for_each_in_view(v, [&](std::int64_t flat, std::int64_t off) {
    store_from_f32(t, src + flat, dst + off * size_of(t), 1);
  });
}

}  // namespace fusedsl::cpu
