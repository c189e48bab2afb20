#pragma once
// fusedsl::cpu::executor: runs a compiled program on the CPU.
//
// Construction allocates everything the program will ever need: the arena (its size is the
// plan's compile-time constant), the kernels' per-thread workspace, and storage for prepacked
// weights. Weights are bound once by name (shapes and dtypes checked) and packed into GEMM panels
// then. A call allocates nothing: inputs are bound by name or position, outputs are written to
// user memory. What is packed is a copy: a GEMM weight changed after bind counts once it is bound
// again; executors given one packed_weight_cache (share_packed_weights, cpu/weight_cache.hpp)
// hold one copy of the panels of weights they bind from the same memory. Inputs and the other
// parameters (biases, norms' gamma and beta) are read from the bound memory at each call, so it
// must outlive the calls. No output may share memory with a bound
// tensor or another output (run() checks; binding_error). Every dtype of the graph is bound and
// read as itself (f32, bf16, f16, i32, bool).
//
// Each fusion group runs as the kernel its descriptor (plan/lower.hpp) says, generated at compile
// time from the group (kernels/codegen.hpp; cpu/group_kernels.hpp):
//   loop, reduce  the group's ops unrolled over xsimd batches, no intermediate in memory;
//   row           the row kernels with a generated prologue and epilogue;
//   gemm          the packed GEMM with the group's epilogue applied to the tile in registers,
//                 operands read through their layout ops as strided views; a part with a pair
//                 (plan::gemm_part::pair, SwiGLU's gate and up) runs both products in one pass
//                 over the two weights packed side by side, and the pair's own group is not run
//                 (`gemm_pairs{false}`: two GEMMs, the second product through memory);
//   attention     flash attention (online softmax, causal blocks skipped, grouped heads, batch),
//                 any score ops between Q Kᵀ and the softmax (masks of any kind) generated into
//                 the kernel, no [L, L] buffer;
//   update        dynamic_update_slice: the window written, in place when the plan lets the
//                 result take its operand's buffer.
// A group the lowering refuses (plan/lower.hpp's closed list) runs through the interpreter;
// `interpreter_only{}` runs every group that way, as a cross-check. `stats()` counts both.
//
// Opt-in (`amx_bf16{}`): matmuls whose B is a bf16 param run on AMX-BF16 tiles (kernels/amx.hpp)
// where the CPU and OS allow it: the weights are packed as bf16 once, the activations rounded to
// bf16 at each call, products accumulated in f32. Attention groups without score ops run on the
// tiles too (kernels/attention_amx.hpp: Q, K, V and the probabilities rounded to bf16, softmax in
// f32) unless `amx_bf16{.attention = false}`. Elsewhere the option changes nothing.
//
// The class is in parts: what is the same for every program (binding, the arena, workspace and
// states, running the groups in order, the interpreter, statistics) is cpu::executor_base over a
// run-time program_view, compiled once in the compiled mode; how weights are packed and how much
// workspace the kernels take depend on the target (cpu/weight_packing.hpp); each group's kernel on
// the program (cpu/group_kernels.hpp). executor<Program> ties them together.
#include <array>
#include <cstddef>
#include <utility>

#include "fusedsl/backend/cpu/executor_base.hpp"
#include "fusedsl/backend/cpu/executor_types.hpp"
#include "fusedsl/backend/cpu/group_kernels.hpp"
#include "fusedsl/backend/cpu/kernels/amx.hpp"
#include "fusedsl/backend/cpu/program_view.hpp"
#include "fusedsl/backend/cpu/weight_packing.hpp"
#include "fusedsl/plan/lower.hpp"
#include "fusedsl/plan/memory.hpp"

namespace fusedsl::cpu {

template <class Program>
class executor : private executor_base {
  static constexpr auto& g = Program::graph;
  static constexpr std::size_t N = Program::node_count;
  static constexpr auto& fp = Program::fusion;
  static constexpr int G = fp.n_groups;
  using arch = kernels::native_arch;

  struct lowered {
    static constexpr plan::lowered_plan<N, G> value = plan::lower<G>(g, fp);
  };
  template <int GI>
  struct desc {
    static constexpr const plan::kernel_desc& value = lowered::value.desc[std::size_t(GI)];
    static constexpr const auto& nodes = g.nodes;
    static constexpr int index = GI;
  };

  using kernel_fn = void (*)(executor_base&, int);
  template <std::size_t... I>
  static constexpr std::array<kernel_fn, sizeof...(I) + 1> kernel_table(std::index_sequence<I...>) {
    return {&run_group_kernel<desc<int(I)>, arch>..., nullptr};
  }
  static constexpr std::array<kernel_fn, std::size_t(G) + 1> kernels_ =
      kernel_table(std::make_index_sequence<std::size_t(G)>{});
  static constexpr program_view plan_view_ = view_of<Program>(lowered::value);
  static constexpr executor_hooks setup_hooks_{&plan_workspace<arch>, kernels_.data(),
                                               &pack_weights_of<arch>};

 public:
  static constexpr const plan::lowered_plan<N, G>& kernels_plan() { return lowered::value; }

  explicit executor(Program = {}, threads t = threads{1}, interpreter_only io = {false},
                    amx_bf16 amx = {false}, gemm_pairs pairs = {true})
      : executor_base(plan_view_, setup_hooks_, t, io,
                      amx_bf16{amx.value && kernels::amx_available(), amx.attention}, pairs) {}
  executor(Program p, threads t, amx_bf16 amx) : executor(p, t, interpreter_only{false}, amx) {}
  executor(Program p, threads t, gemm_pairs pairs)
      : executor(p, t, interpreter_only{false}, amx_bf16{false}, pairs) {}

  // Names this program needs bound, with their dtypes and shapes ("layers.0.attn.q.w", ...).
  using binding_info = graph::binding_info;
  using executor_base::bindings;
  // The same without an executor (nothing allocated): what to load before building one.
  static std::vector<binding_info> binding_list() {
    return backend::binding_table(graph::graph_view(g)).infos();
  }

  // Bind an input or a parameter by name; parameters are packed for the GEMM here, once.
  using executor_base::bind;
  // Where output k is written (user memory, row-major, the output's dtype and shape).
  using executor_base::bind_output;
  // Run the program once. Allocates nothing.
  using executor_base::run;

  // Convenience for one input and one output of static shape: run(x, out).
  template <class In, class Out>
  void operator()(In& x, Out& out) {
    bind(first_input_name(), x);
    bind_output(0, out);
    run();
  }

  // A state's memory (fd::state): its value between calls, to read, fill or clear.
  using executor_base::state;
  // Every state back to zeros, as after construction.
  using executor_base::reset_states;
  // Read the GEMM weights' panels from `cache`, shared with the other executors given it
  // (cpu/weight_cache.hpp): a weight bound from the same memory, read the same way, is packed
  // once for all of them. Before any parameter is bound; a null cache makes the panels this
  // executor's own again. GEMM pairs and AMX tiles keep their own panels.
  using executor_base::share_packed_weights;
  using executor_base::stats;
  // Everything this executor allocated, in bytes.
  using executor_base::footprint;
  // Per-group timing (steady_clock and the thread's CPU clock around each group; adds four clock
  // reads per group call).
  using executor_base::arena_bytes;
  using executor_base::profile;
  using executor_base::profile_results;
};

}  // namespace fusedsl::cpu
