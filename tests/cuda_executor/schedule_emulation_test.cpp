// The device executor's schedule emulated on the CPU: one host allocation laid out as the
// device's (executor_schedule.hpp), the launches the executor's plan chooses (executor_plan.hpp),
// and for each launch the generated device functors themselves (codegen.cuh: the register
// machine with its gathers, loop elements, reduce partials and stores (argmax's value and position
// pairs), row passes, GEMM epilogues, score programs, update slices), compiled here by the host
// compiler. Each thread of a kernel is played in turn, and partial
// results combine in the kernels' order (a butterfly within each warp, then warps in order); only
// the products of the GEMMs and the attention loop are plain loops (f32 accumulation, as the
// kernels). This checks the executor's own logic without a GPU (which buffers feed which launch,
// strides, offsets, epilogue and score programs, the in-place steps, the layer ping-pong) against
// the Eigen reference. tests/cuda_executor/executor_test.cu runs the same programs on a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/compare.hpp"
#include "fusedsl/backend/cuda/codegen.cuh"
#include "fusedsl/backend/cuda/executor_plan.hpp"
#include "fusedsl/backend/cuda/executor_schedule.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "programs.hpp"

namespace fd = fusedsl;
namespace gen = fd::cuda::gen;
using fd::dtype;
using fd::cuda::launch_kind;
using fd::graph::op_kind;

namespace {

float load(dtype t, const void* p, long i) {
  switch (t) {
    case dtype::f32:
      return fd::cuda::load_f32<dtype::f32>(p, i);
    case dtype::bf16:
      return fd::cuda::load_f32<dtype::bf16>(p, i);
    case dtype::f16:
      return fd::cuda::load_f32<dtype::f16>(p, i);
    case dtype::i32:
      return fd::cuda::load_f32<dtype::i32>(p, i);
    case dtype::boolean:
      return fd::cuda::load_f32<dtype::boolean>(p, i);
    case dtype::i8:
      return fd::cuda::load_f32<dtype::i8>(p, i);
    case dtype::u8:
      return fd::cuda::load_f32<dtype::u8>(p, i);
  }
  return 0.0f;
}
void store(dtype t, void* p, long i, float v) {
  switch (t) {
    case dtype::f32:
      return fd::cuda::store_f32<dtype::f32>(p, i, v);
    case dtype::bf16:
      return fd::cuda::store_f32<dtype::bf16>(p, i, v);
    case dtype::f16:
      return fd::cuda::store_f32<dtype::f16>(p, i, v);
    case dtype::i32:
      return fd::cuda::store_f32<dtype::i32>(p, i, v);
    case dtype::boolean:
      return fd::cuda::store_f32<dtype::boolean>(p, i, v);
    case dtype::i8:
      return fd::cuda::store_f32<dtype::i8>(p, i, v);
    case dtype::u8:
      return fd::cuda::store_f32<dtype::u8>(p, i, v);
  }
}

// plan_kernels.cuh's warp_allreduce: lanes l and l ^ o combine, o = 16, 8, 4, 2, 1.
template <class T, class Combine>
T warp_allreduce(std::array<T, 32> v, Combine combine) {
  for (int o = 16; o > 0; o >>= 1) {
    const std::array<T, 32> w = v;
    for (int l = 0; l < 32; ++l)
      v[std::size_t(l)] = combine(w[std::size_t(l)], w[std::size_t(l ^ o)]);
  }
  return v[0];
}
// plan_kernels.cuh's block_allreduce over `threads` values (1, or a multiple of 32).
template <class T, class Combine>
T block_allreduce(const std::vector<T>& v, Combine combine) {
  if (v.size() == 1) return v[0];
  T total{};
  for (std::size_t w = 0; w < v.size() / 32; ++w) {
    std::array<T, 32> lanes{};
    for (std::size_t l = 0; l < 32; ++l) lanes[l] = v[32 * w + l];
    const T r = warp_allreduce(lanes, combine);
    total = w == 0 ? r : combine(total, r);
  }
  return total;
}

template <class Program>
class emulator {
  using DP = fd::cuda::device_program<Program>;
  static constexpr auto& g = Program::graph;
  static constexpr std::size_t N = Program::node_count;
  static constexpr int G = Program::fusion.n_groups;
  static constexpr const fd::cuda::launch_plan<G>& lp = DP::launches;
  template <int GI>
  using full = typename DP::template desc<GI>;
  template <int GI>
  using packed = decltype(gen::packed_desc_of<full<GI>>::make());

 public:
  emulator()
      : layout_(fd::cuda::layout_device_memory(g, Program::memory, 256)), memory_(layout_.bytes) {
    static_assert(lp.ok(), "emulator: every group of the program must run on the device");
    // NaN everywhere (0x7fc0 is a NaN as bf16 and f16, 0x7fc07fc0 as f32): a value read before
    // any launch wrote it poisons the result.
    for (std::size_t i = 0; i + 2 <= memory_.size(); i += 2) {
      const std::uint16_t nan16 = 0x7fc0;
      std::memcpy(memory_.data() + i, &nan16, 2);
    }
    // States start at zero (the executor's reset_states at construction).
    std::memset(memory_.data() + layout_.states_begin, 0, layout_.states_bytes);
  }
  const fd::cuda::device_layout<N>& layout() const { return layout_; }
  std::byte* at(std::size_t offset) { return memory_.data() + offset; }
  int launches = 0;      // device launches
  int merged = 0;        // gemm + layernorm launches
  int shared_parts = 0;  // sibling parts computed with the first sibling's epilogue code
  int updates = 0, in_place_updates = 0;  // update launches, those writing only the update

  void run() {
    const auto table = make_table(std::make_index_sequence<std::size_t(G)>{});
    fd::cuda::call_schedule<N> schedule(g, Program::fusion, Program::memory, layout_);
    schedule.for_each([&](int gi, int, const auto& addr) {
      addr_ = &addr;
      launches += lp[gi].device_launches();
      (this->*table[std::size_t(gi)])();
    });
  }

 private:
  template <std::size_t... I>
  static constexpr auto make_table(std::index_sequence<I...>) {
    return std::array<void (emulator::*)(), sizeof...(I)>{&emulator::template group<int(I)>...};
  }
  std::byte* buf(int node) {
    const std::int64_t a = (*addr_)[std::size_t(node)];
    if (a < 0) FAIL("emulator: node %" << node << " has no device buffer");
    return at(std::size_t(a));
  }
  template <int GI>
  gen::access_ptrs ptrs() {
    constexpr const fd::plan::kernel_desc& d = full<GI>::get();
    gen::access_ptrs p{};
    for (int a = 0; a < d.c.n_access; ++a) {
      const int node = d.c.acc[std::size_t(a)].node;
      p.at[a] = node >= 0 ? buf(node) : nullptr;
    }
    return p;
  }

  template <int GI>
  void group() {
    using D = packed<GI>;
    constexpr fd::cuda::group_launch L = lp[GI];
    if constexpr (L.kind == launch_kind::loop) {
      using K = gen::loop_group<D>;
      const gen::access_ptrs p = ptrs<GI>();
      for (long i = 0; i < K::size; ++i) K::element(p, i);
    } else if constexpr (L.kind == launch_kind::reduce) {
      reduce<D, L.reduce_lanes>(ptrs<GI>());
    } else if constexpr (L.kind == launch_kind::row) {
      row<D>(ptrs<GI>(), L.row_threads);
    } else if constexpr (L.kind == launch_kind::gemm) {
      gemm_parts<GI>(std::make_integer_sequence<int, L.n_gemm>{});
    } else if constexpr (L.kind == launch_kind::attention) {
      attention<GI>();
    } else if constexpr (L.kind == launch_kind::update) {
      update<GI>();
    }
  }

  // ---- update: update_slice_kernel's threads, the arguments as executor.hpp's add_update ----
  template <int GI>
  void update() {
    constexpr fd::cuda::update_launch e = lp[GI].upd;
    constexpr const fd::plan::kernel_desc& d = full<GI>::get();
    using U = gen::update_slice<e.bytes, e.outer, e.extent, e.len, e.inner>;
    gen::update_args a;
    a.x = buf(d.update_x);
    a.value = buf(d.update_value);
    a.out = buf(d.root);
    a.in_place = a.out == a.x;
    if constexpr (e.start_is_constant)
      a.start_constant = e.start_constant;
    else
      a.start = reinterpret_cast<const std::int32_t*>(buf(d.update_start));
    const long start = U::start(a);
    for (long i = 0; i < U::size(a); ++i) U::element(a, start, i);
    ++updates;
    in_place_updates += a.in_place;
  }

  // ---- reduce: reduce_group_kernel's threads, one output at a time ----
  template <class D, int Lanes>
  void reduce(const gen::access_ptrs& p) {
    using K = gen::reduce_group<D>;
    using C = typename K::carry;  // a float, or argmax's (value, position)
    std::vector<C> part(static_cast<std::size_t>(Lanes));
    for (long o = 0; o < K::outputs; ++o) {
      for (int l = 0; l < Lanes; ++l) part[std::size_t(l)] = K::partial(p, o, l, Lanes);
      K::store(p, o, block_allreduce(part, [](C a, C b) { return K::combine(a, b); }));
    }
  }

  // ---- row: row_group_kernel's threads, one row at a time ----
  template <class D>
  void row(const gen::access_ptrs& p, int threads) {
    using K = gen::row_group<D>;
    std::vector<float> x(static_cast<std::size_t>(K::cols)),
        part(static_cast<std::size_t>(threads));
    for (long r = 0; r < K::rows; ++r) {
      gen::point pt = K::row_point(r);
      for (long j = 0; j < K::cols; ++j) {
        pt.i[K::last] = j;
        x[std::size_t(j)] = K::input(p, pt);
      }
      for (int t = 0; t < threads; ++t) {
        float a = K::identity_a();
        for (long j = t; j < K::cols; j += threads) a = K::add_a(a, x[std::size_t(j)]);
        part[std::size_t(t)] = a;
      }
      const float a = block_allreduce(part, [](float u, float v) { return K::combine_a(u, v); });
      float b = 0.0f;
      if constexpr (K::has_b) {
        const float c = K::centre(a);
        for (int t = 0; t < threads; ++t) {
          float s = 0.0f;
          for (long j = t; j < K::cols; j += threads) s = K::add_b(s, x[std::size_t(j)], c);
          part[std::size_t(t)] = s;
        }
        b = block_allreduce(part, [](float u, float v) { return K::combine_b(u, v); });
      }
      const typename K::scalars s = K::finish(a, b);
      for (long j = 0; j < K::cols; ++j) {
        pt.i[K::last] = j;
        K::store(p, pt, x[std::size_t(j)], s);
      }
    }
  }

  // ---- gemm: the products in f32, then the generated epilogue ----
  template <int GI, int... P>
  void gemm_parts(std::integer_sequence<int, P...>) {
    (gemm_part<GI, P>(), ...);
  }
  template <int GI, int P>
  void gemm_part() {
    using D = packed<GI>;
    using Ops = gen::gemm_operands<D, P>;
    constexpr fd::cuda::gemm_launch e = lp[GI].gemm[std::size_t(P)];
    constexpr fd::plan::gemm_part pt = full<GI>::get().gemm[std::size_t(P)];
    constexpr int ln = lp[GI].layernorm;
    // A sibling launch with one shared epilogue computes this part with its first part's code on
    // this part's buffers (executor.hpp's remapped_ptrs).
    constexpr int L = fd::cuda::launching_part(lp[GI], P);
    constexpr bool shared = L != P && lp[GI].gemm[std::size_t(L)].shared_epilogue;
    using Epi = gen::gemm_epilogue<D, shared ? L : P>;
    gen::access_ptrs p = ptrs<GI>();
    if constexpr (shared) {
      constexpr auto nodes = fd::cuda::sibling_load_nodes(full<GI>::get(), L, P);
      for (int a = 0; a < fd::plan::max_accesses; ++a)
        if (nodes[std::size_t(a)] >= 0) p.at[a] = buf(nodes[std::size_t(a)]);
      ++shared_parts;
    }
    const std::byte *a = buf(pt.a.base), *b = buf(pt.b.base);
    std::vector<float> row(static_cast<std::size_t>(e.n));
    for (long z = 0; z < Ops::batches; ++z)
      for (long i = 0; i < e.m; ++i) {
        for (long j = 0; j < e.n; ++j) {
          float acc = 0.0f;
          for (long k = 0; k < e.k; ++k)
            acc +=
                load(e.a_type, a, Ops::a_offset + Ops::a_batch(z) + i * Ops::a_rs + k * Ops::a_ks) *
                load(e.b_type, b, Ops::b_offset + Ops::b_batch(z) + k * Ops::b_ks + j * Ops::b_ns);
          row[std::size_t(j)] = Epi::value(p, z, acc, i, j);
        }
        if constexpr (ln >= 0)
          layernorm<ln>(row, i);  // gemm_layernorm: the GEMM's own output is never written
        else
          for (long j = 0; j < e.n; ++j)
            store(e.out_type, buf(pt.out), (z * e.m + i) * e.n + j, row[std::size_t(j)]);
      }
    if constexpr (ln >= 0) ++merged;  // a layernorm is finished only by a one-part GEMM group
  }
  // gemm_mma_layernorm_kernel's arithmetic on one row of the epilogue's values.
  template <int RG>
  void layernorm(const std::vector<float>& v, long i) {
    constexpr const fd::plan::kernel_desc& r = full<RG>::get();
    constexpr fd::plan::access ga = r.c.acc[std::size_t(r.gamma)],
                               ba = r.c.acc[std::size_t(r.beta)];
    constexpr fd::plan::access st = r.c.acc[std::size_t(r.store)];
    const long n = long(v.size());
    float sum = 0.0f, sq = 0.0f;
    for (float x : v) sum += x;
    const float mean = sum / float(n);
    for (float x : v) sq += (x - mean) * (x - mean);
    const float rstd = 1.0f / std::sqrt(sq / float(n) + r.eps);
    for (long j = 0; j < n; ++j) {
      const float y =
          (v[std::size_t(j)] - mean) * rstd * load(ga.type, buf(ga.node), ga.at.base + j) +
          load(ba.type, buf(ba.node), ba.at.base + j);
      store(st.type, buf(st.node), i * n + j, y);
    }
  }

  // ---- attention: attention_general_kernel's online softmax, one query at a time ----
  template <int GI>
  void attention() {
    using D = packed<GI>;
    using Att = gen::attention_operands<D>;
    constexpr fd::cuda::attention_launch e = lp[GI].att;
    constexpr fd::plan::attention_part a = full<GI>::get().att;
    constexpr int KT = 32, Dh = int(Att::head_dim);
    gen::score_program<D> score{};
    score.ptr = ptrs<GI>();
    const std::byte *q = buf(a.q.base), *k = buf(a.k.base), *v = buf(a.v.base);
    std::byte* o = buf(a.o.base);
    constexpr float neg_inf = -INFINITY;
    std::array<float, 32> s{}, p{};
    std::vector<float> acc(static_cast<std::size_t>(Dh));
    for (long b = 0; b < Att::batches; ++b)
      for (long h = 0; h < Att::heads; ++h)
        for (long i = 0; i < Att::seq_q; ++i) {
          const long kvh = h / Att::group;
          const long i_last = std::min(i / 8 * 8 + 7, Att::seq_q - 1);  // the block's last query
          long tiles = (Att::seq_kv + KT - 1) / KT;
          if (Att::causal) {
            const long visible = i_last + Att::causal_offset + 1;
            tiles = visible <= 0 ? 0 : std::min((visible + KT - 1) / KT, tiles);
          }
          const long qo = Att::template offset<0> + Att::template batch<0>(b) +
                          h * Att::template head_stride<0> + i * Att::template row_stride<0>;
          const long ko = Att::template offset<1> + Att::template batch<1>(b) +
                          kvh * Att::template head_stride<1>;
          const long vo = Att::template offset<2> + Att::template batch<2>(b) +
                          kvh * Att::template head_stride<2>;
          float m = neg_inf, l = 0.0f;
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (long kt = 0; kt < tiles; ++kt) {
            for (int lane = 0; lane < KT; ++lane) {
              const long key = kt * KT + lane;
              s[std::size_t(lane)] = neg_inf;
              if (key < Att::seq_kv && (!Att::causal || key <= i + Att::causal_offset)) {
                float dot = 0.0f;
                for (int d = 0; d < Dh; ++d)
                  dot =
                      std::fma(load(e.q_type, q, qo + d),
                               load(e.k_type, k, ko + key * Att::template row_stride<1> + d), dot);
                s[std::size_t(lane)] = score.apply(Att::scale * dot, b, h, i, key);
              }
            }
            const float tmax =
                warp_allreduce(s, [](float x, float y) { return fd::cuda::nan_max(x, y); });
            const float m_new = fd::cuda::nan_max(m, tmax);
            const float shift = m_new == neg_inf ? 0.0f : m_new;
            const float alpha = std::exp(m - shift);
            for (int lane = 0; lane < KT; ++lane)
              p[std::size_t(lane)] = std::exp(s[std::size_t(lane)] - shift);
            l = l * alpha + warp_allreduce(p, [](float x, float y) { return x + y; });
            m = m_new;
            for (float& x : acc) x *= alpha;
            for (int j = 0; j < KT; ++j) {
              const long key = kt * KT + j;
              for (int d = 0; d < Dh; ++d) {
                const float vv = key < Att::seq_kv
                                     ? load(e.v_type, v, vo + key * Att::template row_stride<2> + d)
                                     : 0.0f;
                acc[std::size_t(d)] = std::fma(p[std::size_t(j)], vv, acc[std::size_t(d)]);
              }
            }
          }
          const float inv = l > 0.0f ? 1.0f / l : (l == l ? 0.0f : l);
          const long oo = Att::template offset<3> + Att::template batch<3>(b) +
                          h * Att::template head_stride<3> + i * Att::template row_stride<3>;
          for (int d = 0; d < Dh; ++d) store(e.o_type, o, oo + d, acc[std::size_t(d)] * inv);
        }
  }

  fd::cuda::device_layout<N> layout_;
  std::vector<std::byte> memory_;
  const typename fd::cuda::call_schedule<N>::addresses* addr_ = nullptr;
};

// Random bindings (gammas near 1, inputs larger than weights) copied into the emulated device
// memory; returns the worst norm-wise relative L2 error of the outputs against the reference.
// With Twin (the same program in f32), the reference runs in f32 on the same (bf16-rounded)
// values: the error of the bf16 computation itself, not the difference of two roundings.
template <class Program, class Twin = Program>
double emulated_error(unsigned seed, int* launches = nullptr, int* merged = nullptr,
                      int* shared_parts = nullptr) {
  emulator<Program> em;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<fd::dynamic_tensor> data;
  std::vector<fd::reference::binding> refs;
  data.reserve(2 * em.layout().slots.size());
  for (const auto& s : em.layout().slots) {
    const fd::graph::node& n = Program::graph[s.node];
    data.emplace_back(n.type, n.shape);
    fd::dynamic_tensor& t = data.back();
    for (std::int64_t i = 0; i < n.shape.size(); ++i) {
      float v = nd(rng) * (n.op == op_kind::input ? 10.0f : 1.0f);
      if (s.name.find("gamma") != std::string::npos) v += 1.0f;
      store(n.type, t.raw(), i, v);
    }
    std::memcpy(em.at(s.offset), t.raw(), t.ref().bytes());
    if constexpr (!std::is_same_v<Twin, Program>) {
      fd::dynamic_tensor wide(dtype::f32, n.shape);
      for (std::int64_t i = 0; i < n.shape.size(); ++i)
        wide.data<float>()[i] = load(n.type, t.raw(), i);
      data.push_back(std::move(wide));
    }
    refs.push_back({s.name, data.back().ref()});
  }
  em.run();
  if (launches) *launches = em.launches;
  if (merged) *merged = em.merged;
  if (shared_parts) *shared_parts = em.shared_parts;
  const auto expected = fd::reference::run(fd::graph::graph_view(Twin::graph),
                                           std::span<const fd::reference::binding>(refs));
  double worst = 0;
  for (int o = 0; o < Program::graph.n_outputs; ++o) {
    const fd::graph::node& n = Program::graph[Program::graph.outputs[std::size_t(o)]];
    const std::byte* got = em.at(em.layout().output_offset[std::size_t(o)]);
    const void* want = const_cast<fd::dynamic_tensor&>(expected[std::size_t(o)]).raw();
    const dtype want_type = expected[std::size_t(o)].type();
    std::vector<double> a(std::size_t(n.shape.size())), b(a.size());
    for (std::int64_t i = 0; i < n.shape.size(); ++i)
      a[std::size_t(i)] = load(n.type, got, i), b[std::size_t(i)] = load(want_type, want, i);
    // compare_rel_l2: +inf where a NaN or inf appears, never NaN.
    worst = std::max(worst, fd::test::compare_rel_l2(a, b, 0.0).max_error);
  }
  return worst;
}

// One call of a program on the emulated device against the reference: every input and param set
// by fill(name, node, tensor), each state bound to the reference with its value before the call.
// An output that is a state's new value is that state's memory after the call.
struct call_result {
  double error = 0;  // the worst norm-wise relative L2 error over the outputs
  long differ = 0;   // output elements that are not the reference's exactly (NaN matches NaN)
};
template <class Program>
class checked_calls {
 public:
  emulator<Program> em;

  template <class Fill>
  call_result call(Fill fill) {
    constexpr auto& g = Program::graph;
    std::vector<fd::dynamic_tensor> data;
    std::vector<fd::reference::binding> refs;
    data.reserve(em.layout().slots.size() + Program::node_count);
    for (const auto& s : em.layout().slots) {
      const fd::graph::node& n = g[s.node];
      data.emplace_back(n.type, n.shape);
      fill(s.name, n, data.back());
      std::memcpy(em.at(s.offset), data.back().raw(), data.back().ref().bytes());
      refs.push_back({s.name, data.back().ref()});
    }
    for (int i = 0; i < int(Program::node_count); ++i) {
      const std::int64_t at = em.layout().state_offset[std::size_t(i)];
      if (at < 0) continue;
      data.emplace_back(g[i].type, g[i].shape);
      std::memcpy(data.back().raw(), em.at(std::size_t(at)), data.back().ref().bytes());
      refs.push_back({g[i].name.view(), data.back().ref()});
    }
    em.run();
    const auto expected =
        fd::reference::run(fd::graph::graph_view(g), std::span<const fd::reference::binding>(refs));
    call_result r;
    for (int o = 0; o < g.n_outputs; ++o) {
      const fd::graph::node& n = g[g.outputs[std::size_t(o)]];
      const std::byte* got = em.at(em.layout().output_offset[std::size_t(o)]);
      const fd::dynamic_tensor& want = expected[std::size_t(o)];
      std::vector<double> a(std::size_t(n.shape.size())), b(a.size());
      for (std::int64_t i = 0; i < n.shape.size(); ++i) {
        a[std::size_t(i)] = load(n.type, got, i);
        b[std::size_t(i)] = load(want.type(), const_cast<fd::dynamic_tensor&>(want).raw(), i);
        const double x = a[std::size_t(i)], y = b[std::size_t(i)];
        r.differ += !(x == y || (x != x && y != y));
      }
      r.error = std::max(r.error, fd::test::compare_rel_l2(a, b, 0.0).max_error);
    }
    return r;
  }
};

// Normal values (inputs larger than weights), as emulated_error's.
struct normal_fill {
  std::mt19937 rng;
  void operator()(const std::string&, const fd::graph::node& n, fd::dynamic_tensor& t) {
    std::normal_distribution<float> nd(0.0f, 0.1f);
    for (std::int64_t i = 0; i < n.shape.size(); ++i)
      store(n.type, t.raw(), i, nd(rng) * (n.op == op_kind::input ? 10.0f : 1.0f));
  }
};

using namespace fd::test::cuda_programs;

}  // namespace

TEST_CASE(
    "the bf16 seed transformer's device schedule, emulated on the CPU, matches the reference "
    "within 1e-2 in 5 launches per layer") {
  int launches = 0, merged = 0, shared = 0;
  const double err = emulated_error<seed_bf16::program_type, seed_f32::program_type>(
      21, &launches, &merged, &shared);
  const double err_bf16_ref = emulated_error<seed_bf16::program_type>(21);
  MESSAGE("seed bf16 (emulated schedule): relative L2 error "
          << err << " against the f32 reference, " << err_bf16_ref
          << " against the bf16 reference (rounds every node)");
  CHECK(err < 1e-2);
  CHECK(err_bf16_ref < 2e-2);
  CHECK(launches == 10);  // per layer: Q/K/V siblings, attention, out-projection + layernorm,
  CHECK(merged == 4);     // fc1, fc2 + layernorm
  CHECK(shared == 4);     // K and V run Q's epilogue code (bias) on their own buffers
}

TEST_CASE(
    "a 3-layer causal pre-LN bf16 stack (odd layer count: carry-buffer ping-pong) matches within "
    "1e-2") {
  const double err = emulated_error<causal_bf16::program_type, causal_f32::program_type>(22);
  const double err_bf16_ref = emulated_error<causal_bf16::program_type>(22);
  MESSAGE("causal pre-LN bf16, 3 layers (emulated schedule): relative L2 error "
          << err << " against the f32 reference, " << err_bf16_ref
          << " against the bf16 reference");
  CHECK(err < 1e-2);
  CHECK(err_bf16_ref < 2e-2);
}

TEST_CASE("the f32 seed transformer (exact f32 GEMMs, general attention) matches within 1e-5") {
  const double err = emulated_error<seed_f32::program_type>(26);
  MESSAGE("seed f32 (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-5);
}

TEST_CASE(
    "f32 GEMM + bias + relu, layernorm with an epilogue, and a transposed loop match within 1e-5") {
  const double err = emulated_error<decltype(f32_mlp)>(23);
  MESSAGE("f32 program (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-5);
}

TEST_CASE("a bf16 loop group with a broadcast bias and gelu_tanh matches within 1e-2") {
  constexpr auto x = fd::input<"x", fd::bf16, 128, 256>();
  constexpr auto bias = fd::param<"bias", fd::bf16, 256>();
  CHECK(emulated_error<decltype(fd::compile(fd::gelu_tanh(x * fd::lit<0.5> + bias)))>(24) < 1e-2);
}

TEST_CASE("sin and cos in a loop group (the device policy's sinf, cosf) match within 1e-6") {
  constexpr auto x = fd::input<"x", float, 64, 96>();
  const double err =
      emulated_error<decltype(fd::compile(fd::sin(x) * fd::cos(x * fd::lit<0.5>) + x))>(36);
  MESSAGE("sin and cos (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-6);
}

TEST_CASE("floor, ceil, trunc and round in a loop group (floorf, ceilf, truncf, rintf) match") {
  constexpr auto x = fd::input<"x", float, 64, 96>();
  constexpr auto e = fd::floor(x) + fd::ceil(x * fd::lit<0.5>) * fd::trunc(x * fd::lit<0.25>) -
                     fd::round(x * fd::lit<4.0>);
  const double err = emulated_error<decltype(fd::compile(e))>(37);
  MESSAGE("rounding ops (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-7);
}

TEST_CASE("grouped-query causal attention (4 query heads, 2 key/value heads) matches within 1e-2") {
  const double err = emulated_error<gqa_bf16, gqa_f32>(25);
  MESSAGE("grouped-query bf16 (emulated schedule): relative L2 error "
          << err << " against the f32 reference");
  CHECK(err < 1e-2);
}

TEST_CASE(
    "batched bf16 attention with an additive key mask (a score program) matches within 1e-2") {
  const double err = emulated_error<masked_bf16, masked_f32>(27);
  MESSAGE("masked batched attention bf16 (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("causal attention of 48 queries over 80 keys (seq_q != seq_kv) matches within 1e-5") {
  const double err = emulated_error<decltype(offset_causal)>(28);
  MESSAGE("offset causal attention f32 (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-5);
}

TEST_CASE("reductions over the inner, a kept middle and the outer axis match within 1e-5") {
  const double err = emulated_error<decltype(reductions)>(29);
  MESSAGE("reduce groups (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-5);
}

TEST_CASE(
    "a softmax over 50257 columns (512 threads per row, prologue per pass) matches within 1e-2") {
  const double err = emulated_error<vocab_bf16, vocab_f32>(30);
  MESSAGE("vocabulary softmax bf16 (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-2);
}

TEST_CASE("GEMMs off every tile (odd sizes, a transposed B, a batch of 3) match the reference") {
  const double err16 = emulated_error<odd_bf16, odd_f32>(31);
  const double err32 = emulated_error<odd_f32>(31);
  MESSAGE("odd GEMMs (emulated schedule): relative L2 error " << err16 << " (bf16), " << err32
                                                              << " (f32)");
  CHECK(err16 < 1e-2);
  CHECK(err32 < 1e-5);
}

TEST_CASE(
    "embedding gathers (in a loop, a row prologue, a reduce prologue) read the clamped row for ids "
    "outside the table, as the reference") {
  using P = decltype(embedding);
  checked_calls<P> calls;
  normal_fill normal{std::mt19937(32)};
  std::mt19937 rng(33);
  int below = 0, above = 0;
  const call_result r =
      calls.call([&](const std::string& name, const fd::graph::node& n, fd::dynamic_tensor& t) {
        if (name != "ids" && name != "ids2") return normal(name, n, t);
        fill_ids(t.data<std::int32_t>(), n.shape.size(), rng);
        for (std::int64_t i = 0; i < n.shape.size(); ++i) {
          below += t.data<std::int32_t>()[i] < 0;
          above += t.data<std::int32_t>()[i] > 49;
        }
      });
  MESSAGE("embedding (emulated schedule): relative L2 error " << r.error << ", " << r.differ
                                                              << " elements differ");
  CHECK(below > 0);
  CHECK(above > 0);
  CHECK(r.error < 1e-6);  // the softmax and the sums may round differently
  // the scaled rows are exact: output 0 differs nowhere
  const auto& g = P::graph;
  const fd::graph::node& out = g[g.outputs[0]];
  std::vector<float> got(std::size_t(out.shape.size()));
  for (std::size_t i = 0; i < got.size(); ++i)
    got[i] = load(out.type, calls.em.at(calls.em.layout().output_offset[0]), long(i));
  const float* table = nullptr;
  const std::int32_t* ids = nullptr;
  for (const auto& s : calls.em.layout().slots) {
    if (s.name == "table") table = reinterpret_cast<const float*>(calls.em.at(s.offset));
    if (s.name == "ids") ids = reinterpret_cast<const std::int32_t*>(calls.em.at(s.offset));
  }
  REQUIRE((table && ids));
  int wrong = 0;
  for (int k = 0; k < 28; ++k)
    for (int c = 0; c < 24; ++c)
      wrong += got[std::size_t(k * 24 + c)] != 2.0f * table[std::clamp(ids[k], 0, 49) * 24 + c];
  CHECK(wrong == 0);
}

TEST_CASE("dynamic slices and a dynamic update slice at run-time starts (clamped) match exactly") {
  checked_calls<decltype(windows)> calls;
  normal_fill normal{std::mt19937(34)};
  // starts before, inside and past the ends of both axes (9 columns, 16 rows)
  for (const std::int32_t start : {-3, 0, 4, 7, 11, 40}) {
    const call_result r = calls.call(with_i32(normal, "start", start));
    CAPTURE(start);
    CHECK(r.differ == 0);
  }
  CHECK(calls.em.updates == 6);
  CHECK(calls.em.in_place_updates == 0);  // the input keeps its buffer: the whole result is written
}

TEST_CASE(
    "a miniature KV cache: a row of two states (f32, bf16) written in place per call, read back") {
  using P = decltype(cache_step);
  checked_calls<P> calls;
  normal_fill normal{std::mt19937(35)};
  // positions in order, then one past the end (clamped to the last row), one before the start
  // (row 0) and one overwritten
  const std::int32_t positions[] = {0, 1, 2, 3, 4, 5, 6, 7, 9, -2, 3};
  for (const std::int32_t pos : positions) {
    const call_result r = calls.call(with_i32(normal, "pos", pos));
    CAPTURE(pos);
    CHECK(r.differ == 0);
    CHECK(r.error == 0.0);
  }
  CHECK(calls.em.updates == 2 * 11);
  CHECK(calls.em.in_place_updates == 2 * 11);  // each state's new value in its own memory
  // The keys' state after the calls: row 7 holds the call with pos 9 (clamped), row 3 the last.
  const auto& lay = calls.em.layout();
  int keys = -1;
  for (int i = 0; i < int(P::node_count); ++i)
    if (P::graph[i].op == op_kind::state && P::graph[i].name.view() == "k_cache") keys = i;
  REQUIRE(keys >= 0);
  const float* kc =
      reinterpret_cast<const float*>(calls.em.at(std::size_t(lay.state_offset[std::size_t(keys)])));
  int zero_rows = 0;
  for (int h = 0; h < 2; ++h)
    for (int row = 0; row < 8; ++row) {
      bool zero = true;
      for (int c = 0; c < 6; ++c) zero = zero && kc[(h * 8 + row) * 6 + c] == 0.0f;
      zero_rows += zero;
    }
  CHECK(zero_rows == 0);  // every row written at least once
}

TEST_CASE("argmax picks the first maximum, NaN as the maximum (first NaN), index 0 for all -inf") {
  checked_calls<decltype(argmaxes)> calls;
  std::mt19937 rng(36);
  const call_result r =
      calls.call([&](const std::string& name, const fd::graph::node& n, fd::dynamic_tensor& t) {
        fill_argmax(name, t.data<float>(), n.shape, rng);
      });
  MESSAGE("argmax (emulated schedule): " << r.differ << " indices differ from the reference");
  CHECK(r.differ == 0);
  // the rules themselves, read off the emulated outputs
  const auto& lay = calls.em.layout();
  const auto* x = reinterpret_cast<const std::int32_t*>(calls.em.at(lay.output_offset[0]));
  const auto* wide = reinterpret_cast<const std::int32_t*>(calls.em.at(lay.output_offset[1]));
  const auto* mid = reinterpret_cast<const std::int32_t*>(calls.em.at(lay.output_offset[2]));
  CHECK(x[0] == 0);
  CHECK(x[1] == 37);
  CHECK(x[2] == 299);
  CHECK(x[3] == 0);
  CHECK(wide[0] == 4000);
  CHECK(wide[1] == 0);
  CHECK(wide[2] == 33);
  CHECK(mid[1 * 3 + 2] == 20);
  CHECK(mid[2 * 3 + 0] == 49);
}
