#pragma once
// HLO opcodes, named as XLA's HLO text names them.

#include <cstdint>
#include <optional>
#include <string_view>

namespace fusedsl::hlo {

#define FUSEDSL_HLO_OPCODES(X)                      \
  X(parameter, "parameter")                         \
  X(constant, "constant")                           \
  X(iota, "iota")                                   \
  /* elementwise unary */                           \
  X(abs, "abs")                                     \
  X(negate, "negate")                               \
  X(exponential, "exponential")                     \
  X(exponential_minus_one, "exponential-minus-one") \
  X(log, "log")                                     \
  X(log_plus_one, "log-plus-one")                   \
  X(sqrt, "sqrt")                                   \
  X(rsqrt, "rsqrt")                                 \
  X(tanh, "tanh")                                   \
  X(erf, "erf")                                     \
  X(logistic, "logistic")                           \
  X(sign, "sign")                                   \
  X(floor, "floor")                                 \
  X(ceil, "ceil")                                   \
  X(round_nearest_even, "round-nearest-even")       \
  X(cosine, "cosine")                               \
  X(sine, "sine")                                   \
  X(not_, "not")                                    \
  X(copy, "copy")                                   \
  X(convert, "convert")                             \
  /* elementwise binary */                          \
  X(add, "add")                                     \
  X(subtract, "subtract")                           \
  X(multiply, "multiply")                           \
  X(divide, "divide")                               \
  X(maximum, "maximum")                             \
  X(minimum, "minimum")                             \
  X(power, "power")                                 \
  X(remainder, "remainder")                         \
  X(and_, "and")                                    \
  X(or_, "or")                                      \
  X(xor_, "xor")                                    \
  X(compare, "compare")                             \
  /* elementwise ternary */                         \
  X(select, "select")                               \
  X(clamp, "clamp")                                 \
  /* structural */                                  \
  X(dot, "dot")                                     \
  X(broadcast, "broadcast")                         \
  X(reduce, "reduce")                               \
  X(transpose, "transpose")                         \
  X(reshape, "reshape")                             \
  X(slice, "slice")                                 \
  X(concatenate, "concatenate")                     \
  X(gather, "gather")                               \
  X(dynamic_slice, "dynamic-slice")                 \
  X(dynamic_update_slice, "dynamic-update-slice")   \
  X(tuple, "tuple")                                 \
  X(get_tuple_element, "get-tuple-element")         \
  X(fusion, "fusion")                               \
  X(call, "call")

enum class opcode : std::uint8_t {
#define FUSEDSL_X(id, text) id,
  FUSEDSL_HLO_OPCODES(FUSEDSL_X)
#undef FUSEDSL_X
};

inline constexpr opcode all_opcodes[] = {
#define FUSEDSL_X(id, text) opcode::id,
    FUSEDSL_HLO_OPCODES(FUSEDSL_X)
#undef FUSEDSL_X
};

constexpr std::string_view to_string(opcode op) {
  switch (op) {
#define FUSEDSL_X(id, text) \
  case opcode::id:          \
    return text;
    FUSEDSL_HLO_OPCODES(FUSEDSL_X)
#undef FUSEDSL_X
  }
  return "?";
}

constexpr std::optional<opcode> parse_opcode(std::string_view s) {
  for (opcode op : all_opcodes)
    if (to_string(op) == s) return op;
  return std::nullopt;
}

constexpr bool is_elementwise_unary(opcode op) {
  return op >= opcode::abs && op <= opcode::convert;
}
constexpr bool is_elementwise_binary(opcode op) {
  return op >= opcode::add && op <= opcode::compare;
}
constexpr bool is_elementwise(opcode op) {
  return is_elementwise_unary(op) || is_elementwise_binary(op) || op == opcode::select ||
         op == opcode::clamp;
}
// Ops defined on floating-point element types only.
constexpr bool is_floating_only(opcode op) {
  switch (op) {
    case opcode::exponential:
    case opcode::exponential_minus_one:
    case opcode::log:
    case opcode::log_plus_one:
    case opcode::sqrt:
    case opcode::rsqrt:
    case opcode::tanh:
    case opcode::erf:
    case opcode::logistic:
    case opcode::floor:
    case opcode::ceil:
    case opcode::round_nearest_even:
    case opcode::cosine:
    case opcode::sine:
      return true;
    default:
      return false;
  }
}
// Ops defined on pred and integer element types only.
constexpr bool is_logical(opcode op) {
  return op == opcode::not_ || op == opcode::and_ || op == opcode::or_ || op == opcode::xor_;
}

enum class comparison_direction : std::uint8_t { eq, ne, lt, le, gt, ge };

constexpr std::string_view to_string(comparison_direction d) {
  switch (d) {
    case comparison_direction::eq:
      return "EQ";
    case comparison_direction::ne:
      return "NE";
    case comparison_direction::lt:
      return "LT";
    case comparison_direction::le:
      return "LE";
    case comparison_direction::gt:
      return "GT";
    case comparison_direction::ge:
      return "GE";
  }
  return "?";
}
constexpr std::optional<comparison_direction> parse_comparison_direction(std::string_view s) {
  for (auto d : {comparison_direction::eq, comparison_direction::ne, comparison_direction::lt,
                 comparison_direction::le, comparison_direction::gt, comparison_direction::ge})
    if (to_string(d) == s) return d;
  return std::nullopt;
}

enum class fusion_kind : std::uint8_t { loop, input, output };

constexpr std::string_view to_string(fusion_kind k) {
  switch (k) {
    case fusion_kind::loop:
      return "kLoop";
    case fusion_kind::input:
      return "kInput";
    case fusion_kind::output:
      return "kOutput";
  }
  return "?";
}
constexpr std::optional<fusion_kind> parse_fusion_kind(std::string_view s) {
  for (auto k : {fusion_kind::loop, fusion_kind::input, fusion_kind::output})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

}  // namespace fusedsl::hlo
