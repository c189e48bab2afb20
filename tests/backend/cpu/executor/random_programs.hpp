#pragma once
// Random programs for the property tests: `random_program<Seed>` is an expression whose graph is
// a random DAG of elementwise ops (every unary op of the op table, binary ops with NumPy
// broadcasting, comparisons and selects, casts through bf16), reductions (kept axes, so results
// broadcast back), layout ops (transposes, reshapes, slices and concats that rebuild a shape;
// interleaved pairs split into an axis of extent 2 and slices of extent 1) and gathers, over three
// inputs of odd shapes (none a multiple of a SIMD width). A constexpr LCG
// seeded by Seed picks everything, so each seed is one compile-time program: the executor
// instantiates its generated kernels for it like for any other program.
#include <array>
#include <cstdint>

#include "fusedsl/fusedsl.hpp"

namespace fusedsl::test {

struct lcg {
  std::uint64_t s;
  constexpr std::uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return std::uint32_t(s >> 33);
  }
  constexpr int below(int n) { return int(next() % std::uint32_t(n)); }
};

// The program of one seed, written into b; returns the ids of its outputs (out[0], out[1]).
constexpr std::array<int, 2> emit_random_program(graph::builder& b, unsigned seed) {
  using graph::op_kind;
  lcg r{seed * 2654435761ull + 17};
  constexpr std::int64_t sizes[] = {1, 3, 5, 7, 13, 17, 33};
  const int rank = 2 + r.below(2);
  dims full;
  full.rank = rank;
  for (int c = 0; c < rank; ++c) full[c] = sizes[1 + r.below(6)];
  dims part = full;  // broadcast against full: some axes of extent 1
  for (int c = 0; c < rank; ++c)
    if (r.below(2)) part[c] = 1;
  const int x0 = b.input("x0", dtype::f32, full);
  const int x1 = b.input("x1", dtype::f32, part);
  const int x2 = b.input("x2", dtype::f32, make_dims(full.back()));
  std::array<int, 32> pool{x0, x1, x2};
  int n = 3;
  auto pick = [&] { return pool[std::size_t(r.below(n))]; };
  auto push = [&](int id) {
    if (n < 32) pool[std::size_t(n++)] = id;
  };
  // A value of the full shape (broadcast up where needed).
  auto full_of = [&](int id) { return b.at(id).shape == full ? id : b.broadcast(id, full); };
  constexpr op_kind unary_ops[] = {op_kind::neg,      op_kind::abs,       op_kind::tanh,
                                   op_kind::erf,      op_kind::sigmoid,   op_kind::relu,
                                   op_kind::gelu_erf, op_kind::gelu_tanh, op_kind::silu,
                                   op_kind::sin,      op_kind::cos};
  constexpr op_kind binary_ops[] = {op_kind::add, op_kind::sub, op_kind::mul, op_kind::max,
                                    op_kind::min};
  constexpr op_kind compare_ops[] = {op_kind::lt, op_kind::le, op_kind::gt,
                                     op_kind::ge, op_kind::eq, op_kind::ne};
  const int steps = 6 + r.below(12);
  for (int s = 0; s < steps; ++s) {
    const int a = pick();
    switch (r.below(12)) {
      case 0: case 1:
        push(b.unary(unary_ops[r.below(11)], a));
        break;
      case 2: {  // exp, log, sqrt, rsqrt, division and pow on tamed operands
        const int t = b.unary(op_kind::tanh, a);
        const int one = b.constant(1.0);
        const int pos = b.binary(op_kind::add, b.unary(op_kind::abs, a), one);
        switch (r.below(6)) {
          case 0: push(b.unary(op_kind::exp, t)); break;
          case 1: push(b.unary(op_kind::log, pos)); break;
          case 2: push(b.unary(op_kind::sqrt, pos)); break;
          case 3: push(b.unary(op_kind::rsqrt, pos)); break;
          case 4: push(b.binary(op_kind::div, pick(), pos)); break;
          default: push(b.binary(op_kind::pow, pos, t)); break;
        }
        break;
      }
      case 3: case 4:
        push(b.binary(binary_ops[r.below(5)], a, pick()));
        break;
      case 5: {  // where(compare(a, b), c, d)
        const int p = b.binary(compare_ops[r.below(6)], a, pick());
        push(b.select(p, pick(), pick()));
        break;
      }
      case 6: {  // a reduction with its axis kept
        constexpr op_kind reds[] = {op_kind::reduce_sum, op_kind::reduce_mean, op_kind::reduce_max,
                                    op_kind::reduce_min};
        const int axis = r.below(b.at(a).shape.rank);
        push(b.reduce(reds[r.below(4)], b.unary(op_kind::tanh, a), axis, true));
        break;
      }
      case 7: {  // transpose and back, through an elementwise op
        const int f = full_of(a);
        if (rank == 2) {
          const int t = b.unary(op_kind::sin, b.transpose(f, std::array<int, 2>{1, 0}));
          push(b.transpose(t, std::array<int, 2>{1, 0}));
        } else {
          const int t = b.unary(op_kind::cos, b.transpose(f, std::array<int, 3>{2, 0, 1}));
          push(b.transpose(t, std::array<int, 3>{1, 2, 0}));
        }
        break;
      }
      case 8: {  // flatten and back
        const int f = full_of(a);
        const int flat = b.reshape(f, make_dims(full.size()));
        push(b.reshape(b.unary(op_kind::neg, flat), full));
        break;
      }
      case 9: {  // slices of the last axis put back together
        const int f = full_of(a);
        const std::int64_t last = full.back();
        if (last < 2) {
          push(b.unary(op_kind::abs, f));
          break;
        }
        const std::int64_t cut = 1 + r.below(int(last - 1));
        const int lo = b.slice(f, -1, 0, cut), hi = b.slice(f, -1, cut, last);
        const int g = b.unary(op_kind::tanh, hi);
        const std::array<int, 2> parts{g, lo};
        const int cat = b.concat(parts, -1);  // [hi', lo]: a rotation of the last axis
        push(cat);
        break;
      }
      case 10: {  // interleaved pairs of the last axis (GPT-J's rotary layout): a reshape to
                  // [..., pairs, 2], slices of extent 1, a concat of extent 2, the last column
        const int f = full_of(a);
        const std::int64_t last = full.back();
        if (last < 3) {
          push(b.unary(op_kind::neg, f));
          break;
        }
        dims paired = full;
        paired[rank - 1] = (last - 1) / 2;
        paired.rank = rank + 1;
        paired[rank] = 2;
        const int pairs = b.reshape(b.slice(f, -1, 0, last - 1), paired);
        const int even = b.slice(pairs, -1, 0, 1), odd = b.slice(pairs, -1, 1, 2);
        const int e2 = b.binary(op_kind::sub, b.unary(op_kind::cos, even), odd);
        const int o2 = b.binary(op_kind::mul, b.unary(op_kind::sin, odd), even);
        const std::array<int, 2> halves{o2, e2};  // the pair swapped
        dims cut = full;
        cut[rank - 1] = last - 1;
        const int rotated = b.reshape(b.concat(halves, -1), cut);
        const std::array<int, 2> parts{rotated, b.slice(f, -1, last - 1, last)};
        push(b.concat(parts, -1));
        break;
      }
      default: {  // a cast through bf16, or a gather of rows of a value by computed ids
        if (r.below(2)) {
          push(b.cast(b.cast(a, dtype::bf16), dtype::f32));
        } else {
          const int f = full_of(a);
          const dims fs = b.at(f).shape;
          const int ids = b.iota(dtype::i32, make_dims(fs[0]), 0);
          const int rev = b.binary(op_kind::sub, b.constant(double(fs[0] - 1), dtype::i32), ids);
          push(b.gather(f, rev));  // the rows reversed
        }
        break;
      }
    }
  }
  return {full_of(pool[std::size_t(n - 1)]), pool[std::size_t(3 + r.below(n - 3 > 0 ? n - 3 : 1))]};
}

template <unsigned Seed>
struct random_output {
  static constexpr dims shape_of(int k) {
    graph::builder b;
    const auto outs = emit_random_program(b, Seed);
    return b.at(outs[std::size_t(k)]).shape;
  }
};

// Output k of the program of Seed, as an expression (both outputs share their subgraphs when
// compiled together: the builder merges identical nodes).
template <unsigned Seed, int K>
struct random_program_t : expr::node_base<> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape = random_output<Seed>::shape_of(K);
  static constexpr int emit(graph::builder& b, std::array<int, 0>) {
    return emit_random_program(b, Seed)[std::size_t(K)];
  }
};

}  // namespace fusedsl::test
