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
// time from the group (kernels/codegen.hpp):
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
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusedsl/backend/cpu/interpret.hpp"
#include "fusedsl/backend/cpu/kernels/amx.hpp"
#include "fusedsl/backend/cpu/kernels/attention.hpp"
#include "fusedsl/backend/cpu/kernels/attention_amx.hpp"
#include "fusedsl/backend/cpu/kernels/codegen.hpp"
#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/backend/cpu/weight_cache.hpp"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/plan/lower.hpp"
#include "fusedsl/plan/memory.hpp"

// Kernels below this many multiply-adds run on the calling thread: a fork/join costs ~80 us on a
// 2-vCPU virtual machine (waking the sleeping worker), which half of a 2^24-MAC kernel (~110 us)
// just pays for.
#ifndef FUSEDSL_CPU_PARALLEL_MACS
#define FUSEDSL_CPU_PARALLEL_MACS (1 << 24)
#endif
// The same when the pool polls (threads::spin > 0): a fork/join then costs ~1-20 us, so kernels
// from 2^20 multiply-adds (~5 us of work) are split; on the seed model two polling threads ran
// 1.5-1.8x one thread on an otherwise idle 2-core machine (docs/performance.md, "Threads").
#ifndef FUSEDSL_CPU_PARALLEL_MACS_POLLING
#define FUSEDSL_CPU_PARALLEL_MACS_POLLING (1 << 20)
#endif

namespace fusedsl::cpu {

using graph::op_kind;

struct threads {
  int count = 1;
  // How long idle pool threads poll for work before they sleep (kernels::thread_pool): 0 by
  // default, as polling made two-thread models slower on a shared VM (docs/performance.md); on
  // cores of its own, 50 us lets two threads split even the seed model's kernels (1.5-1.8x).
  std::chrono::microseconds spin{0};
};

// Run every group through the interpreter (a cross-check of the generated kernels in tests).
struct interpreter_only {
  bool value = true;
};

// Run matmuls with bf16 weights on AMX tiles, activations rounded to bf16, and (`attention`)
// attention on the tiles with bf16 Q, K, V and probabilities (see the top comment).
struct amx_bf16 {
  bool value = true;
  bool attention = true;
};

// Run a GEMM part and its pair (plan::gemm_part::pair) as one GEMM over both weights (the
// default), or as two GEMMs with the second product stored and read back (false).
struct gemm_pairs {
  bool value = true;
};

// Time spent in each fusion group, when profiling is on (executor::profile(true)).
struct group_profile {
  plan::group_kind kind = plan::group_kind::loop;
  int region = 0;
  long calls = 0;
  double seconds = 0;      // wall time
  double cpu_seconds = 0;  // CPU time of the calling thread: steadier on a shared machine, but
                           // without the pool's other threads when a kernel uses them
};

struct executor_stats {
  int fast_groups = 0;         // groups run by their generated kernel (per layer)
  int interpreted_groups = 0;  // groups run by the interpreter (per layer)
  int amx_matmuls = 0;      // matmuls with bf16 weights bound and packed for AMX tiles (all layers)
  int amx_attention = 0;    // attention groups run on AMX tiles (per layer)
  int parallel_groups = 0;  // groups whose kernels were split across the pool (per layer)
  int paired_gemms = 0;     // GEMM pairs run as one GEMM (per layer); the group whose product
                            // the pair computes counts as a generated group
};

// What an executor holds, in bytes: everything it allocated.
struct memory_footprint {
  std::size_t arena = 0;           // the plan's arena (constexpr size)
  std::size_t workspace = 0;       // the kernels' per-thread tiles and packing buffers
  std::size_t packed_weights = 0;  // GEMM weights packed at bind (f32 panels, bf16 for AMX)
  std::size_t shared_weights = 0;  // panels it reads from a packed_weight_cache, shared with other
                                   // executors (not in total(): the cache holds them)
  std::size_t interpreter = 0;     // the interpreter's buffers (interpreter_only, refused groups)
  std::size_t states = 0;          // the program's states (fd::state), kept across calls
  std::size_t total() const { return arena + workspace + packed_weights + interpreter + states; }
};

template <class Program>
class executor {
  static constexpr auto& g = Program::graph;
  static constexpr std::size_t N = Program::node_count;
  static constexpr auto& fp = Program::fusion;
  static constexpr auto& mp = Program::memory;
  static constexpr int G = fp.n_groups;
  using arch = kernels::native_arch;

  struct lowered {
    static constexpr plan::lowered_plan<N, G> value = plan::lower<G>(g, fp);
  };
  template <int GI>
  struct desc {
    static constexpr const plan::kernel_desc& value = lowered::value.desc[std::size_t(GI)];
    static constexpr const auto& nodes = g.nodes;
  };

 public:
  static constexpr const plan::lowered_plan<N, G>& kernels_plan() { return lowered::value; }

  explicit executor(Program = {}, threads t = threads{1}, interpreter_only io = {false},
                    amx_bf16 amx = {false}, gemm_pairs pairs = {true})
      : pool_(t.count, t.spin),
        interpreter_only_(io.value),
        amx_(amx.value && kernels::amx_available()),
        amx_attention_(amx_ && amx.attention),
        pair_gemms_(pairs.value) {
    for (int gi = 0; gi < G; ++gi) paired_away_[std::size_t(gi)] = runs_as_pair_of(gi);
    build_bindings();
    plan_workspace();
    arena_ = aligned_buffer(std::size_t(mp.arena_bytes) + 64);
    scratch_ = aligned_buffer(scratch_floats_ * sizeof(float) + 64);
    assign_pack_storage();
    if (interpreter_only_ || lowered::value.n_refused > 0) make_interpreter_buffers();
    make_states();
    for (int o = 0; o < g.n_outputs; ++o) {
      const int st = g.output_state[std::size_t(o)];
      outputs_[std::size_t(o)] = st >= 0 ? state_ptr_[std::size_t(st)] : nullptr;
    }
    counted_.reserve(std::size_t(G) + 1);
  }
  executor(Program p, threads t, amx_bf16 amx) : executor(p, t, interpreter_only{false}, amx) {}
  executor(Program p, threads t, gemm_pairs pairs)
      : executor(p, t, interpreter_only{false}, amx_bf16{false}, pairs) {}

  // Names this program needs bound, with their dtypes and shapes ("layers.0.attn.q.w", ...).
  using binding_info = graph::binding_info;
  std::vector<binding_info> bindings() const {
    std::vector<binding_info> r;
    for (const slot& s : slots_) r.push_back(binding_info::of(g, s.node, s.name));
    return r;
  }
  // The same without an executor (nothing allocated): what to load before building one.
  static std::vector<binding_info> binding_list() {
    std::vector<binding_info> r;
    for (const slot& s : make_slots()) r.push_back(binding_info::of(g, s.node, s.name));
    return r;
  }

  // Bind an input or a parameter by name; parameters are packed for the GEMM here, once.
  void bind(std::string_view name, tensor_ref t) {
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end())
      throw binding_error("binding \"" + std::string(name) +
                          "\": the program has no input or param of that name");
    slot& s = slots_[it->second];
    const graph::node& n = g[s.node];
    if (t.type != n.type || !(t.shape == n.shape))
      throw binding_error("binding \"" + s.name + "\": expected " + std::string(name_of(n.type)) +
                          to_string(n.shape) + ", got " + std::string(name_of(t.type)) +
                          to_string(t.shape));
    if (t.data == nullptr) throw binding_error("binding \"" + s.name + "\": null data");
    s.data = t.data;
    if (n.op == op_kind::param) pack_weights_of(s);
  }

  // Where output k is written (user memory, row-major, the output's dtype and shape).
  void bind_output(int k, tensor_ref t) {
    if (k < 0 || k >= g.n_outputs)
      throw binding_error("output " + std::to_string(k) + ": the program has " +
                          std::to_string(g.n_outputs) + " outputs");
    const graph::node& n = g[g.outputs[std::size_t(k)]];
    if (const int st = g.output_state[std::size_t(k)]; st >= 0)
      throw binding_error("output " + std::to_string(k) + ": it is the new value of state \"" +
                          std::string(g[st].name.view()) +
                          "\", written into the state (read it with state())");
    if (t.type != n.type || !(t.shape == n.shape))
      throw binding_error("output " + std::to_string(k) + ": expected " +
                          std::string(name_of(n.type)) + to_string(n.shape) + ", got " +
                          std::string(name_of(t.type)) + to_string(t.shape));
    if (t.data == nullptr) throw binding_error("output " + std::to_string(k) + ": null data");
    outputs_[std::size_t(k)] = t.data;
  }

  // Run the program once. Allocates nothing.
  void run() {
    for (const slot& s : slots_)
      if (s.data == nullptr) throw binding_error("binding \"" + s.name + "\": not bound");
    for (int o = 0; o < g.n_outputs; ++o)
      if (outputs_[std::size_t(o)] == nullptr)
        throw binding_error("output " + std::to_string(o) + ": not bound");
    check_outputs_alias_nothing();
    if (interpreter_only_) {
      run_interpreted();
      return;
    }
    set_region_values(0, 0, nullptr);
    for (int k = 0; k < G; ++k) {
      const int gi = fp.order[std::size_t(k)];
      if (fp.groups[std::size_t(gi)].region == 0) run_group(gi, 0);
    }
    // An output that is a leaf, or the same node as an earlier output, is copied into place.
    for (int o = 0; o < g.n_outputs; ++o) {
      const int id = g.outputs[std::size_t(o)];
      const graph::node& n = g[id];
      void* dst = outputs_[std::size_t(o)];
      if (n.op == op_kind::constant || n.op == op_kind::iota) {
        fill_leaf(n, dst);
        continue;
      }
      const void* src = graph::is_leaf(n.op) ? slot_data(id, 0) : val_[std::size_t(id)];
      if (src != dst) std::memcpy(dst, src, std::size_t(n.bytes()));
    }
  }

  // Convenience for one input and one output of static shape: run(x, out).
  template <class In, class Out>
  void operator()(In& x, Out& out) {
    bind(first_input_name(), x);
    bind_output(0, out);
    run();
  }

  // A state's memory (fd::state): its value between calls, to read, fill or clear.
  tensor_ref state(std::string_view name) {
    for (int i = 0; i < int(N); ++i)
      if (g[i].op == op_kind::state && g[i].name.view() == name)
        return tensor_ref{state_ptr_[std::size_t(i)], g[i].type, g[i].shape};
    throw binding_error("state \"" + std::string(name) +
                        "\": the program has no state of that name");
  }
  // Every state back to zeros, as after construction.
  void reset_states() {
    if (states_.size()) std::memset(states_.data(), 0, states_.size());
  }

  // Read the GEMM weights' panels from `cache`, shared with the other executors given it
  // (cpu/weight_cache.hpp): a weight bound from the same memory, read the same way, is packed once
  // for all of them. Before any parameter is bound; a null cache makes the panels this executor's
  // own again. GEMM pairs and AMX tiles keep their own panels.
  void share_packed_weights(std::shared_ptr<packed_weight_cache> cache) {
    for (const slot& s : slots_)
      if (g[s.node].op == op_kind::param && s.data != nullptr)
        throw binding_error("share_packed_weights: \"" + s.name +
                            "\" is bound already (share before binding any parameter)");
    cache_ = std::move(cache);
    for (packed_ref& p : packs_) p.shared = cache_ != nullptr && !p.pair && !p.amx;
    assign_pack_storage();
  }

  executor_stats stats() const {
    executor_stats s = stats_;
    for (const packed_ref& p : packs_) s.amx_matmuls += p.amx && p.ready;
    return s;
  }

  // Everything this executor allocated, in bytes.
  memory_footprint footprint() const {
    memory_footprint f;
    f.arena = arena_.size();
    f.workspace = scratch_.size();
    f.packed_weights = packed_.size() + packed_bf16_.size();
    std::vector<const void*> seen;
    for (const packed_ref& p : packs_) {
      if (!p.shared || p.panels == nullptr ||
          std::find(seen.begin(), seen.end(), p.panels) != seen.end())
        continue;
      seen.push_back(p.panels);
      f.shared_weights += p.size * (p.bf16_storage ? sizeof(kernels::bf16_bits) : sizeof(float));
    }
    f.interpreter = interp_.size() + interp_scratch_.size();
    f.states = states_.size();
    return f;
  }

  // Per-group timing (steady_clock and the thread's CPU clock around each group; adds four clock
  // reads per group call).
  void profile(bool on) {
    profiling_ = on;
    for (int gi = 0; gi < G; ++gi) {
      profile_[std::size_t(gi)] = group_profile{};
      profile_[std::size_t(gi)].kind = fp.groups[std::size_t(gi)].kind;
      profile_[std::size_t(gi)].region = fp.groups[std::size_t(gi)].region;
    }
  }
  std::span<const group_profile> profile_results() const {
    return {profile_.data(), std::size_t(G)};
  }
  std::int64_t arena_bytes() const { return mp.arena_bytes; }

 private:
  // An output must not share memory with a bound input or parameter, nor with another output: the
  // groups read inputs and parameters (biases, norms' gamma, the next call's weights) while others
  // write outputs, so an aliased buffer would be silently wrong (XLA aliases only the buffers a
  // program declares, JAX only donated ones). Checked each call, since bindings may change between
  // calls; no allocation unless it throws.
  void check_outputs_alias_nothing() const {
    auto bytes = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
    auto overlap = [&](const void* a, std::size_t na, const void* b, std::size_t nb) {
      return bytes(a) < bytes(b) + nb && bytes(b) < bytes(a) + na;
    };
    auto size_in_bytes = [](const graph::node& n) { return std::size_t(n.bytes()); };
    for (int o = 0; o < g.n_outputs; ++o) {
      const void* out = outputs_[std::size_t(o)];
      const std::size_t n_out = size_in_bytes(g[g.outputs[std::size_t(o)]]);
      for (const slot& s : slots_)
        if (overlap(out, n_out, s.data, size_in_bytes(g[s.node])))
          throw binding_error("output " + std::to_string(o) +
                              ": its memory overlaps the memory bound to \"" + s.name +
                              "\" (inputs and parameters are read while outputs are written; bind "
                              "a separate buffer)");
      for (int p = 0; p < o; ++p)
        if (overlap(out, n_out, outputs_[std::size_t(p)],
                    size_in_bytes(g[g.outputs[std::size_t(p)]])))
          throw binding_error("output " + std::to_string(o) + ": its memory overlaps output " +
                              std::to_string(p) + "'s (bind a separate buffer to each)");
    }
  }

  struct slot {
    std::string name;
    int node = -1;
    int iter = 0;
    const void* data = nullptr;  // the user's memory, of the node's dtype
  };
  struct packed_ref {
    int group = -1, part = 0, iter = 0;
    std::size_t size = 0;    // elements of its storage: f32, or bf16 where bf16_storage
    std::size_t offset = 0;  // elements into packed_ (f32) or packed_bf16_ (bf16_storage)
    bool ready = false;
    bool amx = false;  // packed for the AMX tiles (bf16 weights, amx_bf16 opted in); otherwise
                       // bf16 panels where uses_bf16_panels(part), else f32 panels
    bool bf16_storage = false;  // amx or bf16 panels
    const kernels::bf16_bits* amx_data = nullptr;  // the packed panels (aligned inside the slot)
    bool pair = false;      // the part's B and its pair's, side by side (pack_b_pair_half)
    std::uint8_t halves = 0;  // pair: which of the two have been packed (bits 0 and 1)
    bool shared = false;    // its panels live in the packed_weight_cache (not pairs, not amx)
    void* panels = nullptr;  // where its panels are (not amx): in packed_ / packed_bf16_ or the
                             // cache; set when storage is assigned, or (shared) when packed
  };

  // ---- setup ----
  static int iterations_of_region(int r) {
    if (r == 0) return 1;
    for (int i = 0; i < int(N); ++i)
      if (g[i].op == op_kind::repeat && g[i].body == r) return g[i].count;
    return 1;
  }
  static std::string prefix_of_region(int r, int iter) {
    for (int i = 0; i < int(N); ++i)
      if (g[i].op == op_kind::repeat && g[i].body == r)
        return std::string(g[i].name.view()) + "." + std::to_string(iter) + ".";
    return {};
  }
  std::string first_input_name() const {
    for (const slot& s : slots_)
      if (g[s.node].op == op_kind::input) return s.name;
    throw binding_error("the program has no input");
  }

  static std::vector<slot> make_slots() {
    std::vector<slot> slots;
    for (int i = 0; i < int(N); ++i) {
      const graph::node& n = g[i];
      if (n.op != op_kind::input && n.op != op_kind::param) continue;
      const int iters = iterations_of_region(n.region);
      for (int it = 0; it < iters; ++it) {
        slot s;
        s.name = (n.region ? prefix_of_region(n.region, it) : std::string()) +
                 std::string(n.name.view());
        s.node = i;
        s.iter = it;
        slots.push_back(s);
      }
    }
    return slots;
  }
  void build_bindings() {
    slots_ = make_slots();
    for (std::size_t k = 0; k < slots_.size(); ++k) {
      if (by_name_.count(slots_[k].name))
        throw binding_error("binding \"" + slots_[k].name + "\": declared twice");
      by_name_[slots_[k].name] = k;
    }
  }

  const void* slot_data(int node, int iter) const {
    for (const slot& s : slots_)
      if (s.node == node && s.iter == iter) return s.data;
    return nullptr;
  }

  static constexpr bool uses_amx_tiles(const plan::gemm_part& p) {
    return p.b_param && g[p.b.base].type == dtype::bf16;
  }
  // A part with a pair runs it as one GEMM unless pairs are off, its k is long enough to be cut
  // into blocks (the pair's partial sums would need both products' columns), or its weights go
  // to the AMX tiles.
  static constexpr bool can_pair(const plan::gemm_part& p) {
    return p.pair >= 0 && p.k <= kernels::detail::k_block_threshold;
  }
  bool pair_active(const plan::gemm_part& p) const {
    return can_pair(p) && pair_gemms_ && !interpreter_only_ && !(amx_ && uses_amx_tiles(p));
  }
  // Whether group gu's product is computed by another group's part as its pair.
  bool runs_as_pair_of(int gu) const {
    const int gi = lowered::value.desc[std::size_t(gu)].paired_into;
    if (gi < 0) return false;
    const plan::kernel_desc& d = lowered::value.desc[std::size_t(gi)];
    const int u = lowered::value.desc[std::size_t(gu)].gemm[0].matmul;
    for (int q = 0; q < d.n_gemm; ++q)
      if (d.gemm[std::size_t(q)].pair == u) return pair_active(d.gemm[std::size_t(q)]);
    return false;
  }
  // A bf16 weight of a product with at most one register tile of rows (a decode step) stays bf16
  // in its panels (kernels::pack_b_bf16_panels): the product is as long as reading B takes, and
  // widened f32 panels would read twice the bytes. Only where kernels::load_b widens bf16 in
  // registers; elsewhere the panels are f32.
  static constexpr bool uses_bf16_panels(const plan::gemm_part& p) {
    return p.b_param && g[p.b.base].type == dtype::bf16 && p.m <= kernels::gemm_tile<arch>::mr &&
           kernels::widens_bf16_in_registers<arch>;
  }

  // Workspace: the most any one kernel needs (per-thread tiles, B packed when it is not a weight);
  // packed weight storage for every GEMM whose B is a parameter, per layer.
  void plan_workspace() {
    const std::size_t threads = std::size_t(pool_.size());
    std::size_t need = 64;
    for (int gi = 0; gi < G; ++gi) {
      const plan::kernel_desc& d = lowered::value.desc[std::size_t(gi)];
      const int iters = iterations_of_region(fp.groups[std::size_t(gi)].region);
      if (d.kind == plan::kernel_kind::gemm) {
        if (paired_away_[std::size_t(gi)]) continue;  // its weight is packed with its pair's
        for (int q = 0; q < d.n_gemm; ++q) {
          const plan::gemm_part& p = d.gemm[std::size_t(q)];
          std::size_t w = kernels::gemm_workspace_floats<arch>(p.k, int(threads)) + 64;
          if (!p.b_param) w += kernels::packed_b_floats<arch>(p.k, p.n) + 16;
          if (g[p.a.base].type != dtype::f32)
            w += std::size_t(p.a.shape.size()) + 16;  // A widened per call
          const bool amx = amx_ && uses_amx_tiles(p);
          if (amx) w = std::max(w, kernels::gemm_amx_workspace_elements(p.m, p.k) / 2 + 64);
          need = std::max(need, w);
          if (p.b_param)
            for (int it = 0; it < iters; ++it) {
              packed_ref r;
              r.group = gi;
              r.part = q;
              r.iter = it;
              r.pair = pair_active(p);
              r.amx = !r.pair && amx;
              r.bf16_storage = r.amx || uses_bf16_panels(p);
              const std::int64_t n = r.pair ? 2 * p.n : p.n;
              r.size = r.amx ? kernels::packed_b_bf16_elements(p.k, p.n) + 32
                             : kernels::packed_b_floats<arch>(p.k, n) + (r.bf16_storage ? 32 : 16);
              packs_.push_back(r);
            }
        }
      } else if (d.kind == plan::kernel_kind::attention) {
        std::size_t w =
            kernels::attention_workspace_floats<arch>(d.att.head_dim, int(threads)) + 64;
        for (const plan::strided_view* v :
             {&d.att.q, &d.att.k, &d.att.v, &d.att.o})  // widened per call
          if (g[v->base].type != dtype::f32) w += std::size_t(v->shape.size()) + 16;
        if (amx_attention_ && d.att.score.empty())
          w = std::max(w, kernels::attention_amx_workspace_elements(d.att.head_dim, d.att.seq_kv,
                                                                    int(threads)) /
                                  2 +
                              64);
        need = std::max(need, w);
      } else if (d.kind == plan::kernel_kind::row) {
        const std::int64_t cols = d.extent[std::size_t(d.rank - 1)];
        const std::int64_t block = cols <= 256 ? 8 : cols <= 512 ? 4 : cols <= 4096 ? 2 : 1;
        need = std::max(need, threads * std::size_t(block * (cols + 16) + 2 * cols + 16) + 64);
      }
    }
    scratch_floats_ = need;
  }

  // Offsets into packed_ and packed_bf16_ for the packs not shared, and the buffers.
  void assign_pack_storage() {
    std::size_t floats = 0, bf16 = 0;
    for (packed_ref& p : packs_) {
      if (p.shared) continue;
      p.offset = p.bf16_storage ? bf16 : floats;
      (p.bf16_storage ? bf16 : floats) += p.size;
    }
    packed_ = aligned_buffer(floats * sizeof(float) + 64);
    packed_bf16_ = aligned_buffer(bf16 * sizeof(kernels::bf16_bits) + 64);
    for (packed_ref& p : packs_) {
      p.ready = false;
      p.halves = 0;
      p.amx_data = nullptr;
      if (p.shared)
        p.panels = nullptr;
      else if (p.bf16_storage)
        p.panels = reinterpret_cast<kernels::bf16_bits*>(packed_bf16_.data()) + p.offset;
      else
        p.panels = reinterpret_cast<float*>(packed_.data()) + p.offset;
    }
  }

  void pack_weights_of(const slot& s) {
    for (packed_ref& p : packs_) {
      if (p.iter != s.iter) continue;
      const plan::gemm_part& part =
          lowered::value.desc[std::size_t(p.group)].gemm[std::size_t(p.part)];
      if (p.pair) {
        if (part.b.base == s.node) pack_pair_half(part, p, s, part.b, part.b_ks, part.b_ns, 0);
        if (part.pair_b.base == s.node)
          pack_pair_half(part, p, s, part.pair_b, part.pair_b_ks, part.pair_b_ns, 1);
        continue;
      }
      if (part.b.base != s.node) continue;
      const graph::node& w = g[s.node];
      if (p.amx) {
        p.amx_data = pack_bf16_into(
            part, s.data, reinterpret_cast<kernels::bf16_bits*>(packed_bf16_.data()) + p.offset);
      } else if (uses_bf16_panels(part)) {
        if (w.type != dtype::bf16)
          throw binding_error("binding \"" + s.name + "\": this matmul weight must be bf16");
        if (p.shared) p.panels = shared_panels(part, p, s, w.type, 1);
        kernels::pack_b_bf16_panels<arch>(
            part.k, part.n, static_cast<const kernels::bf16_bits*>(s.data) + part.b.offset,
            part.b_ks, part.b_ns, static_cast<kernels::bf16_bits*>(p.panels));
      } else {
        if (p.shared && (w.type == dtype::bf16 || w.type == dtype::f32))
          p.panels = shared_panels(part, p, s, w.type, 0);
        float* dst = static_cast<float*>(p.panels);
        if (w.type == dtype::bf16)
          kernels::pack_b_strided<arch>(
              part.k, part.n, static_cast<const kernels::bf16_bits*>(s.data) + part.b.offset,
              part.b_ks, part.b_ns, dst);
        else if (w.type == dtype::f32)
          kernels::pack_b_strided<arch>(part.k, part.n,
                                        static_cast<const float*>(s.data) + part.b.offset,
                                        part.b_ks, part.b_ns, dst);
        else
          throw binding_error("binding \"" + s.name + "\": a matmul weight must be f32 or bf16");
      }
      p.ready = true;
    }
  }

  // The cache's panels for this pack's weight as bound from `s` (layout 0: f32 panels, 1: bf16).
  void* shared_panels(const plan::gemm_part& part, const packed_ref& p, const slot& s, dtype type,
                      int layout) {
    const std::size_t elem = layout == 1 ? sizeof(kernels::bf16_bits) : sizeof(float);
    const std::size_t src_elem = type == dtype::bf16 ? sizeof(kernels::bf16_bits) : sizeof(float);
    packed_weight_cache::key k;
    k.data = reinterpret_cast<std::uintptr_t>(s.data) + std::uintptr_t(part.b.offset) * src_elem;
    k.k = part.k;
    k.n = part.n;
    k.ks = part.b_ks;
    k.ns = part.b_ns;
    k.type = type;
    k.layout = layout;
    k.panel_width = kernels::gemm_tile<arch>::nr;
    return cache_->panels(k, p.size * elem);
  }

  // One weight of a GEMM pair into its half of the pair's panels; the pair is ready with both.
  void pack_pair_half(const plan::gemm_part& part, packed_ref& p, const slot& s,
                      const plan::strided_view& b, std::int64_t ks, std::int64_t ns, int half) {
    const graph::node& w = g[s.node];
    if (uses_bf16_panels(part)) {
      if (w.type != dtype::bf16)
        throw binding_error("binding \"" + s.name + "\": this matmul weight must be bf16");
      kernels::pack_b_pair_half<arch>(
          part.k, part.n, static_cast<const kernels::bf16_bits*>(s.data) + b.offset, ks, ns, half,
          static_cast<kernels::bf16_bits*>(p.panels));
    } else if (w.type == dtype::bf16) {
      kernels::pack_b_pair_half<arch>(
          part.k, part.n, static_cast<const kernels::bf16_bits*>(s.data) + b.offset, ks, ns, half,
          static_cast<float*>(p.panels));
    } else if (w.type == dtype::f32) {
      kernels::pack_b_pair_half<arch>(part.k, part.n, static_cast<const float*>(s.data) + b.offset,
                                      ks, ns, half,
                                      reinterpret_cast<float*>(packed_.data()) + p.offset);
    } else {
      throw binding_error("binding \"" + s.name + "\": a matmul weight must be f32 or bf16");
    }
    p.halves = std::uint8_t(p.halves | (1u << half));
    p.ready = p.halves == 3;
  }

  static const kernels::bf16_bits* pack_bf16_into(const plan::gemm_part& part, const void* data,
                                                  kernels::bf16_bits* dst) {
    const bool unit_n = part.b_ns == 1;
    const std::int64_t ld = unit_n ? part.b_ks : part.b_ns;
    if (!unit_n && part.b_ks != 1)
      throw binding_error("amx_bf16: a bf16 weight read with no unit stride");
    return kernels::pack_b_bf16(part.k, part.n,
                                static_cast<const kernels::bf16_bits*>(data) + part.b.offset, ld,
                                !unit_n, dst)
        .data;
  }

  // ---- per call ----
  // Pointers for every value of region r at iteration it.
  void set_region_values(int r, int it, std::byte* body_arena) {
    std::byte* base = r == 0 ? arena_.data() : body_arena;
    for (int i = 0; i < int(N); ++i) {
      const graph::node& n = g[i];
      if (n.region != r) continue;
      if (n.op == op_kind::input || n.op == op_kind::param)
        val_[std::size_t(i)] = const_cast<void*>(slot_data(i, it));
      else if (n.op == op_kind::state)
        val_[std::size_t(i)] = state_ptr_[std::size_t(i)];
      else if (mp.in_arena(i))
        val_[std::size_t(i)] = base + mp.offset[std::size_t(i)];
    }
    if (r == 0)  // computed outputs are written straight to user memory; leaf outputs are copied
      for (int o = 0; o < g.n_outputs; ++o)
        if (!graph::is_leaf(g[g.outputs[std::size_t(o)]].op))
          val_[std::size_t(g.outputs[std::size_t(o)])] = outputs_[std::size_t(o)];
  }

  float* scratch() { return reinterpret_cast<float*>(scratch_.data()); }

  static double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }

  using kernel_fn = void (executor::*)(int);
  template <std::size_t... I>
  static constexpr std::array<kernel_fn, sizeof...(I)> kernel_table(std::index_sequence<I...>) {
    return {&executor::run_kernel<int(I)>...};
  }
  static constexpr std::array<kernel_fn, std::size_t(G)> kernels_ =
      kernel_table(std::make_index_sequence<std::size_t(G)>{});

  void run_group(int gi, int it) {
    const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
    if (gr.kind == plan::group_kind::repeat) {
      run_repeat(gr.anchor);
      return;
    }
    const auto t0 =
        profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    const double c0 = profiling_ ? thread_cpu_seconds() : 0.0;
    split_ = false;
    pairs_ran_ = 0;
    const bool generated = !lowered::value.desc[std::size_t(gi)].refused();
    if (paired_away_[std::size_t(gi)]) {  // its product is its pair's second accumulator
      count_group(gi, it, true);
      return;
    }
    if (generated)
      (this->*kernels_[std::size_t(gi)])(it);
    else
      interpret_group(gi);
    if (profiling_) {
      group_profile& pr = profile_[std::size_t(gi)];
      pr.calls += 1;
      pr.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      pr.cpu_seconds += thread_cpu_seconds() - c0;
    }
    count_group(gi, it, generated);
  }

  void count_group(int gi, int it, bool generated) {
    if (it != 0 || counted_.size() >= counted_.capacity()) return;
    for (int c : counted_)
      if (c == gi) return;
    counted_.push_back(gi);
    (generated ? stats_.fast_groups : stats_.interpreted_groups) += 1;
    stats_.parallel_groups += split_;
    stats_.paired_gemms += pairs_ran_;
    if (generated && fp.groups[std::size_t(gi)].kind == plan::group_kind::attention &&
        amx_attention_ && lowered::value.desc[std::size_t(gi)].att.score.empty())
      stats_.amx_attention += 1;
  }

  // Below this much work (multiply-adds, or element-ops for loops) a kernel runs on the calling
  // thread: waking the pool costs more than the work it would share (measured on the seed model:
  // 2 sleeping threads were slower than 1). A polling pool is cheap to start, so its threshold is
  // lower.
  kernels::thread_pool* pool_for(double work) {
    const double threshold = pool_.spin().count() > 0 ? double(FUSEDSL_CPU_PARALLEL_MACS_POLLING)
                                                      : double(FUSEDSL_CPU_PARALLEL_MACS);
    if (pool_.size() == 1 || work < threshold) return nullptr;
    split_ = true;
    return &pool_;
  }

  template <int GI>
  void run_kernel(int it) {
    using D = desc<GI>;
    constexpr const plan::kernel_desc& d = D::value;
    if constexpr (d.kind == plan::kernel_kind::loop || d.kind == plan::kernel_kind::reduce) {
      constexpr double work = [] {
        double e = 1;
        for (int t = 0; t < D::value.rank; ++t) e *= double(D::value.extent[std::size_t(t)]);
        return e * double(D::value.c.n_ins > 0 ? D::value.c.n_ins : 1);
      }();
      if constexpr (d.kind == plan::kernel_kind::loop)
        kernels::gen::run_loop<D, arch>(val_.data(), pool_for(work));
      else
        kernels::gen::run_reduce<D, arch>(val_.data(), pool_for(work));
    } else if constexpr (d.kind == plan::kernel_kind::row) {
      constexpr double work = [] {
        double e = 1;
        for (int t = 0; t < D::value.rank; ++t) e *= double(D::value.extent[std::size_t(t)]);
        return e * 8.0;
      }();
      kernels::gen::run_row<D, arch>(val_.data(), scratch(), pool_for(work));
    } else if constexpr (d.kind == plan::kernel_kind::gemm) {
      [&]<int... P>(std::integer_sequence<int, P...>) {
        (run_gemm<GI, P>(it), ...);
      }
      (std::make_integer_sequence<int, D::value.n_gemm>{});
    } else if constexpr (d.kind == plan::kernel_kind::attention) {
      run_attention<GI>();
    } else if constexpr (d.kind == plan::kernel_kind::update) {
      kernels::gen::run_update<D>(val_.data());
    }
  }

  // ---- gemm ----
  template <int GI, int P>
  void run_gemm(int it) {
    using D = desc<GI>;
    static constexpr plan::gemm_part p = D::value.gemm[std::size_t(P)];
    using OutT = std::conditional_t<g[p.out].type == dtype::bf16, kernels::bf16_bits, float>;
    static_assert(g[p.out].type == dtype::f32 || g[p.out].type == dtype::bf16,
                  "cpu::executor: a matmul group writes f32 or bf16");
    const packed_ref* pre = nullptr;
    if constexpr (p.b_param) {
      for (const packed_ref& pk : packs_)
        if (pk.group == GI && pk.part == P && pk.iter == it && pk.ready) pre = &pk;
      if (pre == nullptr)
        throw binding_error("matmul weight not packed (bind its parameter again)");
    }
    float* ws = scratch();
    const auto pool =
        pool_for(double(p.m) * double(p.n) * double(p.k) * double(p.folded ? 1 : p.batch.size()) *
                 (pre && pre->pair ? 2.0 : 1.0));
    const std::int64_t batches = p.folded ? 1 : p.batch.size();
    // A of another dtype: widened into the workspace, in its logical row-major order.
    constexpr bool widen_a = g[p.a.base].type != dtype::f32;
    static constexpr plan::gemm_part q = widen_a ? widened_a_part(p) : p;
    const float* a_base = static_cast<const float*>(val_[std::size_t(p.a.base)]);
    if constexpr (widen_a) {
      view_to_f32(p.a, ws);
      a_base = ws;
      ws += p.a.shape.size() + 16;
    }
    for (std::int64_t b = 0; b < batches; ++b) {
      std::int64_t a_off = widen_a ? 0 : p.a.offset, b_off = p.b.offset, rest = b;
      for (int c = p.batch_rank - 1; c >= 0 && !p.folded; --c) {
        const std::int64_t ix = rest % p.batch[c];
        rest /= p.batch[c];
        a_off += ix * (widen_a ? q.a_batch_stride : p.a_batch_stride)[std::size_t(c)];
        b_off += ix * p.b_batch_stride[std::size_t(c)];
      }
      const float* a = a_base + a_off;
      OutT* c = static_cast<OutT*>(val_[std::size_t(p.out)]) + (p.folded ? 0 : b * p.m * p.n);
      if constexpr (can_pair(p)) {
        if (pre->pair) {
          static_assert(p.folded || p.batch.size() == 1, "a GEMM pair has no batch loop");
          const kernels::gen::gemm_pair_epilogue<D, P> ep2{val_.data()};
          if constexpr (uses_bf16_panels(p)) {
            const kernels::packed_b<arch, kernels::bf16_bits> bp{
                static_cast<const kernels::bf16_bits*>(pre->panels), p.k, 2 * p.n};
            kernels::gemm_pair_with<arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep2,
                                          ws, pool);
          } else {
            const kernels::packed_b<arch> bp{static_cast<const float*>(pre->panels), p.k,
                                             2 * p.n};
            kernels::gemm_pair_with<arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep2,
                                          ws, pool);
          }
          ++pairs_ran_;
          continue;
        }
      }
      const kernels::gen::gemm_epilogue<D, P> ep{val_.data(), b};
      // Only a build with the AMX tiles instantiates their driver: elsewhere amx_ is false, so no
      // weight is packed for them.
#if FUSEDSL_CPU_AMX
      if (pre && pre->amx) {
        kernels::gemm_amx_with(p.m, p.n, p.k, a, q.lda, q.trans_a,
                               kernels::packed_b_bf16{pre->amx_data, p.k, p.n}, c, p.n, ep,
                               reinterpret_cast<kernels::bf16_bits*>(ws), pool);
        continue;
      }
#endif
      // A compile-time choice: the bf16-panel micro-kernels are instantiated only for the
      // products that take them (a weight's B, so `pre` is set).
      if constexpr (uses_bf16_panels(p)) {
        const kernels::packed_b<arch, kernels::bf16_bits> bp{
            static_cast<const kernels::bf16_bits*>(pre->panels), p.k, p.n};
        kernels::gemm_with<arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep, ws, pool);
        continue;
      }
      kernels::packed_b<arch> bp;
      float* work = ws;
      if (pre) {
        bp = kernels::packed_b<arch>{static_cast<const float*>(pre->panels), p.k, p.n};
      } else {
        static_assert(g[p.b.base].type == dtype::f32 || g[p.b.base].type == dtype::bf16,
                      "cpu::executor: a matmul's B must be f32 or bf16 (cast it)");
        if constexpr (g[p.b.base].type == dtype::bf16)
          bp = kernels::pack_b_strided<arch>(
              p.k, p.n, static_cast<const kernels::bf16_bits*>(val_[std::size_t(p.b.base)]) + b_off,
              p.b_ks, p.b_ns, ws);
        else
          bp = kernels::pack_b_strided<arch>(
              p.k, p.n, static_cast<const float*>(val_[std::size_t(p.b.base)]) + b_off, p.b_ks,
              p.b_ns, ws);
        work = ws + kernels::packed_b_floats<arch>(p.k, p.n) + 16;
      }
      kernels::gemm_with<arch>(p.m, p.n, p.k, a, q.lda, q.trans_a, bp, c, p.n, ep, work, pool);
    }
  }

  // The part with A as a contiguous row-major copy of its logical shape (what view_to_f32 writes).
  static constexpr plan::gemm_part widened_a_part(plan::gemm_part p) {
    const dims& s = p.a.shape;
    const int ra = s.rank, ro = p.batch_rank + 2;
    p.trans_a = g[p.matmul].trans_a;
    p.lda = s[ra - 1];
    for (int c = 0; c < p.batch_rank; ++c) {
      const int ca = c - (ro - ra);
      p.a_batch_stride[std::size_t(c)] = ca >= 0 && s[ca] != 1 ? s.stride(ca) : 0;
    }
    return p;
  }

  // A strided view of a value of any dtype, copied to contiguous f32 (row-major over its shape),
  // and back.
  template <class F>
  static void for_each_in_view(const plan::strided_view& v, F&& f) {
    std::int64_t idx[max_rank]{}, off = v.offset;
    const std::int64_t total = v.shape.size();
    for (std::int64_t flat = 0; flat < total; ++flat) {
      f(flat, off);
      for (int c = v.shape.rank - 1; c >= 0; --c) {
        off += v.stride[std::size_t(c)];
        if (++idx[c] < v.shape[c]) break;
        off -= v.stride[std::size_t(c)] * v.shape[c];
        idx[c] = 0;
      }
    }
  }
  void view_to_f32(const plan::strided_view& v, float* dst) const {
    const dtype t = g[v.base].type;
    const char* src = static_cast<const char*>(val_[std::size_t(v.base)]);
    for_each_in_view(v, [&](std::int64_t flat, std::int64_t off) {
      load_to_f32(t, src + off * size_of(t), dst + flat, 1);
    });
  }
  void f32_to_view(const float* src, const plan::strided_view& v) {
    const dtype t = g[v.base].type;
    char* dst = static_cast<char*>(val_[std::size_t(v.base)]);
    for_each_in_view(v, [&](std::int64_t flat, std::int64_t off) {
      store_from_f32(t, src + flat, dst + off * size_of(t), 1);
    });
  }

  // ---- attention ----
  template <int GI>
  void run_attention() {
    using D = desc<GI>;
    static constexpr plan::attention_part a = D::value.att;
    constexpr int r = a.q.shape.rank;
    kernels::attention_shape sh;
    sh.num_heads = a.heads;
    sh.seq_q = a.seq_q;
    sh.head_dim = a.head_dim;
    sh.num_kv_heads = a.kv_heads;
    sh.seq_kv = a.seq_kv;
    kernels::thread_pool* pool = pool_for(double(a.heads) * double(a.seq_q) * double(a.seq_kv) *
                                          double(a.head_dim) * 2 * double(a.batch.size()));
    // Q, K, V or O of another dtype go through contiguous f32 copies in the workspace, except bf16
    // K and V of a few queries (a decode step over a bf16 KV cache): the decode path reads them in
    // place, only the keys it attends over.
    static constexpr bool kv_bf16 = g[a.k.base].type == dtype::bf16 &&
                                    g[a.v.base].type == dtype::bf16 &&
                                    a.seq_q <= kernels::decode_max_queries;
    float* ws = scratch();
    auto operand = [&](const plan::strided_view& v, bool in, plan::strided_view& used) -> float* {
      used = v;
      if (g[v.base].type == dtype::f32) return static_cast<float*>(val_[std::size_t(v.base)]);
      if (kv_bf16 && in && (&v == &a.k || &v == &a.v)) return nullptr;
      used = plan::contiguous_view(v.base, v.shape);
      float* copy = ws;
      ws += v.shape.size() + 16;
      if (in) view_to_f32(v, copy);
      return copy;
    };
    plan::strided_view qv, kv, vv, ov;
    const float* qp = operand(a.q, true, qv);
    [[maybe_unused]] const float* kp = operand(a.k, true, kv);
    [[maybe_unused]] const float* vp = operand(a.v, true, vv);
    float* op = operand(a.o, false, ov);
    for (std::int64_t b = 0; b < a.batch.size(); ++b) {
      std::int64_t qo = qv.offset, ko = kv.offset, vo = vv.offset, oo = ov.offset, rest = b;
      for (int c = a.batch_rank - 1; c >= 0; --c) {
        const std::int64_t ix = rest % a.batch[c];
        rest /= a.batch[c];
        qo += ix * qv.stride[std::size_t(c)];
        ko += ix * kv.stride[std::size_t(c)];
        vo += ix * vv.stride[std::size_t(c)];
        oo += ix * ov.stride[std::size_t(c)];
      }
      if constexpr (a.kv_len >= 0) {  // keys past a run-time length are never read
        const std::int32_t* len = static_cast<const std::int32_t*>(val_[std::size_t(a.kv_len)]);
        const std::int64_t l = std::int64_t(len[a.kv_len_per_batch ? b : 0]) + a.kv_len_offset;
        sh.seq_kv = l < 0 ? 0 : l > a.seq_kv ? a.seq_kv : l;
      }
      kernels::attention_args args;
      args.q = qp + qo;
      args.q_head_stride = qv.stride[std::size_t(r - 3)],
      args.q_row_stride = qv.stride[std::size_t(r - 2)];
      if constexpr (kv_bf16) {
        args.k_bf16 = static_cast<const kernels::bf16_bits*>(val_[std::size_t(a.k.base)]) + ko;
        args.v_bf16 = static_cast<const kernels::bf16_bits*>(val_[std::size_t(a.v.base)]) + vo;
      } else {
        args.k = kp + ko;
        args.v = vp + vo;
      }
      args.k_head_stride = kv.stride[std::size_t(r - 3)],
      args.k_row_stride = kv.stride[std::size_t(r - 2)];
      args.v_head_stride = vv.stride[std::size_t(r - 3)],
      args.v_row_stride = vv.stride[std::size_t(r - 2)];
      args.o = op + oo;
      args.o_head_stride = ov.stride[std::size_t(r - 3)],
      args.o_row_stride = ov.stride[std::size_t(r - 2)];
      args.scale = a.scale;
      args.causal = a.causal;
      // Only the paths this group's shapes can take are compiled (seq_q is fixed, seq_kv at most
      // a.seq_kv).
      constexpr kernels::attention_paths paths = kernels::attention_paths_for(a.seq_q, a.seq_kv);
      constexpr auto automatic = kernels::attention_path::automatic;
      using mod_t = kernels::gen::score_mod<D, arch>;
      if constexpr (mod_t::active) {
        kernels::flash_attention<arch, mod_t, paths>(sh, args, ws, pool, automatic,
                                                     mod_t{val_.data(), b});
      } else {
#if FUSEDSL_CPU_AMX
        if (amx_attention_ && sh.seq_q > kernels::decode_max_queries) {  // decode: f32 products
          kernels::flash_attention_amx<arch>(sh, args, reinterpret_cast<kernels::bf16_bits*>(ws),
                                             pool);
          continue;
        }
#endif
        kernels::flash_attention<arch, kernels::no_score_mod, paths>(sh, args, ws, pool);
      }
    }
    if (g[a.o.base].type != dtype::f32) f32_to_view(op, a.o);
  }

  // ---- repeat ----
  void run_repeat(int rep) {
    const graph::node& n = g[rep];
    const int r = n.body;
    const int ph = g.regions[std::size_t(r)].placeholder, res = g.regions[std::size_t(r)].result;
    void* dest = val_[std::size_t(rep)];
    if (dest == nullptr) dest = arena_.data() + mp.offset[std::size_t(rep)];
    std::byte* scratch_base = arena_.data() + mp.scratch_offset[std::size_t(rep)];
    const bool in_place = mp.body_in_place[std::size_t(rep)];
    void* carry = scratch_base;
    std::byte* body_arena = scratch_base + (in_place ? 0 : plan::align_up(n.bytes()));
    const void* input = val_[std::size_t(n.in[0])];
    for (int it = 0; it < n.count; ++it) {
      void* out = in_place ? dest : (((n.count - 1 - it) % 2 == 0) ? dest : carry);
      set_region_values(r, it, body_arena);
      val_[std::size_t(ph)] = const_cast<void*>(input);
      val_[std::size_t(res)] = out;
      for (int k = 0; k < G; ++k) {
        const int gi = fp.order[std::size_t(k)];
        if (fp.groups[std::size_t(gi)].region == r) run_group(gi, it);
      }
      input = out;
    }
  }

  // ---- constants and iotas written as outputs ----
  static void fill_leaf(const graph::node& n, void* dst) {
    std::vector<float> tmp(std::size_t(n.shape.size() > 0 ? n.shape.size() : 1));
    interpret(g.data(), n, nullptr, tmp.data());
    store_from_f32(n.type, tmp.data(), dst, n.shape.size());
  }
  static void store_from_f32(dtype t, const float* src, void* dst, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      switch (t) {
        case dtype::f32:
          static_cast<float*>(dst)[i] = src[i];
          break;
        case dtype::bf16:
          kernels::gen::element_from_f32<dtype::bf16>(static_cast<std::uint16_t*>(dst) + i, src[i]);
          break;
        case dtype::f16:
          kernels::gen::element_from_f32<dtype::f16>(static_cast<std::uint16_t*>(dst) + i, src[i]);
          break;
        case dtype::i32:
          kernels::gen::element_from_f32<dtype::i32>(static_cast<std::int32_t*>(dst) + i, src[i]);
          break;
        case dtype::boolean:
          kernels::gen::element_from_f32<dtype::boolean>(static_cast<unsigned char*>(dst) + i,
                                                         src[i]);
          break;
      }
    }
  }
  static void load_to_f32(dtype t, const void* src, float* dst, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      switch (t) {
        case dtype::f32:
          dst[i] = static_cast<const float*>(src)[i];
          break;
        case dtype::bf16:
          dst[i] =
              kernels::gen::element_to_f32<dtype::bf16>(static_cast<const std::uint16_t*>(src) + i);
          break;
        case dtype::f16:
          dst[i] =
              kernels::gen::element_to_f32<dtype::f16>(static_cast<const std::uint16_t*>(src) + i);
          break;
        case dtype::i32:
          dst[i] =
              kernels::gen::element_to_f32<dtype::i32>(static_cast<const std::int32_t*>(src) + i);
          break;
        case dtype::boolean:
          dst[i] = kernels::gen::element_to_f32<dtype::boolean>(
              static_cast<const unsigned char*>(src) + i);
          break;
      }
    }
  }

  // ---- states ----
  void make_states() {
    std::size_t bytes = 0;
    std::array<std::size_t, N> at{};
    for (int i = 0; i < int(N); ++i)
      if (g[i].op == op_kind::state) {
        at[std::size_t(i)] = bytes;
        bytes += std::size_t(plan::align_up(g[i].bytes()));
      }
    states_ = aligned_buffer(bytes);
    for (int i = 0; i < int(N); ++i)
      if (g[i].op == op_kind::state)
        state_ptr_[std::size_t(i)] = states_.data() + at[std::size_t(i)];
  }

  // ---- the interpreter (refused groups; every group with interpreter_only) ----
  // It computes in f32, node by node: every operand is read as an f32 copy (interp_: one per
  // input, parameter and group result of region 0 and of one layer of each body), every member
  // materialised in interp_scratch_.
  void make_interpreter_buffers() {
    std::size_t floats = 0, scratch = 64;
    for (int i = 0; i < int(N); ++i) {
      f32_offset_[std::size_t(i)] = floats;
      floats += std::size_t(g[i].shape.size()) + 16;
    }
    for (int gi = 0; gi < G; ++gi) {
      std::size_t need = 64;
      for (int i = 0; i < int(N); ++i) {
        bool read = fp.group_of[std::size_t(i)] == gi;
        for (int j = 0; j < int(N) && !read; ++j)
          if (fp.group_of[std::size_t(j)] == gi)
            for (int k = 0; k < g[j].n_in; ++k) read = read || g[j].in[std::size_t(k)] == i;
        if (read) need += std::size_t(g[i].shape.size()) + 16;
      }
      scratch = std::max(scratch, need);
    }
    interp_ = aligned_buffer(floats * sizeof(float) + 64);
    interp_scratch_ = aligned_buffer(scratch * sizeof(float) + 64);
  }
  float* f32_of(int id) {
    return reinterpret_cast<float*>(interp_.data()) + f32_offset_[std::size_t(id)];
  }

  // Every group through the interpreter, values in f32 copies.
  void run_interpreted() {
    for (int i = 0; i < int(N); ++i) {
      if (g[i].region == 0 && (g[i].op == op_kind::input || g[i].op == op_kind::param))
        load_to_f32(g[i].type, slot_data(i, 0), f32_of(i), g[i].shape.size());
      if (g[i].op == op_kind::state)
        load_to_f32(g[i].type, state_ptr_[std::size_t(i)], f32_of(i), g[i].shape.size());
    }
    interpret_region(0, 0);
    for (int o = 0; o < g.n_outputs; ++o) {
      const int id = g.outputs[std::size_t(o)];
      const graph::node& n = g[id];
      if (n.op == op_kind::constant || n.op == op_kind::iota) {
        fill_leaf(n, outputs_[std::size_t(o)]);
        continue;
      }
      store_from_f32(n.type, f32_of(id), outputs_[std::size_t(o)], n.shape.size());
    }
  }
  void interpret_region(int r, int it) {
    for (int k = 0; k < G; ++k) {
      const int gi = fp.order[std::size_t(k)];
      const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
      if (gr.region != r) continue;
      if (gr.kind == plan::group_kind::repeat) {
        const graph::node& n = g[gr.anchor];
        const int body = n.body, ph = g.regions[std::size_t(body)].placeholder,
                  res = g.regions[std::size_t(body)].result;
        std::memcpy(f32_of(ph), f32_of(n.in[0]), std::size_t(n.shape.size()) * sizeof(float));
        for (int layer = 0; layer < n.count; ++layer) {
          for (int i = 0; i < int(N); ++i)
            if (g[i].region == body && (g[i].op == op_kind::input || g[i].op == op_kind::param))
              load_to_f32(g[i].type, slot_data(i, layer), f32_of(i), g[i].shape.size());
          interpret_region(body, layer);
          std::memcpy(f32_of(ph), f32_of(res), std::size_t(n.shape.size()) * sizeof(float));
        }
        std::memcpy(f32_of(gr.anchor), f32_of(ph), std::size_t(n.shape.size()) * sizeof(float));
        continue;
      }
      interpret_members(gi);
      count_group(gi, it, false);
    }
  }
  void interpret_members(int gi) {
    float* cursor = reinterpret_cast<float*>(interp_scratch_.data());
    for (int i = 0; i < int(N); ++i) {
      if (fp.group_of[std::size_t(i)] != gi) continue;
      const graph::node& n = g[i];
      const float* ops[graph::max_operands]{};
      for (int k = 0; k < n.n_in; ++k) {
        const int o = n.in[std::size_t(k)];
        const graph::node& on = g[o];
        if ((on.op == op_kind::constant || on.op == op_kind::iota) &&
            fp.group_of[std::size_t(o)] != gi) {
          interpret(g.data(), on, nullptr, cursor);
          ops[k] = cursor;
          cursor += on.shape.size() + 16;
        } else {
          ops[k] = f32_of(o);
        }
      }
      float* y = f32_of(i);
      interpret(g.data(), n, ops, y);
      // bf16/f16/i32/bool values are rounded to their dtype, as the generated kernels do
      if (n.type != dtype::f32) {
        store_from_f32(n.type, y, cursor, n.shape.size());
        load_to_f32(n.type, cursor, y, n.shape.size());
      }
    }
  }

  // A refused group in a normal run: operands as f32 copies, the group interpreted, its roots
  // converted into their buffers.
  void interpret_group(int gi) {
    for (int i = 0; i < int(N); ++i) {
      if (fp.group_of[std::size_t(i)] == gi) continue;
      bool read = false;
      for (int j = 0; j < int(N) && !read; ++j)
        if (fp.group_of[std::size_t(j)] == gi)
          for (int k = 0; k < g[j].n_in; ++k) read = read || g[j].in[std::size_t(k)] == i;
      if (read && g[i].op != op_kind::constant && g[i].op != op_kind::iota)
        load_to_f32(g[i].type, val_[std::size_t(i)], f32_of(i), g[i].shape.size());
    }
    interpret_members(gi);
    const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
    for (int k = 0; k < gr.n_roots; ++k) {
      const int id = gr.roots[std::size_t(k)];
      store_from_f32(g[id].type, f32_of(id), val_[std::size_t(id)], g[id].shape.size());
    }
  }

  kernels::thread_pool pool_;
  bool interpreter_only_ = false;
  bool amx_ = false;            // amx_bf16 asked for and available
  bool amx_attention_ = false;  // and attention on the tiles too
  bool pair_gemms_ = true;      // gemm_pairs
  std::array<bool, std::size_t(G > 0 ? G : 1)> paired_away_{};  // groups run by their pair
  int pairs_ran_ = 0;           // GEMM pairs the current group ran
  bool profiling_ = false;
  std::array<group_profile, std::size_t(G > 0 ? G : 1)> profile_{};
  std::vector<slot> slots_;
  std::map<std::string, std::size_t> by_name_;
  std::vector<packed_ref> packs_;
  std::size_t scratch_floats_ = 0;
  std::shared_ptr<packed_weight_cache> cache_;  // share_packed_weights
  aligned_buffer arena_, scratch_, packed_, packed_bf16_, interp_, interp_scratch_, states_;
  std::array<void*, N> val_{};
  std::array<void*, N> state_ptr_{};  // each state's memory (inside states_)
  std::array<std::size_t, N> f32_offset_{};
  std::array<void*, graph::max_outputs> outputs_{};
  executor_stats stats_{};
  bool split_ = false;  // the current group's kernels used the pool
  std::vector<int> counted_;
};

}  // namespace fusedsl::cpu
