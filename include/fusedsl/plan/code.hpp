#pragma once
// Kernel code: the members of a fusion group as a straight-line program over registers, which the
// backends unroll at compile time into one loop body (backend/cpu/kernels/codegen.hpp, the CUDA
// backend's device functors). Register i holds the value of instruction i at one iteration index
// (a SIMD batch of them on the CPU):
//
//   input     a value the kernel hands in (a GEMM's accumulator, a row kernel's result)
//   load      element at an affine offset of a buffer (a group's operand: an input, a parameter,
//             a value another group materialised), converted from its dtype to f32
//   constant  a compile-time scalar
//   iota      an affine function of the iteration index (masks, positions)
//   gather    a load whose offset adds clamp(register, 0, dyn_max) * dyn_stride: an embedding row
//             picked by an id, a dynamic slice at a run-time position
//   op        an elementwise op of the op table over earlier registers, rounded to its dtype
//
// emitter::emit(node, map) writes the instructions that compute `node` at the index map `map`
// (plan/affine.hpp): group members inline, everything else a load. Equal (node, map) pairs share
// one register.
#include <array>
#include <cstdint>

#include "fusedsl/graph/node.hpp"
#include "fusedsl/plan/affine.hpp"

namespace fusedsl::plan {

using graph::node;
using graph::op_kind;

inline constexpr int max_code = 96;     // instructions of one kernel (all its segments)
inline constexpr int max_accesses = 32;  // loads, iotas and stores of one kernel
inline constexpr int max_constants = 24;

enum class ins_kind : std::uint8_t { input, load, constant, iota, gather, op };

struct ins {
  ins_kind kind = ins_kind::op;
  op_kind op = op_kind::add;
  dtype type = dtype::f32;            // the value's dtype (a load: the buffer's)
  std::array<std::int16_t, 3> arg{-1, -1, -1};  // op: operand registers; gather: the index
  std::int16_t ref = -1;  // load, iota, gather: access; constant: constant; input: which
};

// An affine element offset into node's buffer (or, for an iota, the value itself): at.base +
// sum_t at.coef[t] * iter[t].
struct access {
  int node = -1;  // -1 for an iota
  dtype type = dtype::f32;
  affine_row at{};
  std::int64_t dyn_stride = 0,
               dyn_max = 0;  // gather: offset += clamp(index, 0, dyn_max) * dyn_stride
};

struct code {
  int n_ins = 0;
  std::array<ins, max_code> instr{};
  int n_access = 0;
  std::array<access, max_accesses> acc{};
  int n_const = 0;
  std::array<double, max_constants> constant{};

  constexpr int add_access(const access& a) {
    for (int i = 0; i < n_access; ++i)
      if (acc[std::size_t(i)].node == a.node && acc[std::size_t(i)].type == a.type &&
          acc[std::size_t(i)].at == a.at && acc[std::size_t(i)].dyn_stride == a.dyn_stride &&
          acc[std::size_t(i)].dyn_max == a.dyn_max)
        return i;
    if (n_access == max_accesses) return -1;
    acc[std::size_t(n_access)] = a;
    return n_access++;
  }
  constexpr int add_constant(double v) {
    for (int i = 0; i < n_const; ++i)
      if (constant[std::size_t(i)] == v ||
          (v != v && constant[std::size_t(i)] != constant[std::size_t(i)]))
        return i;
    if (n_const == max_constants) return -1;
    constant[std::size_t(n_const)] = v;
    return n_const++;
  }
};

// Which nodes the code computes inline (the group's members), and which value a node supplies as
// an input register instead (the accumulator of a GEMM epilogue, ...).
struct emit_scope {
  const node* nodes = nullptr;
  const int* group_of = nullptr;
  int group = -1;
  std::array<int, 2> input_node{-1, -1};  // input k is the value of this node (at the root map)
};

template <class Scope = emit_scope>
struct emitter {
  Scope sc;  // by value: callers pass temporaries
  code& c;
  iter_space space;
  refine_request req{};
  // memo: the (node, map) of each instruction emitted by this emitter
  int first = 0;  // instructions before this belong to other segments
  std::array<int, max_code> memo_node{};
  std::array<index_map, max_code> memo_map{};

  constexpr emitter(const Scope& s, code& c_, const iter_space& sp)
      : sc(s), c(c_), space(sp), first(c_.n_ins) {}

  constexpr bool member(int id) const { return sc.group_of[id] == sc.group; }

  constexpr int push(const ins& in, int id, const index_map& m) {
    if (c.n_ins == max_code) {
      fail("a fusion group has more than 96 instructions");
      return -1;
    }
    const int r = c.n_ins++;
    c.instr[std::size_t(r)] = in;
    memo_node[std::size_t(r)] = id;
    memo_map[std::size_t(r)] = m;
    return r;
  }
  constexpr void fail(const char* why) {
    if (req.ok()) req = {refine_request::fail, -1, 0, why};
  }

  constexpr int load(int id, const index_map& m) {
    const node& n = sc.nodes[id];
    access a;
    a.node = id;
    a.type = n.type;
    a.at = offset_row(m, n.shape);
    const int ref = c.add_access(a);
    if (ref < 0) {
      fail("a fusion group reads more than 32 distinct operand elements");
      return -1;
    }
    ins in;
    in.kind = ins_kind::load;
    in.type = n.type;
    in.ref = std::int16_t(ref);
    return push(in, id, m);
  }

  // A load of node id at a map over its buffer viewed with shape `as` (same size, row-major).
  constexpr int load_flat(int id, const index_map& m, const dims& as) {
    const node& n = sc.nodes[id];
    access a;
    a.node = id;
    a.type = n.type;
    a.at = offset_row(m, as);
    const int ref = c.add_access(a);
    if (ref < 0) {
      fail("a fusion group reads more than 32 distinct operand elements");
      return -1;
    }
    ins in;
    in.kind = ins_kind::load;
    in.type = n.type;
    in.ref = std::int16_t(ref);
    return push(in, id, m);
  }

  // The register holding node id at map m (emitting what it needs), or -1 (req says why).
  constexpr int emit(int id, const index_map& m) {
    if (!req.ok()) return -1;
    for (int r = first; r < c.n_ins; ++r)
      if (memo_node[std::size_t(r)] == id && memo_map[std::size_t(r)] == m) return r;
    const node& n = sc.nodes[id];
    for (int k = 0; k < 2; ++k)
      if (sc.input_node[std::size_t(k)] == id) {
        ins in;
        in.kind = ins_kind::input;
        in.type = n.type;
        in.ref = std::int16_t(k);
        return push(in, id, m);
      }
    if (n.op == op_kind::constant) {
      ins in;
      in.kind = ins_kind::constant;
      in.type = n.type;
      const int ref = c.add_constant(n.value);
      if (ref < 0) {
        fail("a fusion group holds more than 24 distinct constants");
        return -1;
      }
      in.ref = std::int16_t(ref);
      return push(in, id, m);
    }
    if (n.op == op_kind::iota) {
      access a;
      a.node = -1;
      a.type = n.type;
      a.at = m.row[std::size_t(n.axis)];
      const int ref = c.add_access(a);
      if (ref < 0) {
        fail("a fusion group reads more than 32 distinct operand elements");
        return -1;
      }
      ins in;
      in.kind = ins_kind::iota;
      in.type = n.type;
      in.ref = std::int16_t(ref);
      return push(in, id, m);
    }
    if (!member(id) || graph::is_leaf(n.op)) return load(id, m);
    const dims& out = n.shape;
    if (graph::is_elementwise(n.op)) {
      ins in;
      in.kind = ins_kind::op;
      in.op = n.op;
      in.type = n.type;
      for (int k = 0; k < n.n_in; ++k) {
        const int o = n.in[std::size_t(k)];
        const int r = emit(o, broadcast_map(m, sc.nodes[o].shape, out));
        if (r < 0) return -1;
        in.arg[std::size_t(k)] = std::int16_t(r);
      }
      return push(in, id, m);
    }
    const int x = n.in[0];
    const dims& xs = sc.nodes[x].shape;
    if (n.op == op_kind::gather || n.op == op_kind::dynamic_slice) {
      if (member(x) && !graph::is_leaf(sc.nodes[x].op)) {
        fail("a gather or dynamic slice of a value computed in the same kernel");
        return -1;
      }
      index_map xm;  // x's index without the run-time part
      xm.rank = xs.rank;
      int index = -1;
      access a;
      a.node = x;
      a.type = sc.nodes[x].type;
      if (n.op == op_kind::gather) {
        const int ids = n.in[1];
        const int ri = sc.nodes[ids].shape.rank;
        index_map im;
        im.rank = ri;
        for (int c = 0; c < ri; ++c) im.row[std::size_t(c)] = m.row[std::size_t(c)];
        for (int c = 1; c < xs.rank; ++c) xm.row[std::size_t(c)] = m.row[std::size_t(ri + c - 1)];
        index = emit(ids, im);
        a.dyn_stride = xs.stride(0);
        a.dyn_max = xs[0] - 1;
      } else {
        xm = m;
        index = emit(n.in[1], index_map{});
        a.dyn_stride = xs.stride(n.axis);
        a.dyn_max = xs[n.axis] - n.shape[n.axis];
      }
      if (index < 0) return -1;
      a.at = offset_row(xm, xs);
      const int ref = c.add_access(a);
      if (ref < 0) {
        fail("a fusion group reads more than 32 distinct operand elements");
        return -1;
      }
      ins in;
      in.kind = ins_kind::gather;
      in.type = a.type;
      in.ref = std::int16_t(ref);
      in.arg[0] = std::int16_t(index);
      return push(in, id, m);
    }
    switch (n.op) {
      case op_kind::broadcast: return emit(x, broadcast_map(m, xs, out));
      case op_kind::transpose: return emit(x, transpose_map(m, n.perm));
      case op_kind::slice: return emit(x, slice_map(m, n.axis, n.begin));
      case op_kind::reshape: {
        // A reshape of a buffer reads it at the same linear offset: no digits needed.
        const node& xn = sc.nodes[x];
        if ((!member(x) || graph::is_leaf(xn.op)) && xn.op != op_kind::constant &&
            xn.op != op_kind::iota && sc.input_node[0] != x && sc.input_node[1] != x) {
          index_map flat;
          flat.rank = 1;
          flat.row[0] = offset_row(m, out);
          dims one = make_dims(xs.size());
          return load_flat(x, flat, one);
        }
        const map_result r = reshape_map(m, out, xs, space);
        if (!r.req.ok()) {
          if (req.ok()) req = r.req;
          return -1;
        }
        return emit(x, r.map);
      }
      case op_kind::concat: {
        const affine_row& a = m.row[std::size_t(n.axis)];
        const int t = unit_axis(a, space.rank);
        if (t < 0) {
          fail("a concat along an axis the kernel's iteration does not follow one to one");
          return -1;
        }
        // The operand that covers [lo, hi) of iteration axis t, if one does.
        const std::int64_t lo = a.base + space.lo[std::size_t(t)],
                           hi = a.base + space.hi[std::size_t(t)];
        std::int64_t start = 0;
        for (int k = 0; k < n.n_in; ++k) {
          const int o = n.in[std::size_t(k)];
          const std::int64_t len = sc.nodes[o].shape[n.axis];
          if (lo >= start && hi <= start + len) {
            index_map mo = m;
            mo.row[std::size_t(n.axis)].base -= start;
            return emit(o, mo);
          }
          if (lo < start + len && hi > start + len) {
            if (req.ok()) req = {refine_request::split_box, t, start + len - a.base, nullptr};
            return -1;
          }
          start += len;
        }
        fail("a concat read outside its operands");
        return -1;
      }
      default: break;
    }
    fail(
        "an op a loop kernel does not compute (a matmul, reduction or row op inside a loop group)");
    return -1;
  }
};

}  // namespace fusedsl::plan
