#pragma once
// Loop fusion for elementwise groups: one pass over the data applies a whole expression, written
// once as a generic callable that takes vectors (full lanes) and floats (the tail), e.g.
//
//   map<Arch>(rows, cols, [](auto x, auto b) { return gelu_tanh(x + b); }, y, ldy,
//             input{x, ldx}, input{bias, 0});   // ld 0: the same row for every row (broadcast)
//
// so a chain like bias + activation + residual costs one read of each input and one write.
#include <cstddef>
#include <stdexcept>
#include <string>

#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/vmath.hpp"

namespace fusedsl::cpu::kernels {

// An input of an elementwise group: row r, column j at data[r*ld + j]; ld 0 broadcasts one row.
struct input {
  const float* data = nullptr;
  std::ptrdiff_t ld = 0;
};

// y[r, j] = f(in_0[r, j], in_1[r, j], ...) for r < rows, j < cols. y may alias an input with the
// same leading dimension (each element is read before it is written).
template <class Arch = native_arch, class F, class... In>
void map(std::ptrdiff_t rows, std::ptrdiff_t cols, F&& f, float* y, std::ptrdiff_t ldy, In... in) {
  static_assert((std::is_same_v<In, input> && ...), "map: inputs must be kernels::input");
  if (rows < 0 || cols < 0)
    throw std::invalid_argument("map: rows and cols must be >= 0, got " + std::to_string(rows) +
                                "x" + std::to_string(cols));
  if (((in.data == nullptr) || ...) || (y == nullptr && rows * cols > 0))
    throw std::invalid_argument("map: null input or output");
  constexpr int W = simd<Arch>::width;
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    float* yr = y + r * ldy;
    std::ptrdiff_t j = 0;
    for (; j + W <= cols; j += W)
      simd<Arch>::store(yr + j, f(simd<Arch>::load(in.data + r * in.ld + j)...));
    for (; j < cols; ++j) yr[j] = f(in.data[r * in.ld + j]...);
  }
}

// Contiguous 1-D form: y[i] = f(x_0[i], ...) for i < n.
template <class Arch = native_arch, class F, class... Ptr>
void map(std::ptrdiff_t n, F&& f, float* y, const Ptr*... x) {
  map<Arch>(1, n, static_cast<F&&>(f), y, n, input{x, 0}...);
}

}  // namespace fusedsl::cpu::kernels
