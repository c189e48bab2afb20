#pragma once
// The device functors generated from the lowering's descriptors (plan/lower.hpp): one register
// machine that unrolls a range of a descriptor's code (plan/code.hpp) at compile time into
// straight-line f32 code, and the per-element pieces every CUDA kernel of the executor is made of:
//
//   loop_element      loop groups: the value of one element of one segment, stored
//   reduce_partial    reduce groups: one thread's share of one output's reduction (argmax: the
//                     best value and its position);
//   reduce_store      the reduced value finished, through the epilogue, stored
//   row_input         row groups: the prologue's value at (row, column);
//   row_store         the row op's result there, through the epilogue, stored
//   gemm_epilogue     the epilogue of one GEMM part, in gemm.cuh's `apply(acc, row, col, ld)` form
//   score_program     attention's score ops on one (batch, head, query, key) score
//   update_slice      update groups (dynamic_update_slice): one element of the result
//
// Everything is FUSEDSL_HD and needs no CUDA header: the kernels (plan_kernels.cuh, gemm.cuh,
// gemm_strided.cuh, attention*.cuh) call these from device code, and the host emulation of the
// device schedule (tests/cuda_executor/schedule_emulation_test.cpp) calls the same functions.
//
// A Desc type names its descriptor as `static constexpr const plan::kernel_desc& get()`: device
// code may read a host constexpr object only inside constant expressions, so every descriptor
// value used here is read into a constexpr local or a template argument first, and all
// offsets are affine functions with compile-time coefficients. The kernels are instantiated on
// packed_desc (below), the descriptor as a pack of integers: nvcc's host stubs for kernel
// templates cannot spell class-type template arguments (a program's type holds fixed_string
// names, a descriptor holds arrays), but they spell integers.
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "fusedsl/backend/cuda/device_math.cuh"
#include "fusedsl/plan/lower.hpp"

namespace fusedsl::cuda::gen {

using plan::ins_kind;
using plan::kernel_desc;

// The device address of each access of a descriptor's code: the buffer of the node it reads or
// writes (nothing for an iota). One per group and layer; a kernel parameter.
struct access_ptrs {
  void* at[plan::max_accesses];
};

// A point of a kernel's iteration space.
struct point {
  long i[plan::max_iter_rank];
};

template <class>
inline constexpr bool dependent_false = false;

// ---- descriptors as integer packs ----

namespace detail {
// One pass over the fields the device code reads, in a fixed order: io(field) either records the
// field (desc_writer) or sets it (desc_reader). Node ids, names and reasons are not included.
template <class IO>
constexpr void desc_fields(IO& io, kernel_desc& d) {
  io(d.kind);
  io(d.rank);
  for (int t = 0; t < plan::max_iter_rank; ++t) io(d.extent[std::size_t(t)]);
  io(d.n_seg);
  for (int s = 0; s < d.n_seg; ++s) {
    plan::segment& g = d.seg[std::size_t(s)];
    for (int t = 0; t < d.rank; ++t) io(g.lo[std::size_t(t)]), io(g.hi[std::size_t(t)]);
    io(g.begin), io(g.end), io(g.result);
  }
  io(d.store);
  io(d.reduce_op), io(d.reduce_first), io(d.reduce_count), io(d.reduce_length);
  io(d.epilogue.begin), io(d.epilogue.end), io(d.epilogue.result);
  io(d.row_op), io(d.eps), io(d.gamma), io(d.beta);
  io(d.c.n_ins);
  for (int i = 0; i < d.c.n_ins; ++i) {
    plan::ins& x = d.c.instr[std::size_t(i)];
    io(x.kind), io(x.op), io(x.type), io(x.arg[0]), io(x.arg[1]), io(x.arg[2]), io(x.ref);
  }
  io(d.c.n_access);
  for (int a = 0; a < d.c.n_access; ++a) {
    plan::access& x = d.c.acc[std::size_t(a)];
    io(x.type), io(x.at.base);
    for (int t = 0; t < plan::max_iter_rank; ++t) io(x.at.coef[std::size_t(t)]);
    io(x.dyn_stride), io(x.dyn_max);
  }
  io(d.c.n_const);
  for (int k = 0; k < d.c.n_const; ++k) io(d.c.constant[std::size_t(k)]);
  io(d.n_gemm);
  for (int q = 0; q < d.n_gemm; ++q) {
    plan::gemm_part& p = d.gemm[std::size_t(q)];
    io(p.m), io(p.n), io(p.k), io(p.lda), io(p.trans_a), io(p.b_ks), io(p.b_ns);
    io(p.a.offset), io(p.b.offset), io(p.batch_rank), io(p.folded), io(p.rows_per_batch);
    p.batch.rank = p.batch_rank;
    for (int c = 0; c < p.batch_rank; ++c) {
      io(p.batch.d[std::size_t(c)]);
      io(p.a_batch_stride[std::size_t(c)]), io(p.b_batch_stride[std::size_t(c)]);
    }
    io(p.epilogue.begin), io(p.epilogue.end), io(p.epilogue.result), io(p.store);
  }
  plan::attention_part& a = d.att;
  io(a.batch_rank);
  a.batch.rank = a.batch_rank;
  for (int c = 0; c < a.batch_rank; ++c) io(a.batch.d[std::size_t(c)]);
  io(a.heads), io(a.kv_heads), io(a.seq_q), io(a.seq_kv), io(a.head_dim), io(a.scale);
  io(a.causal), io(a.score.begin), io(a.score.end), io(a.score.result);
  for (plan::strided_view* v : {&a.q, &a.k, &a.v, &a.o}) {
    io(v->offset);
    for (int c = 0; c < a.batch_rank + 3; ++c) io(v->stride[std::size_t(c)]);
  }
}

template <class T>
constexpr long to_word(T v) {
  if constexpr (std::is_same_v<T, double>)
    return std::bit_cast<long>(v);
  else if constexpr (std::is_same_v<T, float>)
    return long(std::bit_cast<std::uint32_t>(v));
  else
    return long(v);
}
template <class T>
constexpr T from_word(long w) {
  if constexpr (std::is_same_v<T, double>)
    return std::bit_cast<double>(w);
  else if constexpr (std::is_same_v<T, float>)
    return std::bit_cast<float>(std::uint32_t(w));
  else
    return T(w);
}
struct desc_writer {
  long* out = nullptr;  // nullptr: count only
  int n = 0;
  template <class T>
  constexpr void operator()(const T& v) {
    if (out) out[n] = to_word(v);
    ++n;
  }
};
struct desc_reader {
  const long* in = nullptr;
  int n = 0;
  template <class T>
  constexpr void operator()(T& v) {
    v = from_word<T>(in[n++]);
  }
};
}  // namespace detail

// The number of integers that hold descriptor d, and those integers.
constexpr int packed_size(kernel_desc d) {
  detail::desc_writer w;
  detail::desc_fields(w, d);
  return w.n;
}
template <int L>
constexpr std::array<long, std::size_t(L)> pack(kernel_desc d) {
  std::array<long, std::size_t(L)> words{};
  detail::desc_writer w{words.data()};
  detail::desc_fields(w, d);
  return words;
}

// A descriptor rebuilt from its pack (the fields the device code reads).
template <long... W>
struct packed_desc {
  static constexpr long words[sizeof...(W)] = {W...};
  static constexpr kernel_desc value = [] {
    kernel_desc d{};
    detail::desc_reader r{words};
    detail::desc_fields(r, d);
    return d;
  }();
  static constexpr const kernel_desc& get() { return value; }
};

// The packed_desc of descriptor Holder::get() (a type with a constexpr kernel_desc) is
// decltype(packed_desc_of<Holder>::make()). A call, not a member alias: nvcc's host stubs spell
// an alias with its arguments (here the program type) instead of the type it stands for.
template <class Holder>
struct packed_desc_of {
  static constexpr int size = packed_size(Holder::get());
  static constexpr std::array<long, std::size_t(size)> words = pack<size>(Holder::get());
  template <std::size_t... I>
  static constexpr packed_desc<words[I]...> make(std::index_sequence<I...>) {
    return {};
  }
  static constexpr auto make() { return make(std::make_index_sequence<std::size_t(size)>{}); }
};

// ---- affine offsets ----

template <long C>
FUSEDSL_HD inline long term(long x) {
  if constexpr (C == 0)
    return 0;
  else if constexpr (C == 1)
    return x;
  else
    return C * x;
}
template <class Desc, int A, std::size_t... T>
FUSEDSL_HD inline long offset_terms(const point& p, std::index_sequence<T...>) {
  constexpr plan::affine_row r = Desc::get().c.acc[std::size_t(A)].at;
  return long(r.base) + (term<long(r.coef[T])>(p.i[T]) + ...);
}
// The element offset of access A at p (an iota's value).
template <class Desc, int A>
FUSEDSL_HD inline long offset_of(const point& p) {
  return offset_terms<Desc, A>(p, std::make_index_sequence<plan::max_iter_rank>{});
}

// Access A's element at p, as f32.
template <class Desc, int A>
FUSEDSL_HD inline float load_access(const access_ptrs& ptr, const point& p) {
  constexpr dtype t = Desc::get().c.acc[std::size_t(A)].type;
  return load_f32<t>(ptr.at[A], offset_of<Desc, A>(p));
}
// Access A's element at p set to v (converted to its dtype).
template <class Desc, int A>
FUSEDSL_HD inline void store_access(const access_ptrs& ptr, const point& p, float v) {
  constexpr dtype t = Desc::get().c.acc[std::size_t(A)].type;
  store_f32<t>(ptr.at[A], offset_of<Desc, A>(p), v);
}

// The row a gather reads for index value i: clamp(i, 0, hi), NaN as 0, as the CPU kernels'
// int64 conversion and clamp (cpu/kernels/codegen.hpp) and the reference's std::clamp. The value
// is compared before it is converted, so no conversion overflows.
FUSEDSL_HD inline long gather_row(float i, long hi) {
  if (!(i > 0.0f)) return 0;                   // NaN, zero, negative
  if (i >= 4611686018427387904.0f) return hi;  // 2^62: beyond every extent
  const long k = long(i);
  return k > hi ? hi : k;
}

// ---- the register machine ----

// Instructions [Begin, End) of Desc's code at point p, register i holding instruction i's value;
// in[k] is input register k (a GEMM's accumulator, a row op's result, a score). An instruction
// kind or op category it does not know is a compile error here, so a new kind is one branch.
template <class Desc>
struct machine {
  template <int I, int Begin>
  FUSEDSL_HD static float step(const float* r, const access_ptrs& ptr, const point& p,
                               const float* in) {
    constexpr plan::ins x = Desc::get().c.instr[std::size_t(I)];
    if constexpr (x.kind == ins_kind::input) {
      return in[x.ref];
    } else if constexpr (x.kind == ins_kind::load) {
      return load_access<Desc, x.ref>(ptr, p);
    } else if constexpr (x.kind == ins_kind::gather) {
      // access ref's affine offset plus the row picked by the index register times its stride
      constexpr plan::access a = Desc::get().c.acc[std::size_t(x.ref)];
      constexpr long hi = long(a.dyn_max), stride = long(a.dyn_stride);
      const long row = gather_row(r[x.arg[0] - Begin], hi);
      return load_f32<a.type>(ptr.at[x.ref], offset_of<Desc, x.ref>(p) + row * stride);
    } else if constexpr (x.kind == ins_kind::constant) {
      constexpr float c = float(Desc::get().c.constant[std::size_t(x.ref)]);
      return c;
    } else if constexpr (x.kind == ins_kind::iota) {
      return float(offset_of<Desc, x.ref>(p));
    } else if constexpr (x.kind == ins_kind::op) {
      constexpr graph::op_kind K = x.op;
      using T = graph::op_traits<K>;
      constexpr int a0 = x.arg[0] - Begin, a1 = x.arg[1] - Begin, a2 = x.arg[2] - Begin;
      if constexpr (K == graph::op_kind::cast) {
        return to_dtype<x.type>(r[a0]);
      } else if constexpr (graph::is_unary(K)) {
        return to_dtype<x.type>(T::template apply<device_math>(r[a0]));
      } else if constexpr (graph::is_binary(K)) {
        return to_dtype<x.type>(T::template apply<device_math>(r[a0], r[a1]));
      } else if constexpr (graph::is_compare(K)) {
        return T::template apply<device_math>(r[a0], r[a1]);
      } else if constexpr (K == graph::op_kind::select) {
        return to_dtype<x.type>(T::template apply<device_math>(r[a0], r[a1], r[a2]));
      } else {
        static_assert(dependent_false<Desc>,
                      "cuda::gen::machine: an op category the device register machine does not "
                      "compute");
        return 0.0f;
      }
    } else {
      static_assert(dependent_false<Desc>,
                    "cuda::gen::machine: an instruction kind the device register machine does not "
                    "compute");
      return 0.0f;
    }
  }

  template <int Begin, int... I>
  FUSEDSL_HD static void steps(float* r, const access_ptrs& ptr, const point& p, const float* in,
                               std::integer_sequence<int, I...>) {
    ((r[I] = step<Begin + I, Begin>(r, ptr, p, in)), ...);
  }

  // The value of register Result after instructions [Begin, End); an empty range passes in[0].
  template <int Begin, int End, int Result>
  FUSEDSL_HD static float run(const access_ptrs& ptr, const point& p, const float* in) {
    if constexpr (End == Begin) {
      return in[0];
    } else {
      float r[End - Begin];
      steps<Begin>(r, ptr, p, in, std::make_integer_sequence<int, End - Begin>{});
      return r[Result - Begin];
    }
  }
};

// Sets p.i[T] for T in [First, Last] (Last = T at the call) to the digits of `flat`, row-major
// over the extents Box::extent(T), each digit plus Box::origin(T) (a box of an iteration space).
template <int First, int T, class Box>
FUSEDSL_HD inline void set_digits(point& p, long flat) {
  if constexpr (T >= First) {
    constexpr long e = Box::extent(T), o = Box::origin(T);
    if constexpr (T > First) {
      p.i[T] = o + flat % e;
      set_digits<First, T - 1, Box>(p, flat / e);
    } else {
      p.i[T] = o + flat;
    }
  }
}

// The whole iteration space of a descriptor.
template <class Desc>
struct space_box {
  static constexpr long extent(int t) { return long(Desc::get().extent[std::size_t(t)]); }
  static constexpr long origin(int) { return 0; }
};

// ---- loop groups ----

template <class Desc, int S>
struct loop_segment {
  static constexpr plan::segment seg() { return Desc::get().seg[std::size_t(S)]; }
  static constexpr long extent(int t) {
    return long(seg().hi[std::size_t(t)] - seg().lo[std::size_t(t)]);
  }
  static constexpr long origin(int t) { return long(seg().lo[std::size_t(t)]); }
  static constexpr int rank = Desc::get().rank;
  static constexpr long size = [] {
    long s = 1;
    for (int t = 0; t < rank; ++t) s *= extent(t);
    return s;
  }();

  // Element `flat` (row-major over the segment's box) computed and stored.
  FUSEDSL_HD static void element(const access_ptrs& ptr, long flat) {
    point p{};
    set_digits<0, rank - 1, loop_segment>(p, flat);
    constexpr plan::segment s = seg();
    constexpr int st = Desc::get().store;
    const float v = machine<Desc>::template run<s.begin, s.end, s.result>(ptr, p, nullptr);
    store_access<Desc, st>(ptr, p, v);
  }
};

template <class Desc, int... S>
constexpr long segments_size(std::integer_sequence<int, S...>) {
  return (0L + ... + loop_segment<Desc, S>::size);
}

// Elements of all segments, numbered segment after segment.
template <class Desc>
struct loop_group {
  static constexpr int segments = Desc::get().n_seg;
  static constexpr long size = segments_size<Desc>(std::make_integer_sequence<int, segments>{});

  template <int S = 0>
  FUSEDSL_HD static void element(const access_ptrs& ptr, long flat) {
    if constexpr (S < segments) {
      constexpr long n = loop_segment<Desc, S>::size;
      if (S + 1 == segments || flat < n)
        loop_segment<Desc, S>::element(ptr, flat);
      else
        element<S + 1>(ptr, flat - n);
    }
  }
};

// ---- reduce groups ----

// What an argmax thread carries: the best value so far and its position along the reduced axes
// (-1: none yet). Trivial (no initialisers), so kernels keep it in shared memory.
struct arg_best {
  float value;
  float at;
};

template <class Desc>
struct reduce_group {
  static constexpr const kernel_desc& d() { return Desc::get(); }
  static constexpr int rank = d().rank, rf = d().reduce_first, rc = d().reduce_count;
  static constexpr graph::op_kind op = d().reduce_op;
  static constexpr bool is_argmax = op == graph::op_kind::argmax;
  using body = graph::op_traits<op>;
  // a partial result: the accumulator, or argmax's best value and position
  using carry = std::conditional_t<is_argmax, arg_best, float>;
  static constexpr bool reduced(int t) { return t >= rf && t < rf + rc; }
  static constexpr long outputs = [] {
    long o = 1;
    for (int t = 0; t < rank; ++t)
      if (!reduced(t)) o *= long(d().extent[std::size_t(t)]);
    return o;
  }();
  static constexpr long length = [] {  // reduced points per output
    long o = 1;
    for (int t = rf; t < rf + rc; ++t) o *= long(d().extent[std::size_t(t)]);
    return o;
  }();
  // The reduced axes are the innermost ones: an output's points are contiguous in the iteration.
  static constexpr bool inner = rf + rc == rank;

  template <int T>
  FUSEDSL_HD static void set_outer(point& p, long o) {
    if constexpr (T >= 0) {
      if constexpr (reduced(T)) {
        p.i[T] = 0;
        set_outer<T - 1>(p, o);
      } else {
        constexpr long e = long(d().extent[std::size_t(T)]);
        p.i[T] = o % e;
        set_outer<T - 1>(p, o / e);
      }
    }
  }
  // The point of output o with its reduced axes at 0.
  FUSEDSL_HD static point output_point(long o) {
    point p{};
    set_outer<rank - 1>(p, o);
    return p;
  }
  FUSEDSL_HD static carry identity() {
    if constexpr (is_argmax)
      return arg_best{-std::numeric_limits<float>::infinity(), -1.0f};
    else
      return body::template identity<device_math, float>();
  }
  // argmax: whether x replaces `best` when met at a later position: x > best, or x is NaN and
  // best is not (graph::op_traits<argmax>::take, the CPU kernels' rule).
  FUSEDSL_HD static bool takes(float x, float best) { return best < x || (x != x && best == best); }
  // argmax: the better of two partial results over disjoint positions, the earlier on a tie (equal
  // values, or both NaN). Any order of combining gives the first maximum, as a scan would.
  FUSEDSL_HD static carry combine(carry a, carry b) {
    if constexpr (is_argmax) {
      if (b.at < 0.0f) return a;
      if (a.at < 0.0f) return b;
      if (takes(b.value, a.value)) return b;
      if (takes(a.value, b.value)) return a;
      return b.at < a.at ? b : a;
    } else {
      return body::template combine<device_math>(a, b);
    }
  }

  // The combination of points q = lane, lane + lanes, ... of output o's reduction, in that order.
  FUSEDSL_HD static carry partial(const access_ptrs& ptr, long o, long lane, long lanes) {
    point p = output_point(o);
    constexpr plan::segment s = d().seg[0];
    carry acc = identity();
    for (long q = lane; q < length; q += lanes) {
      set_digits<rf, rf + rc - 1, space_box<Desc>>(p, q);
      const float x = machine<Desc>::template run<s.begin, s.end, s.result>(ptr, p, nullptr);
      if constexpr (is_argmax) {
        // q is the position: the reduced axes' digits, row-major
        if (takes(x, acc.value)) acc = arg_best{x, float(q)};
      } else {
        acc = combine(acc, x);
      }
    }
    return acc;
  }

  // Output o from its combined value: finished, through the epilogue, stored.
  FUSEDSL_HD static void store(const access_ptrs& ptr, long o, carry acc) {
    const point p = output_point(o);
    float r;
    if constexpr (is_argmax) {
      r = acc.at < 0.0f ? 0.0f : acc.at;  // no value above -inf: position 0
    } else {
      constexpr std::int64_t n = d().reduce_length;
      r = body::template finish<device_math>(acc, n);
    }
    constexpr plan::program_range e = d().epilogue;
    constexpr int st = d().store;
    const float y = machine<Desc>::template run<e.begin, e.end, e.result>(ptr, p, &r);
    store_access<Desc, st>(ptr, p, y);
  }
};

// ---- row groups ----

// The row op over the last iteration axis in three passes over the row: statistic `a` (the max;
// the sum), statistic `b` (the sum of exp(x - max'); the sum of squared deviations; unused for
// rmsnorm), then each element (row_store). Statistics combine with `combine_a`/`combine_b`, so a
// kernel may split a row over threads in any fixed way.
template <class Desc>
struct row_group {
  static constexpr const kernel_desc& d() { return Desc::get(); }
  static constexpr int rank = d().rank, last = rank - 1;
  static constexpr graph::op_kind op = d().row_op;
  static constexpr long cols = long(d().extent[std::size_t(last)]);
  static constexpr long rows = [] {
    long o = 1;
    for (int t = 0; t < last; ++t) o *= long(d().extent[std::size_t(t)]);
    return o;
  }();
  static constexpr bool softmax_like =
      op == graph::op_kind::softmax || op == graph::op_kind::log_softmax;
  static constexpr bool has_b = op != graph::op_kind::rmsnorm;

  // The point of (row r, column 0).
  FUSEDSL_HD static point row_point(long r) {
    point p{};
    set_digits<0, last - 1, space_box<Desc>>(p, r);
    p.i[last] = 0;
    return p;
  }
  // The row input at p (the prologue's value).
  FUSEDSL_HD static float input(const access_ptrs& ptr, const point& p) {
    constexpr plan::segment s = d().seg[0];
    return machine<Desc>::template run<s.begin, s.end, s.result>(ptr, p, nullptr);
  }

  FUSEDSL_HD static float identity_a() {
    return softmax_like ? -std::numeric_limits<float>::infinity() : 0.0f;
  }
  FUSEDSL_HD static float add_a(float acc, float x) {
    if constexpr (softmax_like)
      return nan_max(acc, x);
    else if constexpr (op == graph::op_kind::rmsnorm)
      return acc + x * x;
    else
      return acc + x;
  }
  FUSEDSL_HD static float combine_a(float a, float b) {
    if constexpr (softmax_like)
      return nan_max(a, b);
    else
      return a + b;
  }
  // The shift and centre that pass b and the elements need, from statistic a.
  FUSEDSL_HD static float centre(float a) {
    if constexpr (softmax_like)
      return a == -std::numeric_limits<float>::infinity() ? 0.0f : a;  // a fully masked row
    else
      return a / float(cols);
  }
  FUSEDSL_HD static float add_b(float acc, float x, float c) {
    if constexpr (softmax_like) {
      return acc + ::expf(x - c);
    } else {
      const float dx = x - c;
      return acc + dx * dx;
    }
  }
  FUSEDSL_HD static float combine_b(float a, float b) { return a + b; }

  // Per-row constants of the element formula, from both statistics.
  struct scalars {
    float c = 0.0f;  // softmax: max' ; layernorm: mean; rmsnorm: unused
    float f = 1.0f;  // softmax: 1 / sum; log_softmax: log(sum); norms: rsqrt(var + eps)
  };
  FUSEDSL_HD static scalars finish(float a, float b) {
    constexpr float eps = d().eps;
    scalars s;
    if constexpr (softmax_like) {
      s.c = centre(a);
      const float sum = b == 0.0f ? 1.0f : b;
      s.f = op == graph::op_kind::softmax ? 1.0f / sum : ::logf(sum);
    } else if constexpr (op == graph::op_kind::layernorm) {
      s.c = centre(a);
      s.f = 1.0f / ::sqrtf(b / float(cols) + eps);
    } else {
      s.f = 1.0f / ::sqrtf(a / float(cols) + eps);
    }
    return s;
  }

  // Element p (row, column p.i[last]) of the result from its input x: the row op, the
  // epilogue, the store.
  FUSEDSL_HD static void store(const access_ptrs& ptr, const point& p, float x, const scalars& s) {
    float y;
    if constexpr (op == graph::op_kind::softmax) {
      y = ::expf(x - s.c) * s.f;
    } else if constexpr (op == graph::op_kind::log_softmax) {
      y = x - s.c - s.f;
    } else {
      constexpr int g = d().gamma;
      y = (x - s.c) * s.f * load_access<Desc, g>(ptr, p);
      if constexpr (op == graph::op_kind::layernorm) {
        constexpr int b = d().beta;
        y += load_access<Desc, b>(ptr, p);
      }
    }
    constexpr plan::program_range e = d().epilogue;
    constexpr int st = d().store;
    const float z = machine<Desc>::template run<e.begin, e.end, e.result>(ptr, p, &y);
    store_access<Desc, st>(ptr, p, z);
  }
};

// ---- GEMM epilogues ----

// The epilogue of part P of a gemm descriptor: the value stored at output (row, col) of one
// launch from the accumulator there. `batch` is the launch's batch index (unfolded parts).
template <class Desc, int P>
struct gemm_epilogue {
  static constexpr plan::gemm_part part() { return Desc::get().gemm[std::size_t(P)]; }
  static constexpr int rank = part().batch_rank + 2;
  static constexpr dtype out_dtype = Desc::get().c.acc[std::size_t(part().store)].type;
  static constexpr long extent(int t) { return long(part().batch[t]); }
  static constexpr long origin(int) { return 0; }

  access_ptrs ptr;
  long batch = 0;

  // The value at (row, col) of batch index `batch` from the accumulator there.
  FUSEDSL_HD static float value(const access_ptrs& ptr, long batch, float acc, long row, long col) {
    constexpr plan::program_range e = part().epilogue;
    if constexpr (e.begin == e.end) {
      return acc;
    } else {
      point p{};
      long b = batch, r = row;
      if constexpr (part().folded) {
        constexpr long rows = part().rows_per_batch;
        b = r / rows;
        r = r % rows;
      }
      set_digits<0, rank - 3, gemm_epilogue>(p, b);
      p.i[rank - 2] = r;
      p.i[rank - 1] = col;
      return machine<Desc>::template run<e.begin, e.end, e.result>(ptr, p, &acc);
    }
  }
  FUSEDSL_HD float apply(float acc, int row, int col, int) const {
    return value(ptr, batch, acc, row, col);
  }
};

// The operands of part P of a gemm descriptor: A(i, p) at a[i * a_rs + p * a_ks] and B(p, j) at
// b[p * b_ks + j * b_ns] of one launch, whose batch index moves A, B and C by batch offsets
// (unfolded parts; C is contiguous [batch..., m, n]).
template <class Desc, int P>
struct gemm_operands {
  static constexpr plan::gemm_part part() { return Desc::get().gemm[std::size_t(P)]; }
  static constexpr long m = long(part().m), n = long(part().n), k = long(part().k);
  static constexpr long a_rs = part().trans_a ? 1 : long(part().lda);
  static constexpr long a_ks = part().trans_a ? long(part().lda) : 1;
  static constexpr long b_ks = long(part().b_ks), b_ns = long(part().b_ns);
  static constexpr long a_offset = long(part().a.offset), b_offset = long(part().b.offset);
  static constexpr long batches = [] {
    long b = 1;
    if (!part().folded)
      for (int c = 0; c < part().batch_rank; ++c) b *= long(part().batch[c]);
    return b;
  }();

  template <bool A, int C>
  FUSEDSL_HD static long batch_offset_from(long b) {
    if constexpr (C < 0) {
      return 0;
    } else {
      constexpr long e = long(part().batch[C]);
      constexpr long s = A ? long(part().a_batch_stride[std::size_t(C)])
                           : long(part().b_batch_stride[std::size_t(C)]);
      return (b % e) * s + batch_offset_from<A, C - 1>(b / e);
    }
  }
  // Element offsets of A and B for batch index b (0 for a folded part).
  FUSEDSL_HD static long a_batch(long b) {
    if constexpr (part().folded)
      return 0;
    else
      return batch_offset_from<true, part().batch_rank - 1>(b);
  }
  FUSEDSL_HD static long b_batch(long b) {
    if constexpr (part().folded)
      return 0;
    else
      return batch_offset_from<false, part().batch_rank - 1>(b);
  }
};

// The operands of an attention descriptor: element (batch index b, head h, position s, d) of view
// V (0 Q, 1 K, 2 V, 3 O) at offset(V) + batch(V, b) + h * head_stride(V) + s * row_stride(V) + d,
// K and V read at key/value head h / group.
template <class Desc>
struct attention_operands {
  static constexpr plan::attention_part att() { return Desc::get().att; }
  static constexpr int rank = att().batch_rank + 3;
  static constexpr plan::strided_view view(int v) {
    return v == 0 ? att().q : v == 1 ? att().k : v == 2 ? att().v : att().o;
  }
  static constexpr long batches = long(att().batch.size());
  static constexpr long heads = long(att().heads), kv_heads = long(att().kv_heads);
  static constexpr long group = heads / kv_heads;
  static constexpr long seq_q = long(att().seq_q), seq_kv = long(att().seq_kv);
  static constexpr long head_dim = long(att().head_dim);
  static constexpr float scale = att().scale;
  static constexpr bool causal = att().causal;
  static constexpr long causal_offset = seq_kv - seq_q;  // query i sees keys j <= i + offset
  template <int V>
  static constexpr long offset = long(view(V).offset);
  template <int V>
  static constexpr long head_stride = long(view(V).stride[std::size_t(rank - 3)]);
  template <int V>
  static constexpr long row_stride = long(view(V).stride[std::size_t(rank - 2)]);

  template <int V, int C>
  FUSEDSL_HD static long batch_from(long b) {
    if constexpr (C < 0) {
      return 0;
    } else {
      constexpr long e = long(att().batch[C]), s = long(view(V).stride[std::size_t(C)]);
      return (b % e) * s + batch_from<V, C - 1>(b / e);
    }
  }
  // The element offset of batch index b in view V.
  template <int V>
  FUSEDSL_HD static long batch(long b) {
    return batch_from<V, att().batch_rank - 1>(b);
  }
};

// ---- attention score programs ----

// att.score on the score of (batch index b over the batch axes, head h, query i, key j): the
// program's input is scale * q.k; the result is the score the softmax takes.
template <class Desc>
struct score_program {
  static constexpr plan::attention_part att() { return Desc::get().att; }
  static constexpr int rank = att().batch_rank + 4;
  static constexpr long group = long(att().heads / att().kv_heads);
  static constexpr bool active = !att().score.empty();
  static constexpr long extent(int t) { return long(att().batch[t]); }
  static constexpr long origin(int) { return 0; }

  access_ptrs ptr;

  FUSEDSL_HD float apply(float s, long b, long h, long i, long j) const {
    constexpr plan::program_range e = att().score;
    if constexpr (e.begin == e.end) {
      return s;
    } else {
      point p{};
      set_digits<0, rank - 5, score_program>(p, b);
      p.i[rank - 4] = h / group;
      p.i[rank - 3] = h % group;
      p.i[rank - 2] = i;
      p.i[rank - 1] = j;
      return machine<Desc>::template run<e.begin, e.end, e.result>(ptr, p, &s);
    }
  }
};

// ---- dynamic update slices ----

// The buffers of one update launch: result = x with `value` at [start, start + Len) along the
// axis (cpu/kernels/codegen.hpp's run_update).
struct update_args {
  const void* x = nullptr;
  const void* value = nullptr;
  const std::int32_t* start = nullptr;  // the run-time start (an i32 scalar), or nullptr
  long start_constant = 0;              // the start when it is a constant
  void* out = nullptr;
  bool in_place = false;  // out is x's buffer: only the update's elements are written
};

// Elements of Bytes bytes, x viewed as [Outer, Extent, Inner] around the axis, the update as
// [Outer, Len, Inner]. In place, element i of the update is written where it goes; otherwise
// element i of the result is the update's inside the window and x's outside it, so one pass
// writes each element once (no copy that a later write must follow).
template <int Bytes, long Outer, long Extent, long Len, long Inner>
struct update_slice {
  using word = std::conditional_t<
      Bytes == 1, std::uint8_t,
      std::conditional_t<Bytes == 2, std::uint16_t,
                         std::conditional_t<Bytes == 4, std::uint32_t, std::uint64_t>>>;
  static_assert(Bytes == 1 || Bytes == 2 || Bytes == 4 || Bytes == 8,
                "cuda::gen::update_slice: elements of 1, 2, 4 or 8 bytes");
  static constexpr long window = Outer * Len * Inner;    // elements of the update
  static constexpr long whole = Outer * Extent * Inner;  // elements of the result

  // The start along the axis, clamped to [0, Extent - Len] (XLA's rule, the CPU's).
  FUSEDSL_HD static long start(const update_args& a) {
    const long s = a.start != nullptr ? long(*a.start) : a.start_constant;
    return s < 0 ? 0 : s > Extent - Len ? Extent - Len : s;
  }
  // The elements one launch writes.
  FUSEDSL_HD static long size(const update_args& a) { return a.in_place ? window : whole; }

  // Element i of the launch (of the update in place, of the result otherwise); s = start(a).
  FUSEDSL_HD static void element(const update_args& a, long s, long i) {
    word* out = static_cast<word*>(a.out);
    const word* u = static_cast<const word*>(a.value);
    if (a.in_place) {
      const long p = i / (Len * Inner), r = i % (Len * Inner);
      out[p * Extent * Inner + s * Inner + r] = u[i];
    } else {
      const long p = i / (Extent * Inner), r = i % (Extent * Inner), j = r / Inner;
      out[i] = j >= s && j < s + Len ? u[p * Len * Inner + r - s * Inner]
                                     : static_cast<const word*>(a.x)[i];
    }
  }
};

}  // namespace fusedsl::cuda::gen
