#pragma once
// The CPU backend's general path: evaluates one node from materialised f32 operands into an f32
// buffer, by plain loops. The executor uses it for the parts of a group its specialised kernels do
// not cover (a general loop group, an unusual epilogue), so every plan runs. Booleans and integer
// indices are carried as 0/1 and exact integers in f32 (exact below 2^24).
#include <algorithm>
#include <cmath>
#include <limits>

#include "fusedsl/backend/cpu/kernels/row.hpp"
#include "fusedsl/graph/node.hpp"
#include "fusedsl/graph/scalar.hpp"

namespace fusedsl::cpu {

using graph::op_kind;

namespace detail {

// Offset into an operand of shape `in` for output multi-index `idx` (NumPy broadcasting).
inline std::int64_t broadcast_offset(const dims& in, const dims& out, const std::int64_t* idx) {
  std::int64_t off = 0, stride = 1;
  for (int i = in.rank - 1; i >= 0; --i) {
    const int j = i + (out.rank - in.rank);
    if (in[i] != 1) off += idx[j] * stride;
    stride *= in[i];
  }
  return off;
}

template <class F>
void for_each_index(const dims& s, F&& f) {
  std::int64_t idx[max_rank]{};
  const std::int64_t total = s.size();
  for (std::int64_t flat = 0; flat < total; ++flat) {
    f(flat, idx);
    for (int i = s.rank - 1; i >= 0; --i) {
      if (++idx[i] < s[i]) break;
      idx[i] = 0;
    }
  }
}

using graph::scalar::nan_max;
using graph::scalar::nan_min;
inline float apply_unary(op_kind k, float x) { return graph::scalar::unary(k, x); }
inline float apply_binary(op_kind k, float a, float b) { return graph::scalar::binary(k, a, b); }

}  // namespace detail

namespace detail {

// f(first, stride, len, out) for each line of shape `a` along `axis`: the offset of its first
// element, its stride and length, and its index in the shape without that axis.
template <class F>
void for_each_line(const dims& a, int axis, F&& f) {
  const std::int64_t len = a[axis], inner = a.stride(axis), outer = a.size() / (len * inner);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) f(o * len * inner + i, inner, len, o * inner + i);
}

// argmax along n.axis (the first of equal maxima; NaN wins).
inline void interpret_argmax(const graph::node* nodes, const graph::node& n, const float* const* in,
                             float* y) {
  for_each_line(nodes[n.in[0]].shape, n.axis,
                [&](std::int64_t first, std::int64_t stride, std::int64_t len, std::int64_t out) {
                  const float* x = in[0] + first;
                  std::int64_t best = 0;
                  for (std::int64_t r = 1; r < len; ++r) {
                    const float v = x[r * stride], b = x[best * stride];
                    if (v > b || (v != v && b == b)) best = r;
                  }
                  y[out] = float(best);
                });
}

// gather, dynamic_slice, dynamic_update_slice (start indices clamped into range).
inline void interpret_indexing(const graph::node* nodes, const graph::node& n,
                               const float* const* in, float* y) {
  const dims& s = n.shape;
  const auto shape_of = [&](int k) -> const dims& { return nodes[n.in[std::size_t(k)]].shape; };
  if (n.op == op_kind::gather) {
    const dims& t = shape_of(0);
    const std::int64_t rows = t[0], row = t.size() / rows, ids = shape_of(1).size();
    for (std::int64_t k = 0; k < ids; ++k) {
      const std::int64_t r = std::clamp<std::int64_t>(std::int64_t(in[1][k]), 0, rows - 1);
      std::copy_n(in[0] + r * row, row, y + k * row);
    }
    return;
  }
  const dims& a = shape_of(0);
  const bool update = n.op == op_kind::dynamic_update_slice;
  const dims& part = update ? shape_of(1) : s;
  const std::int64_t len = part[n.axis];
  const std::int64_t start =
      std::clamp<std::int64_t>(std::int64_t(in[update ? 2 : 1][0]), 0, a[n.axis] - len);
  if (update) std::copy_n(in[0], a.size(), y);
  for_each_index(part, [&](std::int64_t f, const std::int64_t* idx) {
    std::int64_t off = 0;
    for (int i = 0; i < a.rank; ++i) off += (idx[i] + (i == n.axis ? start : 0)) * a.stride(i);
    if (update)
      y[off] = in[1][f];
    else
      y[f] = in[0][off];
  });
}

// reduce_sum / max / min / mean along n.axis (max and min propagate NaN).
inline void interpret_reduce(const graph::node* nodes, const graph::node& n, const float* const* in,
                             float* y) {
  const float init = n.op == op_kind::reduce_max   ? -std::numeric_limits<float>::infinity()
                     : n.op == op_kind::reduce_min ? std::numeric_limits<float>::infinity()
                                                   : 0.0f;
  for_each_line(nodes[n.in[0]].shape, n.axis,
                [&](std::int64_t first, std::int64_t stride, std::int64_t len, std::int64_t out) {
                  const float* x = in[0] + first;
                  float acc = init;
                  for (std::int64_t r = 0; r < len; ++r) {
                    const float v = x[r * stride];
                    if (n.op == op_kind::reduce_max)
                      acc = nan_max(acc, v);
                    else if (n.op == op_kind::reduce_min)
                      acc = nan_min(acc, v);
                    else
                      acc += v;
                  }
                  y[out] = n.op == op_kind::reduce_mean ? acc / float(len) : acc;
                });
}

// matmul with batch broadcasting and transposed operands.
inline void interpret_matmul(const graph::node* nodes, const graph::node& n, const float* const* in,
                             float* y) {
  const dims& s = n.shape;
  const auto shape_of = [&](int k) -> const dims& { return nodes[n.in[std::size_t(k)]].shape; };
  const dims &a = shape_of(0), &b = shape_of(1);
  const std::int64_t m = s[s.rank - 2], nn = s[s.rank - 1];
  const std::int64_t k = n.trans_a ? a[a.rank - 2] : a[a.rank - 1];
  dims batch = s;
  batch.rank -= 2;
  dims ab = a, bb = b;
  ab.rank -= 2;
  bb.rank -= 2;
  for_each_index(batch, [&](std::int64_t f, const std::int64_t* idx) {
    const float* pa = in[0] + broadcast_offset(ab, batch, idx) * a[a.rank - 2] * a[a.rank - 1];
    const float* pb = in[1] + broadcast_offset(bb, batch, idx) * b[b.rank - 2] * b[b.rank - 1];
    float* py = y + f * m * nn;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < nn; ++j) {
        float acc = 0.0f;
        for (std::int64_t p = 0; p < k; ++p)
          acc += (n.trans_a ? pa[p * m + i] : pa[i * k + p]) *
                 (n.trans_b ? pb[j * k + p] : pb[p * nn + j]);
        py[i * nn + j] = acc;
      }
  });
}

// transpose, reshape, broadcast, slice, concat: data movement only.
inline void interpret_layout(const graph::node* nodes, const graph::node& n, const float* const* in,
                             float* y) {
  const dims& s = n.shape;
  const auto shape_of = [&](int k) -> const dims& { return nodes[n.in[std::size_t(k)]].shape; };
  if (n.op == op_kind::transpose) {
    const dims& a = shape_of(0);
    for_each_index(s, [&](std::int64_t f, const std::int64_t* idx) {
      std::int64_t off = 0;
      for (int i = 0; i < s.rank; ++i) off += idx[i] * a.stride(n.perm[std::size_t(i)]);
      y[f] = in[0][off];
    });
  } else if (n.op == op_kind::reshape) {
    std::copy_n(in[0], s.size(), y);
  } else if (n.op == op_kind::broadcast) {
    const dims& a = shape_of(0);
    for_each_index(s, [&](std::int64_t f, const std::int64_t* idx) {
      y[f] = in[0][broadcast_offset(a, s, idx)];
    });
  } else if (n.op == op_kind::slice) {
    const dims& a = shape_of(0);
    for_each_index(s, [&](std::int64_t f, const std::int64_t* idx) {
      std::int64_t off = 0;
      for (int i = 0; i < s.rank; ++i) off += (idx[i] + (i == n.axis ? n.begin : 0)) * a.stride(i);
      y[f] = in[0][off];
    });
  } else if (n.op == op_kind::concat) {
    for_each_index(s, [&](std::int64_t f, const std::int64_t* idx) {
      std::int64_t pos = idx[n.axis];
      int k = 0;
      while (pos >= shape_of(k)[n.axis]) pos -= shape_of(k++)[n.axis];
      const dims& a = shape_of(k);
      std::int64_t off = 0;
      for (int i = 0; i < s.rank; ++i) off += (i == n.axis ? pos : idx[i]) * a.stride(i);
      y[f] = in[k][off];
    });
  }
}

// softmax, log_softmax, layernorm, rmsnorm: rows along the last axis, or a strided loop for
// softmax over another axis.
inline void interpret_row(const graph::node& n, const float* const* in, float* y) {
  const dims& s = n.shape;
  // Rows along the last axis, or a strided loop for softmax over another axis.
  const std::int64_t cols = s.back(), rows = s.size() / cols;
  if (n.axis == s.rank - 1) {
    switch (n.op) {
      case op_kind::softmax:
        kernels::softmax_rows(rows, cols, in[0], cols, y, cols);
        break;
      case op_kind::log_softmax:
        kernels::log_softmax_rows(rows, cols, in[0], cols, y, cols);
        break;
      case op_kind::layernorm:
        kernels::layernorm_rows(rows, cols, in[0], cols, in[1], in[2], float(n.value), y, cols);
        break;
      default:
        kernels::rmsnorm_rows(rows, cols, in[0], cols, in[1], float(n.value), y, cols);
        break;
    }
  } else {
    const std::int64_t len = s[n.axis], inner = s.stride(n.axis), outer = s.size() / (len * inner);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        const float* x = in[0] + o * len * inner + i;
        float* yy = y + o * len * inner + i;
        float m = -std::numeric_limits<float>::infinity();
        for (std::int64_t r = 0; r < len; ++r) m = nan_max(m, x[r * inner]);
        const float shift = m == -std::numeric_limits<float>::infinity() ? 0.0f : m;
        float sum = 0.0f;
        for (std::int64_t r = 0; r < len; ++r) sum += std::exp(x[r * inner] - shift);
        const float safe = sum == 0.0f ? 1.0f : sum;
        for (std::int64_t r = 0; r < len; ++r)
          yy[r * inner] = n.op == op_kind::softmax ? std::exp(x[r * inner] - shift) / safe
                                                   : x[r * inner] - shift - std::log(safe);
      }
  }
}

}  // namespace detail

// Evaluate node n of the table into y; in[k] points at the value of operand k (f32, contiguous).
inline void interpret(const graph::node* nodes, const graph::node& n, const float* const* in,
                      float* y) {
  using namespace detail;
  const dims& s = n.shape;
  const auto shape_of = [&](int k) -> const dims& { return nodes[n.in[std::size_t(k)]].shape; };
  if (n.op == op_kind::constant) {
    y[0] = float(n.value);
  } else if (n.op == op_kind::iota) {
    for_each_index(s, [&](std::int64_t f, const std::int64_t* idx) { y[f] = float(idx[n.axis]); });
  } else if (graph::is_unary(n.op)) {
    for (std::int64_t i = 0; i < s.size(); ++i) y[i] = apply_unary(n.op, in[0][i]);
  } else if (graph::is_binary(n.op) || graph::is_compare(n.op)) {
    const dims &a = shape_of(0), &b = shape_of(1);
    for_each_index(s, [&](std::int64_t f, const std::int64_t* idx) {
      y[f] = apply_binary(n.op, in[0][broadcast_offset(a, s, idx)],
                          in[1][broadcast_offset(b, s, idx)]);
    });
  } else if (n.op == op_kind::select) {
    const dims &p = shape_of(0), &a = shape_of(1), &b = shape_of(2);
    for_each_index(s, [&](std::int64_t f, const std::int64_t* idx) {
      y[f] = in[0][broadcast_offset(p, s, idx)] != 0.0f ? in[1][broadcast_offset(a, s, idx)]
                                                        : in[2][broadcast_offset(b, s, idx)];
    });
  } else if (n.op == op_kind::cast) {
    for (std::int64_t i = 0; i < s.size(); ++i) y[i] = in[0][i];
  } else if (n.op == op_kind::argmax) {
    interpret_argmax(nodes, n, in, y);
  } else if (n.op == op_kind::gather || n.op == op_kind::dynamic_slice ||
             n.op == op_kind::dynamic_update_slice) {
    interpret_indexing(nodes, n, in, y);
  } else if (graph::is_reduce(n.op)) {
    interpret_reduce(nodes, n, in, y);
  } else if (n.op == op_kind::matmul) {
    interpret_matmul(nodes, n, in, y);
  } else if (graph::is_row_composite(n.op)) {
    interpret_row(n, in, y);
  } else {
    interpret_layout(nodes, n, in, y);
  }
}

}  // namespace fusedsl::cpu
