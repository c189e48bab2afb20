#pragma once
// Element types and shapes of the runtime HLO IR, spelled as XLA's HLO text spells them.

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fusedsl::hlo {

// Any inconsistency in the IR itself (shapes that don't fit an op, dangling operands, ...).
class ir_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Limits that keep every size computation in range (and the parser's recursion shallow).
inline constexpr std::int64_t max_rank = 64;
inline constexpr std::int64_t max_element_count = std::int64_t{1} << 48;
inline constexpr int max_tuple_depth = 64;

// s8 and u8 come after the others, so the older values keep their numbers.
enum class element_type : std::uint8_t { pred, s32, s64, f16, bf16, f32, f64, s8, u8 };

inline constexpr element_type all_element_types[] = {
    element_type::pred, element_type::s32, element_type::s64, element_type::f16, element_type::bf16,
    element_type::f32,  element_type::f64, element_type::s8,  element_type::u8};

constexpr std::string_view to_string(element_type t) {
  switch (t) {
    case element_type::pred:
      return "pred";
    case element_type::s32:
      return "s32";
    case element_type::s64:
      return "s64";
    case element_type::f16:
      return "f16";
    case element_type::bf16:
      return "bf16";
    case element_type::f32:
      return "f32";
    case element_type::f64:
      return "f64";
    case element_type::s8:
      return "s8";
    case element_type::u8:
      return "u8";
  }
  return "?";
}

constexpr std::optional<element_type> parse_element_type(std::string_view s) {
  for (element_type t : all_element_types)
    if (to_string(t) == s) return t;
  return std::nullopt;
}

constexpr std::size_t byte_size(element_type t) {
  switch (t) {
    case element_type::pred:
    case element_type::s8:
    case element_type::u8:
      return 1;
    case element_type::f16:
    case element_type::bf16:
      return 2;
    case element_type::s32:
    case element_type::f32:
      return 4;
    case element_type::s64:
    case element_type::f64:
      return 8;
  }
  return 0;
}

constexpr bool is_floating(element_type t) {
  return t == element_type::f16 || t == element_type::bf16 || t == element_type::f32 ||
         t == element_type::f64;
}
constexpr bool is_integral(element_type t) {
  return t == element_type::s32 || t == element_type::s64 || t == element_type::s8 ||
         t == element_type::u8;
}

// An array shape (element type, dims, optional minor-to-major layout) or a tuple of shapes.
// An empty `minor_to_major` means XLA's default layout {rank-1, ..., 1, 0}; the parser stores an
// explicit default layout as empty so that equal shapes compare equal.
struct shape {
  element_type type = element_type::f32;
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> minor_to_major;
  bool tuple = false;
  std::vector<shape> elements;  // tuple elements (only when `tuple`)

  static shape array(element_type t, std::vector<std::int64_t> dims) {
    shape s;
    s.type = t;
    s.dims = std::move(dims);
    check_dims(s.dims);
    return s;
  }
  static shape scalar(element_type t) { return array(t, {}); }
  static shape make_tuple(std::vector<shape> elements) {
    shape s;
    s.tuple = true;
    s.elements = std::move(elements);
    return s;
  }

  bool is_tuple() const { return tuple; }
  bool is_array() const { return !tuple; }
  std::int64_t rank() const { return static_cast<std::int64_t>(dims.size()); }
  std::int64_t element_count() const {
    return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
  }
  std::int64_t byte_count() const {
    if (tuple) {
      std::int64_t n = 0;
      for (const shape& e : elements) n += e.byte_count();
      return n;
    }
    return element_count() * static_cast<std::int64_t>(byte_size(type));
  }
  // Minor-to-major order with the default filled in.
  std::vector<std::int64_t> layout() const {
    if (!minor_to_major.empty() || tuple) return minor_to_major;
    return layout_of_rank(rank());
  }
  bool has_default_layout() const {
    return minor_to_major.empty() || minor_to_major == layout_of_rank(rank());
  }
  // Same element type and dims (layouts ignored), recursively for tuples.
  bool compatible(const shape& o) const {
    if (tuple != o.tuple) return false;
    if (tuple) {
      if (elements.size() != o.elements.size()) return false;
      for (std::size_t i = 0; i < elements.size(); ++i)
        if (!elements[i].compatible(o.elements[i])) return false;
      return true;
    }
    return type == o.type && dims == o.dims;
  }

  // Throws ir_error unless 0 <= dim, rank <= max_rank and element count <= max_element_count.
  static void check_dims(const std::vector<std::int64_t>& dims) {
    if (static_cast<std::int64_t>(dims.size()) > max_rank)
      throw ir_error("shape: rank " + std::to_string(dims.size()) + " exceeds " +
                     std::to_string(max_rank));
    std::int64_t n = 1;
    for (std::int64_t d : dims) {
      if (d < 0) throw ir_error("shape: negative dimension " + std::to_string(d));
      if (d > 0 && n > max_element_count / d) throw ir_error("shape: more than 2^48 elements");
      n *= d;
    }
  }

  static std::vector<std::int64_t> layout_of_rank(std::int64_t rank) {
    std::vector<std::int64_t> l(static_cast<std::size_t>(rank));
    for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<std::int64_t>(l.size() - 1 - i);
    return l;
  }

  friend bool operator==(const shape&, const shape&) = default;
};

// "f32[2,3]" / "(f32[2], s32[])": for error messages (no layout).
inline std::string to_short_string(const shape& s) {
  std::string out;
  if (s.tuple) {
    out += '(';
    for (std::size_t i = 0; i < s.elements.size(); ++i) {
      if (i) out += ", ";
      out += to_short_string(s.elements[i]);
    }
    out += ')';
    return out;
  }
  out += to_string(s.type);
  out += '[';
  for (std::size_t i = 0; i < s.dims.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s.dims[i]);
  }
  out += ']';
  return out;
}

}  // namespace fusedsl::hlo
