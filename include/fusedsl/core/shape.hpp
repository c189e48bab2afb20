#pragma once
// Static shapes. `dims` is the value form used by graph passes (constexpr and at run time);
// `shape<Ds...>` is the type form with rank, size and row-major strides as constants.
#include <array>
#include <cstdint>
#include <string>

namespace fusedsl {

inline constexpr int max_rank = 6;

struct dims {
  int rank = 0;
  std::array<std::int64_t, max_rank> d{};

  constexpr dims() = default;
  template <class... I>
  constexpr explicit dims(std::in_place_t, I... e)
      : rank(int(sizeof...(I))), d{std::int64_t(e)...} {}

  constexpr std::int64_t operator[](int i) const { return d[std::size_t(i)]; }
  constexpr std::int64_t& operator[](int i) { return d[std::size_t(i)]; }
  constexpr std::int64_t size() const {
    std::int64_t s = 1;
    for (int i = 0; i < rank; ++i) s *= d[std::size_t(i)];
    return s;
  }
  constexpr std::int64_t back() const { return rank ? d[std::size_t(rank - 1)] : 1; }
  // Row-major stride of axis i, in elements.
  constexpr std::int64_t stride(int i) const {
    std::int64_t s = 1;
    for (int j = rank - 1; j > i; --j) s *= d[std::size_t(j)];
    return s;
  }
  constexpr bool operator==(const dims& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (d[std::size_t(i)] != o.d[std::size_t(i)]) return false;
    return true;
  }
};

template <class... I>
constexpr dims make_dims(I... e) { return dims(std::in_place, e...); }

inline std::string to_string(const dims& s) {
  std::string r = "[";
  for (int i = 0; i < s.rank; ++i) {
    if (i) r += ',';  // not `"," + std::string`: GCC 12 -O3 gives a false -Wrestrict there
    r += std::to_string(s[i]);
  }
  return r + "]";
}

template <std::int64_t... Ds>
struct shape {
  static_assert(sizeof...(Ds) <= max_rank, "shape: rank is larger than fusedsl::max_rank (6)");
  static_assert(((Ds > 0) && ...), "shape: every dimension must be positive");
  static constexpr int rank = int(sizeof...(Ds));
  static constexpr std::int64_t size = (std::int64_t(1) * ... * Ds);
  static constexpr std::array<std::int64_t, sizeof...(Ds)> extents{Ds...};
  static constexpr dims value = make_dims(Ds...);
  static constexpr std::array<std::int64_t, sizeof...(Ds)> strides = [] {
    std::array<std::int64_t, sizeof...(Ds)> s{};
    for (int i = 0; i < rank; ++i) s[std::size_t(i)] = value.stride(i);
    return s;
  }();
};

// Axis normalisation: -1 is the last axis, as in NumPy.
constexpr int normalize_axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }
constexpr bool axis_in_range(int axis, int rank) { return axis >= -rank && axis < rank; }

// ---- shape rules, shared by the expression types (static_assert) and the graph builder ----

// The result of a shape rule: either a shape or the reason it has none.
struct shape_result {
  dims value{};
  const char* error = nullptr;  // nullptr when the shape is valid
  constexpr bool ok() const { return error == nullptr; }
};

// NumPy broadcasting: align trailing axes; each pair is equal or one of them is 1.
constexpr shape_result broadcast_shapes(const dims& a, const dims& b) {
  shape_result r;
  r.value.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int i = 0; i < r.value.rank; ++i) {
    const int ia = a.rank - r.value.rank + i, ib = b.rank - r.value.rank + i;
    const std::int64_t x = ia >= 0 ? a[ia] : 1, y = ib >= 0 ? b[ib] : 1;
    if (x != y && x != 1 && y != 1) {
      r.error = "operands cannot be broadcast together";
      return r;
    }
    r.value[i] = x == 1 ? y : x;
  }
  return r;
}

// NumPy matmul: [..., M, K] x [..., K, N] -> [..., M, N]; batch axes broadcast; either operand may
// be read transposed (its last two axes swapped). A rank-1 operand is not accepted: use reshape.
constexpr shape_result matmul_shape(const dims& a, const dims& b, bool ta, bool tb) {
  shape_result r;
  if (a.rank < 2 || b.rank < 2) { r.error = "operands must have rank 2 or more"; return r; }
  const std::int64_t m = ta ? a[a.rank - 1] : a[a.rank - 2],
                     ka = ta ? a[a.rank - 2] : a[a.rank - 1];
  const std::int64_t kb = tb ? b[b.rank - 1] : b[b.rank - 2],
                     n = tb ? b[b.rank - 2] : b[b.rank - 1];
  if (ka != kb) { r.error = "inner dimensions differ"; return r; }
  dims ba, bb;
  ba.rank = a.rank - 2;
  bb.rank = b.rank - 2;
  for (int i = 0; i < ba.rank; ++i) ba[i] = a[i];
  for (int i = 0; i < bb.rank; ++i) bb[i] = b[i];
  shape_result batch = broadcast_shapes(ba, bb);
  if (!batch.ok()) { r.error = "batch dimensions cannot be broadcast together"; return r; }
  r.value = batch.value;
  r.value.rank += 2;
  r.value[r.value.rank - 2] = m;
  r.value[r.value.rank - 1] = n;
  return r;
}

constexpr shape_result reduce_shape(const dims& a, int axis, bool keepdims) {
  shape_result r;
  if (!axis_in_range(axis, a.rank)) { r.error = "axis out of range"; return r; }
  axis = normalize_axis(axis, a.rank);
  int o = 0;
  for (int i = 0; i < a.rank; ++i) {
    if (i == axis) {
      if (keepdims) r.value[o++] = 1;
    } else {
      r.value[o++] = a[i];
    }
  }
  r.value.rank = o;
  return r;
}

template <std::size_t R>
constexpr shape_result permute_shape(const dims& a, const std::array<int, R>& perm) {
  shape_result r;
  if (int(R) != a.rank) { r.error = "permutation length differs from the rank"; return r; }
  bool seen[max_rank]{};
  for (std::size_t i = 0; i < R; ++i) {
    const int p = perm[i];
    if (p < 0 || p >= a.rank || seen[p]) { r.error = "not a permutation of the axes"; return r; }
    seen[p] = true;
    r.value[int(i)] = a[p];
  }
  r.value.rank = a.rank;
  return r;
}

constexpr shape_result reshape_shape(const dims& a, const dims& to) {
  shape_result r;
  if (a.size() != to.size()) { r.error = "the number of elements changes"; return r; }
  r.value = to;
  return r;
}

constexpr shape_result slice_shape(const dims& a, int axis, std::int64_t begin, std::int64_t end) {
  shape_result r;
  if (!axis_in_range(axis, a.rank)) { r.error = "axis out of range"; return r; }
  axis = normalize_axis(axis, a.rank);
  if (begin < 0 || end > a[axis] || begin >= end) {
    r.error = "range is empty or out of bounds";
    return r;
  }
  r.value = a;
  r.value[axis] = end - begin;
  return r;
}

constexpr shape_result concat_shape(const dims* parts, int n, int axis) {
  shape_result r;
  if (n < 1) { r.error = "needs at least one operand"; return r; }
  const dims& a = parts[0];
  if (!axis_in_range(axis, a.rank)) { r.error = "axis out of range"; return r; }
  axis = normalize_axis(axis, a.rank);
  r.value = a;
  r.value[axis] = 0;
  for (int k = 0; k < n; ++k) {
    const dims& p = parts[k];
    if (p.rank != a.rank) { r.error = "operands differ in rank"; return r; }
    for (int i = 0; i < a.rank; ++i)
      if (i != axis && p[i] != a[i]) {
        r.error = "operands differ outside the concatenation axis";
        return r;
      }
    r.value[axis] += p[axis];
  }
  return r;
}

}  // namespace fusedsl
