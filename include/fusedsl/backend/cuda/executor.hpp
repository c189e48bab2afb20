#pragma once
// fusedsl::cuda::executor: runs a compiled program on one GPU (compile with nvcc).
//
//   fd::cuda::executor run{program, stream};   // one cudaMalloc: plan arena + bindings + outputs
//   run.bind("layers.0.attn.q.w", w);          // weights: uploaded once, asynchronously
//   run.bind("x", x);                          // inputs: uploaded before each call
//   run.run();                                 // one cudaGraphLaunch (the first call captures it)
//   run.read_output(0, y); run.synchronize();  // asynchronous download
//
// Each fusion group becomes the launches executor_plan.hpp lists for it, instantiated here with
// every shape a template argument: GEMMs with the fused epilogue, flash attention, warp row
// kernels, and a loop-program kernel for general elementwise groups. A stacked block's launches
// are added once per layer with that layer's weights. The device memory never changes after
// construction, so the launch list is captured once into a CUDA graph and replayed. A group no
// kernel expresses (f32 attention, reduce groups, transposed GEMM operands, ...) makes the
// constructor throw unsupported_program naming the group and the reason; nothing is approximated.
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fusedsl/backend/cuda/attention.cuh"
#include "fusedsl/backend/cuda/device_arena.hpp"
#include "fusedsl/backend/cuda/executor_plan.hpp"
#include "fusedsl/backend/cuda/executor_schedule.hpp"
#include "fusedsl/backend/cuda/gemm.cuh"
#include "fusedsl/backend/cuda/graph_runner.hpp"
#include "fusedsl/backend/cuda/plan_kernels.cuh"
#include "fusedsl/backend/cuda/row_kernels.cuh"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/plan/memory.hpp"

namespace fusedsl::cuda {

// A program that has a group no CUDA kernel expresses.
struct unsupported_program : fusedsl::error {
  using error::error;
};

template <dtype T>
struct storage_of {
  using type = float;
};
template <>
struct storage_of<dtype::bf16> {
  using type = bf16;
};
template <>
struct storage_of<dtype::f16> {
  using type = f16;
};
template <dtype T>
using storage_t = typename storage_of<T>::type;

constexpr row_op row_op_of(op_kind k) {
  return k == op_kind::softmax       ? row_op::softmax
         : k == op_kind::log_softmax ? row_op::log_softmax
         : k == op_kind::layernorm   ? row_op::layernorm
                                     : row_op::rmsnorm;
}

template <class Program>
class executor {
  static constexpr auto& g = Program::graph;
  static constexpr std::size_t N = Program::node_count;
  static constexpr auto& fp = Program::fusion;
  static constexpr auto& mp = Program::memory;

 public:
  // The launches of every group (host data; tests read it).
  static constexpr launch_plan<N> plan = plan_launches(g, fp);

  // Throws unsupported_program before touching the device when a group has no kernel.
  executor(Program, cudaStream_t stream) : runner_(stream), stream_(stream) {
    if (!plan.ok()) throw unsupported_program(failure());
    layout_ = layout_device_memory(g, mp, device_arena::alignment);
    for (std::size_t i = 0; i < layout_.slots.size(); ++i) {
      if (by_name_.count(layout_.slots[i].name))
        throw binding_error("binding \"" + layout_.slots[i].name + "\": declared twice");
      by_name_[layout_.slots[i].name] = i;
    }
    bound_.assign(layout_.slots.size(), false);
    arena_.emplace(layout_.bytes);
    build_launches();
  }

  // Why a program cannot run here, or an empty string: usable without a device.
  static std::string failure() {
    if (plan.ok()) return {};
    std::string where = "cuda::executor: ";
    if (plan.failed_group >= 0) {
      const plan::fusion_group& gr = fp.groups[std::size_t(plan.failed_group)];
      where += "group " + std::to_string(plan.failed_group) + " (" +
               std::string(plan::name_of(gr.kind)) + ", anchor %" + std::to_string(gr.anchor) +
               " " + std::string(graph::name_of(g[gr.anchor].op)) + "): ";
    }
    return where + plan.error;
  }

  using binding_info = graph::binding_info;
  std::vector<binding_info> bindings() const {
    std::vector<binding_info> r;
    for (const binding_slot& s : layout_.slots) r.push_back(binding_info::of(g, s.node, s.name));
    return r;
  }

  // Asynchronous upload into the executor's own copy: `t` must stay unchanged until the stream
  // has passed this point (synchronize()).
  void bind(std::string_view name, tensor_ref t) {
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end())
      throw binding_error("binding \"" + std::string(name) +
                          "\": the program has no input or param of that name");
    const binding_slot& s = layout_.slots[it->second];
    const graph::node& n = g[s.node];
    if (t.type != n.type || !(t.shape == n.shape))
      throw binding_error("binding \"" + s.name + "\": expected " + std::string(name_of(n.type)) +
                          to_string(n.shape) + ", got " + std::string(name_of(t.type)) +
                          to_string(t.shape));
    if (t.data == nullptr) throw binding_error("binding \"" + s.name + "\": null data");
    check(cudaMemcpyAsync(at(s.offset), t.data, t.bytes(), cudaMemcpyHostToDevice, stream_),
          "cuda::executor: bind (upload)");
    bound_[it->second] = true;
  }

  // Device address of a binding (for inputs produced on the device: write there, skip bind).
  void* device_binding(std::string_view name) {
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end())
      throw binding_error("binding \"" + std::string(name) +
                          "\": the program has no input or param of that name");
    bound_[it->second] = true;
    return at(layout_.slots[it->second].offset);
  }
  const void* device_output(int k) const {
    return at(layout_.output_offset[std::size_t(check_output(k))]);
  }

  // One call: the first runs the launches eagerly and captures them; later ones replay the graph
  // (on the legacy default stream, nullptr, every call runs eagerly).
  void run() {
    for (std::size_t i = 0; i < bound_.size(); ++i)
      if (!bound_[i]) throw binding_error("binding \"" + layout_.slots[i].name + "\": not bound");
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
    const graph::node& n = g[g.outputs[std::size_t(check_output(k))]];
    if (t.type != n.type || !(t.shape == n.shape))
      throw binding_error("output " + std::to_string(k) + ": expected " +
                          std::string(name_of(n.type)) + to_string(n.shape) + ", got " +
                          std::string(name_of(t.type)) + to_string(t.shape));
    check(cudaMemcpyAsync(t.data, device_output(k), t.bytes(), cudaMemcpyDeviceToHost, stream_),
          "cuda::executor: read_output");
  }
  void synchronize() const { check(cudaStreamSynchronize(stream_), "cuda::executor: synchronize"); }

  const graph_runner& runner() const { return runner_; }
  std::size_t launches_per_call() const { return runner_.size(); }
  std::size_t device_bytes() const { return arena_->capacity(); }

 private:
  std::byte* at(std::size_t offset) const {
    return static_cast<std::byte*>(arena_->data()) + offset;
  }
  static int check_output(int k) {
    if (k < 0 || k >= g.n_outputs)
      throw binding_error("output " + std::to_string(k) + ": the program has " +
                          std::to_string(g.n_outputs) + " outputs");
    return k;
  }

  // Every launch of one call, layer by layer, with that step's device pointers.
  void build_launches() {
    static constexpr auto table = make_table(std::make_index_sequence<std::size_t(n_launches)>{});
    call_schedule<N> schedule(g, fp, mp, plan, layout_);
    schedule.for_each([&](int l, int it, const typename call_schedule<N>::addresses& addr) {
      for (std::size_t i = 0; i < N; ++i)
        val_[i] = addr[i] >= 0 ? at(std::size_t(addr[i])) : nullptr;
      (this->*table[std::size_t(l)])(it);
    });
  }

  template <class T>
  T* ptr(int node, std::int64_t offset = 0) const {
    return reinterpret_cast<T*>(val_[std::size_t(node)]) + offset;
  }
  template <class T>
  T* ptr(const operand& o) const {
    return ptr<T>(o.node, o.offset);
  }
  static std::string step_name(int l, int it) {
    const launch& d = plan.launches[std::size_t(l)];
    const plan::fusion_group& gr = fp.groups[std::size_t(d.group)];
    std::string s = binding_prefix(g, gr.region, it);
    return s + std::string(name_of(d.kind)) + " (group " + std::to_string(d.group) + ", anchor %" +
           std::to_string(gr.anchor) + ")";
  }

  // One launch: its kernel instantiated with the plan's shapes, its pointers bound now.
  // Launch I as a static object, so the step lambdas read its shapes without capturing anything.
  template <int I>
  static constexpr launch launch_at = plan.launches[std::size_t(I)];

  // The epilogue of GEMM launch I with this layer's pointers.
  template <int I, class Epi>
  Epi epilogue_of() const {
    using Out = typename Epi::out_type;
    Epi epi;
    epi.scale = launch_at<I>.gemm.scale;
    if constexpr (launch_at<I>.gemm.bias >= 0) epi.bias = ptr<const Out>(launch_at<I>.gemm.bias);
    if constexpr (launch_at<I>.gemm.residual >= 0)
      epi.residual = ptr<const Out>(launch_at<I>.gemm.residual);
    return epi;
  }

  template <int I, class In, class Epi, std::size_t... J>
  void add_siblings(int it, std::index_sequence<J...>) {
    constexpr int G = int(sizeof...(J));
    using Out = typename Epi::out_type;
    gemm_siblings<In, Epi, G> sib{{ptr<const In>(launch_at<I + int(J)>.gemm.b)...},
                                  {ptr<Out>(launch_at<I + int(J)>.gemm.out)...},
                                  {epilogue_of<I + int(J), Epi>()...}};
    const In* a = ptr<const In>(launch_at<I>.gemm.a);
    runner_.add(step_name(I, it), [a, sib](cudaStream_t s) {
      constexpr const gemm_launch& e = launch_at<I>.gemm;
      gemm_siblings_launch<e.m, e.n, e.k, In, Epi, G>(s, a, sib);
    });
  }

  template <int I>
  void add_launch(int it) {
    constexpr const launch& d = launch_at<I>;
    if constexpr (plan.absorbed[std::size_t(I)]) {
      (void)it;  // launched by the GEMM before it (siblings or gemm_layernorm)
    } else if constexpr (d.kind == launch_kind::gemm) {
      using In = storage_t<g[launch_at<I>.gemm.a.node].type>;
      using Out = storage_t<g[launch_at<I>.gemm.out].type>;
      using Epi = plan_epilogue<Out, launch_at<I>.gemm.has_act, launch_at<I>.gemm.act,
                                (launch_at<I>.gemm.bias >= 0), (launch_at<I>.gemm.residual >= 0)>;
      constexpr int sib = plan.siblings[std::size_t(I)], ln = plan.layernorm[std::size_t(I)];
      if constexpr (sib > 0) {
        add_siblings<I, In, Epi>(it, std::make_index_sequence<std::size_t(sib + 1)>{});
        return;
      }
      const Epi epi = epilogue_of<I, Epi>();
      const In* a = ptr<const In>(launch_at<I>.gemm.a);
      const In* b = ptr<const In>(launch_at<I>.gemm.b);
      if constexpr (ln >= 0) {
        // The layernorm launch after this GEMM, finished in its epilogue: the GEMM's own output
        // (read by nothing else) is never written.
        constexpr const row_launch& r = launch_at<ln>.row;
        Out* c = ptr<Out>(r.out);
        const Out* gamma = ptr<const Out>(r.gamma);
        const Out* beta = ptr<const Out>(r.beta);
        runner_.add(step_name(I, it) + " + layernorm", [a, b, c, epi, gamma, beta](cudaStream_t s) {
          constexpr const gemm_launch& e = launch_at<I>.gemm;
          gemm_layernorm<e.m, e.n, e.k, In, Epi>(s, a, b, c, epi, gamma, beta,
                                                 launch_at<ln>.row.eps);
        });
      } else {
        Out* c = ptr<Out>(launch_at<I>.gemm.out);
        runner_.add(step_name(I, it), [a, b, c, epi](cudaStream_t s) {
          gemm<launch_at<I>.gemm.m, launch_at<I>.gemm.n, launch_at<I>.gemm.k, In, Epi>(s, a, b, c,
                                                                                       epi);
        });
      }
    } else if constexpr (d.kind == launch_kind::attention) {
      using T = storage_t<g[launch_at<I>.attention.q.node].type>;
      attention_args<T> a;
      a.q = ptr<const T>(launch_at<I>.attention.q), a.k = ptr<const T>(launch_at<I>.attention.k),
      a.v = ptr<const T>(launch_at<I>.attention.v), a.o = ptr<T>(launch_at<I>.attention.o);
      a.q_row_stride = long(launch_at<I>.attention.q_row_stride),
      a.k_row_stride = long(launch_at<I>.attention.k_row_stride);
      a.v_row_stride = long(launch_at<I>.attention.v_row_stride),
      a.o_row_stride = long(launch_at<I>.attention.o_row_stride);
      a.scale = launch_at<I>.attention.scale;
      runner_.add(step_name(I, it), [a](cudaStream_t s) {
        constexpr const attention_launch& at = launch_at<I>.attention;
        flash_attention<T, at.head_dim, 1, at.heads, at.kv_heads, at.seq_q, at.seq_k, at.causal>(s,
                                                                                                 a);
      });
    } else if constexpr (d.kind == launch_kind::row) {
      using In = storage_t<g[launch_at<I>.row.in].type>;
      using Out = storage_t<g[launch_at<I>.row.out].type>;
      row_params p;
      p.eps = launch_at<I>.row.eps;
      if constexpr (launch_at<I>.row.gamma >= 0) p.gamma = ptr<const Out>(launch_at<I>.row.gamma);
      if constexpr (launch_at<I>.row.beta >= 0) p.beta = ptr<const Out>(launch_at<I>.row.beta);
      const In* in = ptr<const In>(launch_at<I>.row.in);
      Out* out = ptr<Out>(launch_at<I>.row.out);
      runner_.add(step_name(I, it), [in, out, p](cudaStream_t s) {
        constexpr const row_launch& r = launch_at<I>.row;
        launch_row<row_op_of(r.op), r.rows, r.cols, In, Out>(s, in, out, p);
      });
    } else {
      loop_pointers p;
      for (int l = 0; l < d.loop.n_loads; ++l)
        p.in[l] = val_[std::size_t(d.loop.loads[std::size_t(l)].node)];
      for (int o = 0; o < d.loop.n_outputs; ++o)
        p.out[o] = val_[std::size_t(d.loop.out_node[std::size_t(o)])];
      runner_.add(step_name(I, it),
                  [p](cudaStream_t s) { launch_loop_program(s, launch_at<I>.loop, p); });
    }
  }

  static constexpr int n_launches =
      plan.ok() ? plan.n_launches : 0;  // nothing instantiated for a failed plan
  template <std::size_t... I>
  static constexpr auto make_table(std::index_sequence<I...>) {
    return std::array<void (executor::*)(int), sizeof...(I)>{
        &executor::template add_launch<int(I)>...};
  }

  std::optional<device_arena> arena_;
  graph_runner runner_;
  cudaStream_t stream_;
  device_layout<N> layout_;
  std::vector<bool> bound_;
  std::map<std::string, std::size_t> by_name_;
  std::array<std::byte*, N> val_{};
};

}  // namespace fusedsl::cuda
