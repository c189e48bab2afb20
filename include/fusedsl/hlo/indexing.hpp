#pragma once
// Where gather, dynamic-slice and dynamic-update-slice read and write, by XLA's operation
// semantics ("Gather", "DynamicSlice", "DynamicUpdateSlice"): the element-by-element rule that
// every evaluator of the IR shares (the TPU-style executor, the interop tests' reference).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fusedsl/hlo/ir.hpp"

namespace fusedsl::hlo {

// Starts clamped so that a window of `sizes` fits in `dims` (XLA clamps, it never faults).
inline std::vector<std::int64_t> clamp_starts(std::vector<std::int64_t> starts,
                                              const std::vector<std::int64_t>& dims,
                                              const std::vector<std::int64_t>& sizes) {
  for (std::size_t d = 0; d < starts.size(); ++d)
    starts[d] = std::clamp<std::int64_t>(starts[d], 0, dims[d] - sizes[d]);
  return starts;
}

// The operand element that element `out` of gather `g` reads. `start(idx)` is the value of the
// indices array at multi-index idx. For each output element: its batch dims (those not in
// offset_dims) pick an index vector; entry k starts operand dim start_index_map[k], batching
// operand dims take the index of their paired indices dim; the start is clamped so the slice
// fits; the offset dims then walk the slice's dims that are not collapsed or batching.
template <class Start>
std::vector<std::int64_t> gather_source(const instruction& g, const shape& operand,
                                        const shape& indices, const std::vector<std::int64_t>& out,
                                        Start&& start) {
  const gather_dimension_numbers& d = *g.gather;
  const auto rank = static_cast<std::size_t>(operand.rank());
  std::vector<bool> is_offset(out.size(), false);
  for (std::int64_t o : d.offset_dims) is_offset[static_cast<std::size_t>(o)] = true;
  std::vector<std::int64_t> batch;  // the output's batch dims, in order
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!is_offset[i]) batch.push_back(out[i]);
  // The indices' multi-index: batch values on every dim but index_vector_dim, in order.
  const auto ivd = static_cast<std::size_t>(d.index_vector_dim);
  const bool implicit = d.index_vector_dim == indices.rank();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(indices.rank()), 0);
  for (std::size_t i = 0, b = 0; i < idx.size(); ++i)
    if (i != ivd) idx[i] = batch[b++];
  auto batch_of = [&](std::int64_t indices_dim) {  // the batch value of an indices dim
    const auto i = static_cast<std::size_t>(indices_dim);
    return batch[i - (!implicit && i > ivd ? 1 : 0)];
  };
  std::vector<std::int64_t> in(rank, 0), sizes = g.slice_sizes;
  for (std::size_t k = 0; k < d.start_index_map.size(); ++k) {
    if (!implicit) idx[ivd] = static_cast<std::int64_t>(k);
    in[static_cast<std::size_t>(d.start_index_map[k])] = start(idx);
  }
  for (std::size_t k = 0; k < d.operand_batching_dims.size(); ++k)
    in[static_cast<std::size_t>(d.operand_batching_dims[k])] =
        batch_of(d.start_indices_batching_dims[k]);
  in = clamp_starts(std::move(in), operand.dims, sizes);
  std::vector<bool> dropped(rank, false);
  for (std::int64_t c : d.collapsed_slice_dims) dropped[static_cast<std::size_t>(c)] = true;
  for (std::int64_t c : d.operand_batching_dims) dropped[static_cast<std::size_t>(c)] = true;
  for (std::size_t i = 0, o = 0; i < rank; ++i)
    if (!dropped[i]) in[i] += out[static_cast<std::size_t>(d.offset_dims[o++])];
  return in;
}

}  // namespace fusedsl::hlo
