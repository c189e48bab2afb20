#pragma once
// A fusion group as a kernel: the descriptor plan::lower (plan/lower.hpp) makes of each group and
// the backends implement. Its parts by kind: the iteration space and segments (loop, reduce, row,
// attention's score program), the code (plan/code.hpp), the store; a reduce's axes and op; a
// row's op, eps, gamma and beta; a GEMM's parts; an attention's operands and flags; an update's
// operands.
#include <array>
#include <string_view>

#include "fusedsl/plan/code.hpp"
#include "fusedsl/plan/groups.hpp"
#include "fusedsl/plan/view.hpp"

namespace fusedsl::plan {

enum class kernel_kind : std::uint8_t {
  loop,
  reduce,
  row,
  gemm,
  attention,
  update,
  repeat,
  refused
};

constexpr std::string_view name_of(kernel_kind k) {
  constexpr std::string_view names[] = {"loop",      "reduce", "row",    "gemm",
                                        "attention", "update", "repeat", "refused"};
  return names[std::size_t(k)];
}

inline constexpr int max_segments = 8;

// One box of the iteration space and the instructions that compute the root's value there.
struct segment {
  iter_vec lo{}, hi{};
  std::int16_t begin = 0, end = 0;  // its instructions [begin, end) of the kernel's code
  std::int16_t result = -1;         // the register holding the value written
};

// A program over an iteration space: code [begin, end), result register.
struct program_range {
  std::int16_t begin = 0, end = 0, result = -1;
  constexpr bool empty() const { return begin == end; }
};

struct gemm_part {
  int matmul = -1;  // the matmul node
  int out = -1;     // the node written: the last op of the epilogue
  strided_view a{}, b{};
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0;  // A(i, p) at a[i * lda + p], or a[p * lda + i] when trans_a
  bool trans_a = false;
  std::int64_t b_ks = 0, b_ns = 0;  // B(p, j) at b[p * b_ks + j * b_ns]
  bool b_param = false;             // B is a parameter: packed once, at bind
  // b_param: B's batch slices packed at bind, one per output batch index (a stack of experts'
  // or heads' weights [E, K, N]); 1 where B has no batch axes.
  std::int64_t b_slices = 1;
  // Batch: the output's leading axes. With `folded`, A's batch axes are its rows (m counts them)
  // and B has none; otherwise the kernel runs once per batch index.
  int batch_rank = 0;
  dims batch{};
  std::array<std::int64_t, max_rank> a_batch_stride{}, b_batch_stride{};
  bool folded = false;
  program_range epilogue{};  // over the output's index space (batch..., m, n); input 0: the acc
  int store = -1;            // access of the output's element
  int rows_per_batch = 0;    // folded: m of one batch index (the epilogue splits rows by it)
  // Horizontal fusion (pair_gemms): `pair` is a matmul of another group whose product the
  // epilogue reads (load `pair_access`, at the output's own element) and nothing else does, with
  // the same A, shape and rows and a parameter B of B's dtype (`pair_b`, B(p, j) at
  // pair_b[p * pair_b_ks + j * pair_b_ns]). A backend may compute both products in one pass over
  // [B | pair_b] and hand the second accumulator to the epilogue in place of that load; the other
  // group is then not run (its kernel_desc::paired_into names this group).
  int pair = -1, pair_access = -1;
  strided_view pair_b{};
  std::int64_t pair_b_ks = 0, pair_b_ns = 0;
};

struct attention_part {
  strided_view q{}, k{}, v{},
      o{};  // [batch..., heads, seq, head_dim] (o: [batch..., heads, seq, d])
  int batch_rank = 0;
  dims batch{};
  std::int64_t heads = 0, kv_heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  float scale = 1.0f;
  bool causal = false;  // where(iota_q + (seq_kv - seq_q) >= iota_k, s, -inf) last
  // Keys at or past a run-time length are masked: where(iota_k < len, s, -inf) (or iota_k <= pos:
  // len = pos + 1), len an i32 scalar (one for every batch index) or one per batch index; the
  // kernel reads keys [0, clamp(len, 0, seq_kv)) only, and causal counts from that length.
  int kv_len = -1;                 // the node holding len (a buffer), or -1
  std::int64_t kv_len_offset = 0;  // len = value + offset
  bool kv_len_per_batch = false;
  program_range score{};  // the scores' other ops, over (batch..., kv head, group, query, key);
                          // input 0: q . k times `scale`; empty: none
};

struct kernel_desc {
  kernel_kind kind = kernel_kind::refused;
  const char* why = nullptr;  // refused: the reason
  int group = -1;
  int root = -1;  // loop, reduce, row: the node written
  // the iteration space (loop, reduce, row, attention's score program)
  int rank = 0;
  iter_vec extent{};
  int n_seg = 0;
  std::array<segment, max_segments> seg{};
  code c{};
  int store = -1;  // loop, reduce, row: the access of the root's element
  // reduce
  op_kind reduce_op = op_kind::reduce_sum;
  int reduce_first = 0, reduce_count = 0;  // the reduced iteration axes
  std::int64_t reduce_length = 1;
  program_range epilogue{};  // reduce, row: input 0 is the reduced value / the row op's result
  // row
  op_kind row_op = op_kind::softmax;
  float eps = 0.0f;
  int gamma = -1, beta = -1;  // accesses (over the iteration space; the row axis is the last)
  // gemm
  int n_gemm = 0;
  std::array<gemm_part, max_roots> gemm{};
  // attention
  attention_part att{};
  // update: result = x with `update` at [start, start + len) along update_axis
  int update_x = -1, update_value = -1, update_start = -1;  // nodes (start: an i32 scalar)
  int update_axis = 0;
  bool start_is_constant = false;
  std::int64_t start_constant = 0;
  // gemm: the group one of whose parts computes this group's one product as its pair (-1: none)
  int paired_into = -1;

  constexpr bool refused() const { return kind == kernel_kind::refused; }
};

}  // namespace fusedsl::plan
