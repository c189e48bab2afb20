#pragma once
// Dynamic update slices: the update copied into the result at a run-time start.
#include <cstdint>
#include <cstring>

#include "fusedsl/backend/cpu/kernels/gen/machine.hpp"

namespace fusedsl::cpu::kernels::gen {

// result = x with update at [start, start + len) along the axis; x is copied only when the result
// does not take its buffer.
template <class Desc>
void run_update(void* const* val) {
  static constexpr const kernel_desc& D = Desc::value;
  const auto& nodes = Desc::nodes;  // the program's node table
  const graph::node &x = nodes[std::size_t(D.update_x)], &u = nodes[std::size_t(D.update_value)];
  const std::size_t es = std::size_t(size_of(x.type));
  char* out = static_cast<char*>(val[D.root]);
  const char* src = static_cast<const char*>(val[D.update_x]);
  if (out != src) std::memcpy(out, src, std::size_t(x.shape.size()) * es);
  std::int64_t start = D.start_constant;
  if (!D.start_is_constant)
    start = std::int64_t(*static_cast<const std::int32_t*>(val[D.update_start]));
  const int axis = D.update_axis;
  const std::int64_t len = u.shape[axis];
  start = start < 0 ? 0 : start > x.shape[axis] - len ? x.shape[axis] - len : start;
  std::int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape[i];
  const std::int64_t chunk = len * u.shape.stride(axis), row = x.shape[axis] * x.shape.stride(axis);
  const char* up = static_cast<const char*>(val[D.update_value]);
  for (std::int64_t p = 0; p < outer; ++p)
    std::memcpy(out + std::size_t(p * row + start * x.shape.stride(axis)) * es,
                up + std::size_t(p * chunk) * es, std::size_t(chunk) * es);
}

}  // namespace fusedsl::cpu::kernels::gen
