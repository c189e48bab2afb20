#pragma once
// fusedsl::cuda::executor: runs a compiled program on one GPU (compile with nvcc).
//
//   fd::cuda::executor run{program, stream};   // one cudaMalloc: plan arena + bindings + outputs
//   run.bind("layers.0.attn.q.w", w);          // weights: uploaded once, asynchronously
//   run.bind("x", x);                          // inputs: uploaded before each call
//   run.run();                                 // one cudaGraphLaunch (the first call captures it)
//   run.read_output(0, y); run.synchronize();  // asynchronous download
//   run.read_state("k_cache", c);              // a state (fd::state), kept across calls
//
// Each fusion group runs as the launch executor_plan.hpp chooses for its kernel descriptor
// (plan/lower.hpp), every shape a template argument: the generated loop, reduce and row kernels
// (plan_kernels.cuh), GEMMs with the generated epilogue (gemm.cuh, gemm_strided.cuh), flash or
// general attention with the generated score program (attention.cuh, attention_general.cuh),
// dynamic update slices (update_slice_kernel; gathers and dynamic slices are loads of the
// generated code). States live in the same allocation, zero at construction, and a state's new
// value is written into it each call (in place for a dynamic update slice). A stacked block's
// launches are added once per layer with that layer's weights. The device memory
// never changes after construction, so the launch list is captured once into a CUDA graph and
// replayed. A program with a group no launch computes does not compile: the error names the
// group, its kind, the reason and the anchor's shape (group_has_no_cuda_kernel below).
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fusedsl/backend/bindings.hpp"
#include "fusedsl/backend/cuda/attention.cuh"
#include "fusedsl/backend/cuda/attention_general.cuh"
#include "fusedsl/backend/cuda/codegen.cuh"
#include "fusedsl/backend/cuda/device_arena.hpp"
#include "fusedsl/backend/cuda/executor_plan.hpp"
#include "fusedsl/backend/cuda/executor_schedule.hpp"
#include "fusedsl/backend/cuda/gemm.cuh"
#include "fusedsl/backend/cuda/gemm_strided.cuh"
#include "fusedsl/backend/cuda/graph_runner.hpp"
#include "fusedsl/backend/cuda/plan_kernels.cuh"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/plan/memory.hpp"

namespace fusedsl::cuda {

// The generated epilogue of part P in the form gemm.cuh's kernels take (`out_type`, `apply`).
template <class Desc, int P>
struct device_epilogue : gen::gemm_epilogue<Desc, P> {
  using out_type = storage_t<gen::gemm_epilogue<Desc, P>::out_dtype>;
};

// The epilogues of parts P0 .. P0 + Count - 1, one launch's siblings whose epilogue codes differ:
// `member` picks one (a block computes one member, so the choice is uniform in a block). Siblings
// with the same code (gemm_launch::shared_epilogue) take device_epilogue<Desc, P0> instead.
template <class Desc, int P0, int Count>
struct epilogue_set {
  using out_type = storage_t<gen::gemm_epilogue<Desc, P0>::out_dtype>;
  gen::access_ptrs ptr;
  int member = 0;

  template <int I = 0>
  __host__ __device__ float apply(float acc, int row, int col, int ld) const {
    if constexpr (I + 1 == Count) {
      return gen::gemm_epilogue<Desc, P0 + I>::value(ptr, 0, acc, row, col);
    } else {
      if (member == I) return gen::gemm_epilogue<Desc, P0 + I>::value(ptr, 0, acc, row, col);
      return apply<I + 1>(acc, row, col, ld);
    }
  }
};

// Instantiated for a group that no CUDA launch computes: compiling it fails with the reason, and
// the template arguments in the compiler's note name the group, its kind and its anchor's shape.
template <int Group, plan::group_kind Kind, refusal Why, std::int64_t... Shape>
struct group_has_no_cuda_kernel {
  static_assert(Why != refusal::lowering_refused,
                "cuda::executor: the lowering refused this fusion group (plan::describe or "
                "cuda::refusal_message say why), and the CUDA backend has no interpreter");
  static_assert(Why != refusal::attention_head_dim_above_256,
                "cuda::executor: attention with head_dim above 256 has no CUDA kernel");
  static_assert(Why != refusal::runtime_key_length,
                "cuda::executor: attention stopped at a run-time key length (a KV cache's fill) "
                "has no CUDA kernel; the CPU executor runs it");
  static constexpr bool value = false;
};

namespace detail {
// Instantiates group_has_no_cuda_kernel for group GI if it is refused (its static_assert is then
// the one error the program gets); true otherwise.
template <class Plan, class Fusion, int GI, std::size_t... R>
constexpr bool check_group(std::index_sequence<R...>) {
  if constexpr (Plan::get()[GI].refused())
    (void)group_has_no_cuda_kernel<GI, Fusion::get().groups[std::size_t(GI)].kind,
                                   Plan::get()[GI].why, Plan::get()[GI].shape[int(R)]...>::value;
  return true;
}
template <class Plan, class Fusion, std::size_t... GI>
constexpr bool check_groups(std::index_sequence<GI...>) {
  return (true && ... &&
          check_group<Plan, Fusion, int(GI)>(
              std::make_index_sequence<std::size_t(Plan::get()[int(GI)].shape.rank)>{}));
}
}  // namespace detail

// What a device executor holds, in bytes (all of it one cudaMalloc).
struct memory_footprint {
  std::size_t arena = 0;     // the plan's arena (constexpr size), aligned
  std::size_t bindings = 0;  // a copy of every input and param (per layer for stacked params)
  std::size_t outputs = 0;   // the outputs that are not a state's new value
  std::size_t states = 0;    // the program's states (fd::state), kept across calls
  std::size_t total() const { return arena + bindings + outputs + states; }
};

template <class Program>
class executor {
  static constexpr auto& g = Program::graph;
  static constexpr std::size_t N = Program::node_count;
  static constexpr auto& fp = Program::fusion;
  static constexpr auto& mp = Program::memory;
  static constexpr int G = fp.n_groups;

 public:
  using program_plan = device_program<Program>;
  // Group GI's descriptor (host code reads its node ids); kernels are instantiated on the same
  // descriptor packed (codegen.cuh's packed_desc).
  template <int GI>
  using full_desc = typename program_plan::template desc<GI>;

  // How every group runs (host data; tests read it).
  static constexpr const launch_plan<G>& launches() { return program_plan::launches; }
  static constexpr const plan::lowered_plan<N, G>& kernels_plan() {
    return program_plan::lowered::value;
  }

 private:
  struct plan_ref {
    static constexpr const launch_plan<G>& get() { return program_plan::launches; }
  };
  struct fusion_ref {
    static constexpr const plan::fusion_plan<N>& get() { return fp; }
  };
  static_assert(
      detail::check_groups<plan_ref, fusion_ref>(std::make_index_sequence<std::size_t(G)>{}));

 public:
  executor(Program, cudaStream_t stream) : runner_(stream), stream_(stream) {
    layout_ = layout_device_memory(g, mp, device_arena::alignment);  // slots in table_'s order
    bound_.assign(layout_.slots.size(), nullptr);
    arena_.emplace(layout_.bytes);
    reset_states();
    build_launches();
  }

  using binding_info = graph::binding_info;
  std::vector<binding_info> bindings() const { return table_.infos(); }

  // Asynchronous upload into the executor's own copy: `t` must stay unchanged until the stream
  // has passed this point (synchronize()).
  void bind(std::string_view name, tensor_ref t) {
    const std::size_t k = table_.check(name, t);
    std::byte* slot = at(layout_.slots[k].offset);
    check(cudaMemcpyAsync(slot, t.data, t.bytes(), cudaMemcpyHostToDevice, stream_),
          "cuda::executor: bind (upload)");
    bound_[k] = slot;
  }

  // Device address of a binding (for inputs produced on the device: write there, skip bind).
  void* device_binding(std::string_view name) {
    const std::size_t k = table_.find(name);
    void* p = at(layout_.slots[k].offset);
    bound_[k] = p;
    return p;
  }
  const void* device_output(int k) const {
    return at(layout_.output_offset[std::size_t(check_output(k))]);
  }

  // One call: the first runs the launches eagerly and captures them; later ones replay the graph
  // (on the legacy default stream, nullptr, every call runs eagerly).
  void run() {
    table_.require_bound(bound_.data());
    if (runner_.captured()) {
      runner_.replay();
      return;
    }
    runner_.run_eager();  // also sets the kernels' shared-memory limits outside capture
    if (stream_ != nullptr) runner_.capture();  // the legacy default stream cannot be captured
  }
  // Every launch on the stream, without the graph (debugging, per-step checks).
  void run_eager() const { runner_.run_eager(); }

  // Asynchronous download of output k into host memory.
  void read_output(int k, tensor_ref t) const {
    backend::binding_table::check_output(g, k, t, false);
    check(cudaMemcpyAsync(t.data, device_output(k), t.bytes(), cudaMemcpyDeviceToHost, stream_),
          "cuda::executor: read_output");
  }
  void synchronize() const { check(cudaStreamSynchronize(stream_), "cuda::executor: synchronize"); }

  // ---- states (fd::state): device memory kept across calls ----

  // A state's device memory (its dtype and shape): its value between calls. Reading or writing it
  // from the host goes through read_state / write_state.
  tensor_ref state(std::string_view name) const {
    const int i = state_node(name);
    return tensor_ref{at(std::size_t(layout_.state_offset[std::size_t(i)])), g[i].type, g[i].shape};
  }
  // Asynchronous download of a state's value into host memory.
  void read_state(std::string_view name, tensor_ref t) const {
    const tensor_ref s = state(name);
    check_state_shape(name, s, t);
    check(cudaMemcpyAsync(t.data, s.data, s.bytes(), cudaMemcpyDeviceToHost, stream_),
          "cuda::executor: read_state");
  }
  // Asynchronous upload of a state's value from host memory (`t` unchanged until synchronize()).
  void write_state(std::string_view name, tensor_ref t) {
    const tensor_ref s = state(name);
    check_state_shape(name, s, t);
    check(cudaMemcpyAsync(s.data, t.data, s.bytes(), cudaMemcpyHostToDevice, stream_),
          "cuda::executor: write_state");
  }
  // Every state back to zeros, as after construction (asynchronous, on the stream).
  void reset_states() {
    if (layout_.states_bytes > 0)
      check(cudaMemsetAsync(at(layout_.states_begin), 0, layout_.states_bytes, stream_),
            "cuda::executor: reset_states");
  }

  const graph_runner& runner() const { return runner_; }
  std::size_t launches_per_call() const { return runner_.size(); }
  std::size_t device_bytes() const { return arena_->capacity(); }
  // Everything this executor allocated on the device, in bytes (total() == device_bytes()).
  memory_footprint footprint() const {
    memory_footprint f;
    f.arena = layout_.arena_bytes;
    f.bindings = layout_.binding_bytes;
    f.outputs = layout_.output_bytes;
    f.states = layout_.states_bytes;
    f.arena += device_bytes() - f.total();  // an empty program's minimum allocation
    return f;
  }

 private:
  std::byte* at(std::size_t offset) const {
    return static_cast<std::byte*>(arena_->data()) + offset;
  }
  static int state_node(std::string_view name) {
    return backend::binding_table::state_node(g, name);
  }
  static void check_state_shape(std::string_view name, const tensor_ref& s, const tensor_ref& t) {
    backend::binding_table::check_state(name, s, t);
  }
  static int check_output(int k) {
    backend::binding_table::output_node(g, k);
    return k;
  }

  // Every group's launches of one call, layer by layer, with that step's device pointers.
  void build_launches() {
    static constexpr auto table = make_table(std::make_index_sequence<std::size_t(G)>{});
    call_schedule<N> schedule(g, fp, mp, layout_);
    schedule.for_each([&](int gi, int it, const typename call_schedule<N>::addresses& addr) {
      for (std::size_t i = 0; i < N; ++i)
        val_[i] = addr[i] >= 0 ? at(std::size_t(addr[i])) : nullptr;
      (this->*table[std::size_t(gi)])(it);
    });
  }

  template <class T = void>
  T* ptr(int node, std::int64_t offset = 0) const {
    if constexpr (std::is_void_v<T>)
      return val_[std::size_t(node)];
    else
      return reinterpret_cast<T*>(val_[std::size_t(node)]) + offset;
  }
  static std::string step_name(int gi, int it) {
    const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
    return backend::binding_prefix(g, gr.region, it) + std::string(plan::name_of(gr.kind)) +
           " (group " + std::to_string(gi) + ", anchor %" + std::to_string(gr.anchor) + ")";
  }

  // The device address of every access of group GI's code, this layer.
  template <int GI>
  gen::access_ptrs access_ptrs_of() const {
    constexpr const plan::kernel_desc& d = full_desc<GI>::get();
    gen::access_ptrs p{};
    for (int a = 0; a < d.c.n_access; ++a) {
      const int node = d.c.acc[std::size_t(a)].node;
      p.at[a] = node >= 0 ? val_[std::size_t(node)] : nullptr;
    }
    return p;
  }

  template <int GI>
  void add_group(int it) {
    using D = decltype(gen::packed_desc_of<full_desc<GI>>::make());
    constexpr group_launch L = launches()[GI];
    if constexpr (L.kind == launch_kind::loop) {
      const gen::access_ptrs p = access_ptrs_of<GI>();
      runner_.add(step_name(GI, it), [p](cudaStream_t s) { launch_loop_group<D>(s, p); });
    } else if constexpr (L.kind == launch_kind::reduce) {
      constexpr int lanes = L.reduce_lanes;
      const gen::access_ptrs p = access_ptrs_of<GI>();
      runner_.add(step_name(GI, it), [p](cudaStream_t s) { launch_reduce_group<D, lanes>(s, p); });
    } else if constexpr (L.kind == launch_kind::row) {
      constexpr int threads = L.row_threads;
      constexpr bool cached = L.row_cached;
      const gen::access_ptrs p = access_ptrs_of<GI>();
      runner_.add(step_name(GI, it),
                  [p](cudaStream_t s) { launch_row_group<D, threads, cached>(s, p); });
    } else if constexpr (L.kind == launch_kind::gemm) {
      add_gemms<GI>(it, std::make_integer_sequence<int, L.n_gemm>{});
    } else if constexpr (L.kind == launch_kind::attention) {
      add_attention<GI>(it);
    } else if constexpr (L.kind == launch_kind::update) {
      add_update<GI>(it);
    } else {
      (void)it;  // a repeat (its body's groups are added per layer), or a row group run by the
                 // GEMM before it
    }
  }

  // ---- gemm ----
  template <int GI, int... P>
  void add_gemms(int it, std::integer_sequence<int, P...>) {
    (add_gemm<GI, P>(it), ...);
  }
  template <int GI, int P, class In, class Epi, int S, int... J>
  void set_siblings(gemm_siblings<In, Epi, S>& sib, const gen::access_ptrs& p,
                    std::integer_sequence<int, J...>) const {
    using F = full_desc<GI>;
    using Out = typename Epi::out_type;
    ((sib.b[J] = ptr<const In>(F::get().gemm[std::size_t(P + J)].b.base,
                               F::get().gemm[std::size_t(P + J)].b.offset),
      sib.c[J] = ptr<Out>(F::get().gemm[std::size_t(P + J)].out),
      sib.epi[J] = epilogue_of<Epi>(p, J)),
     ...);
  }
  template <class Epi>
  static Epi epilogue_of(const gen::access_ptrs& p, int member) {
    if constexpr (requires { Epi::member; })
      return Epi{p, member};
    else
      return Epi{{p, 0}};
  }
  // Part P's access pointers with part Q's buffers in the slots of P's epilogue loads (parts whose
  // epilogues are the same code: executor_plan.hpp's same_epilogue).
  template <int GI, int P, int Q>
  gen::access_ptrs remapped_ptrs() const {
    constexpr auto nodes = sibling_load_nodes(full_desc<GI>::get(), P, Q);
    gen::access_ptrs p = access_ptrs_of<GI>();
    for (int a = 0; a < plan::max_accesses; ++a)
      if (nodes[std::size_t(a)] >= 0) p.at[a] = val_[std::size_t(nodes[std::size_t(a)])];
    return p;
  }
  template <int GI, int P, class In, class Epi, int S, int... J>
  void set_shared_siblings(gemm_siblings<In, Epi, S>& sib, std::integer_sequence<int, J...>) const {
    using F = full_desc<GI>;
    using Out = typename Epi::out_type;
    ((sib.b[J] = ptr<const In>(F::get().gemm[std::size_t(P + J)].b.base,
                               F::get().gemm[std::size_t(P + J)].b.offset),
      sib.c[J] = ptr<Out>(F::get().gemm[std::size_t(P + J)].out),
      sib.epi[J] = epilogue_of<Epi>(remapped_ptrs<GI, P, P + J>(), J)),
     ...);
  }
  template <int GI, int P>
  void add_gemm(int it) {
    using D = decltype(gen::packed_desc_of<full_desc<GI>>::make());
    constexpr gemm_launch e = launches()[GI].gemm[std::size_t(P)];
    constexpr plan::gemm_part pt = full_desc<GI>::get().gemm[std::size_t(P)];
    if constexpr (e.absorbed) {
      (void)it;  // computed by an earlier part's launch
    } else if constexpr (e.route == gemm_route::tensor_core) {
      constexpr dtype ta = e.a_type;
      using In = storage_t<ta>;
      constexpr int M = int(e.m), Nn = int(e.n), K = int(e.k);
      const gen::access_ptrs p = access_ptrs_of<GI>();
      const In* a = ptr<const In>(pt.a.base, pt.a.offset);
      constexpr int ln = launches()[GI].layernorm;
      if constexpr (e.siblings > 0 && e.shared_epilogue) {
        constexpr int S = e.siblings + 1;
        using Epi = device_epilogue<D, P>;
        gemm_siblings<In, Epi, S> sib{};
        set_shared_siblings<GI, P>(sib, std::make_integer_sequence<int, S>{});
        runner_.add(step_name(GI, it), [a, sib](cudaStream_t s) {
          gemm_siblings_launch<M, Nn, K, In, Epi, S>(s, a, sib);
        });
      } else if constexpr (e.siblings > 0) {
        constexpr int S = e.siblings + 1;
        using Epi = epilogue_set<D, P, S>;
        gemm_siblings<In, Epi, S> sib{};
        set_siblings<GI, P>(sib, p, std::make_integer_sequence<int, S>{});
        runner_.add(step_name(GI, it), [a, sib](cudaStream_t s) {
          gemm_siblings_launch<M, Nn, K, In, Epi, S>(s, a, sib);
        });
      } else if constexpr (ln >= 0) {
        // The layernorm group after this GEMM, finished in its epilogue: the GEMM's own output
        // (read by nothing else) is never written.
        using Epi = device_epilogue<D, P>;
        using Out = typename Epi::out_type;
        using R = full_desc<ln>;
        constexpr plan::access ga = R::get().c.acc[std::size_t(R::get().gamma)];
        constexpr plan::access ba = R::get().c.acc[std::size_t(R::get().beta)];
        constexpr int out_node = R::get().c.acc[std::size_t(R::get().store)].node;
        constexpr float eps = R::get().eps;
        const In* b = ptr<const In>(pt.b.base, pt.b.offset);
        Out* c = ptr<Out>(out_node);
        const Out* gamma = ptr<const Out>(ga.node, ga.at.base);
        const Out* beta = ptr<const Out>(ba.node, ba.at.base);
        Epi epi{};
        epi.ptr = p;
        runner_.add(step_name(GI, it) + " + layernorm",
                    [a, b, c, epi, gamma, beta](cudaStream_t s) {
                      gemm_layernorm<M, Nn, K, In, Epi>(s, a, b, c, epi, gamma, beta, eps);
                    });
      } else {
        using Epi = device_epilogue<D, P>;
        using Out = typename Epi::out_type;
        const In* b = ptr<const In>(pt.b.base, pt.b.offset);
        Out* c = ptr<Out>(pt.out);
        Epi epi{};
        epi.ptr = p;
        runner_.add(step_name(GI, it),
                    [a, b, c, epi](cudaStream_t s) { gemm<M, Nn, K, In, Epi>(s, a, b, c, epi); });
      }
    } else {
      using Epi = gen::gemm_epilogue<D, P>;
      constexpr dtype ta = e.a_type, tb = e.b_type;
      Epi epi{};
      epi.ptr = access_ptrs_of<GI>();
      const void* a = ptr(pt.a.base);
      const void* b = ptr(pt.b.base);
      void* c = ptr(pt.out);
      runner_.add(step_name(GI, it), [a, b, c, epi](cudaStream_t s) {
        gemm_strided<gen::gemm_operands<D, P>, ta, tb, Epi>(s, a, b, c, epi);
      });
    }
  }

  // ---- attention ----
  template <int GI>
  void add_attention(int it) {
    using D = decltype(gen::packed_desc_of<full_desc<GI>>::make());
    constexpr attention_launch e = launches()[GI].att;
    constexpr plan::attention_part a = full_desc<GI>::get().att;
    if constexpr (e.route == attention_route::flash) {
      constexpr dtype tq = e.q_type;
      using T = storage_t<tq>;
      attention_args<T> args;
      args.q = ptr<const T>(a.q.base, a.q.offset);
      args.k = ptr<const T>(a.k.base, a.k.offset);
      args.v = ptr<const T>(a.v.base, a.v.offset);
      args.o = ptr<T>(a.o.base, a.o.offset);
      args.q_row_stride = e.q_row, args.k_row_stride = e.k_row;
      args.v_row_stride = e.v_row, args.o_row_stride = e.o_row;
      args.q_batch_stride = e.q_batch, args.k_batch_stride = e.k_batch;
      args.v_batch_stride = e.v_batch, args.o_batch_stride = e.o_batch;
      args.scale = a.scale;
      constexpr int dh = int(a.head_dim), batch = int(e.batches), heads = int(a.heads);
      constexpr int kv_heads = int(a.kv_heads), seq_q = int(a.seq_q), seq_kv = int(a.seq_kv);
      constexpr bool causal = a.causal;
      runner_.add(step_name(GI, it), [args](cudaStream_t s) {
        flash_attention<T, dh, batch, heads, kv_heads, seq_q, seq_kv, causal>(s, args);
      });
    } else {
      using Score = gen::score_program<D>;
      Score score{};
      score.ptr = access_ptrs_of<GI>();
      const void* q = ptr(a.q.base);
      const void* k = ptr(a.k.base);
      const void* v = ptr(a.v.base);
      void* o = ptr(a.o.base);
      constexpr dtype tq = e.q_type, tk = e.k_type, tv = e.v_type, to = e.o_type;
      runner_.add(step_name(GI, it), [q, k, v, o, score](cudaStream_t s) {
        attention_general<gen::attention_operands<D>, tq, tk, tv, to, Score>(s, q, k, v, o, score);
      });
    }
  }

  // ---- update ----
  template <int GI>
  void add_update(int it) {
    constexpr update_launch e = launches()[GI].upd;
    constexpr const plan::kernel_desc& d = full_desc<GI>::get();
    constexpr int bytes = e.bytes;
    constexpr long outer = e.outer, extent = e.extent, len = e.len, inner = e.inner;
    gen::update_args a;
    a.x = ptr(d.update_x);
    a.value = ptr(d.update_value);
    a.out = ptr(d.root);
    a.in_place = a.out == a.x;  // the result took the operand's buffer (a state, a KV cache)
    if constexpr (e.start_is_constant)
      a.start_constant = e.start_constant;
    else
      a.start = ptr<const std::int32_t>(d.update_start);
    runner_.add(step_name(GI, it), [a](cudaStream_t s) {
      launch_update_slice<bytes, outer, extent, len, inner>(s, a);
    });
  }

  template <std::size_t... I>
  static constexpr auto make_table(std::index_sequence<I...>) {
    return std::array<void (executor::*)(int), sizeof...(I)>{
        &executor::template add_group<int(I)>...};
  }

  std::optional<device_arena> arena_;
  graph_runner runner_;
  cudaStream_t stream_;
  device_layout<N> layout_;
  backend::binding_table table_{graph::graph_view(g)};
  std::vector<const void*> bound_;  // per slot: its device memory once bound, else null
  std::array<std::byte*, N> val_{};
};

}  // namespace fusedsl::cuda
