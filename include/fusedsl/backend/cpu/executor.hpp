#pragma once
// fusedsl::cpu::executor: runs a compiled program on the CPU.
//
// Construction allocates everything the program will ever need: the arena (its size is the
// plan's compile-time constant), the kernels' workspace, and storage for prepacked weights. Weights
// are bound once by name (shapes and dtypes checked) and packed into GEMM panels then. A call
// allocates nothing: inputs are bound by name or position, outputs are written to user memory.
// What is packed is a copy: a GEMM weight (and any bf16 parameter, widened at bind) changed after
// bind counts once it is bound again; inputs and the other parameters (biases, norms' gamma and
// beta) are read from the bound memory at each call, so it must outlive the calls. No output may
// share memory with a bound tensor or another output (run() checks; binding_error).
//
// Each fusion group runs as one kernel when it has the shape of a specialised kernel:
//   matmul     packed GEMM with the fused epilogue act(scale * A.B + bias) + residual, operands read
//              through their layout ops as strided views;
//   attention  flash attention (online softmax, causal blocks skipped, grouped heads), reading Q,
//              K, V through the heads' layout ops and writing the merged heads in place;
//   row        the row kernels (softmax, log_softmax, layernorm, rmsnorm), epilogue in place;
// anything else in a group (a general loop group, an unusual epilogue) runs through the
// interpreter node by node over preallocated scratch, so every plan runs. `stats()` says how many
// groups took which path.
//
// Opt-in (`amx_bf16{}`): matmuls whose B is a bf16 param run on AMX-BF16 tiles (kernels/amx.hpp)
// where the CPU and OS allow it: the weights are packed as bf16 once, the activations rounded to
// bf16 at each call, products accumulated in f32. Attention groups run on the tiles too
// (kernels/attention_amx.hpp: Q, K, V and the probabilities rounded to bf16, softmax in f32)
// unless `amx_bf16{.attention = false}`. Elsewhere the option changes nothing.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "fusedsl/backend/cpu/interpret.hpp"
#include "fusedsl/backend/cpu/kernels/amx.hpp"
#include "fusedsl/backend/cpu/kernels/attention.hpp"
#include "fusedsl/backend/cpu/kernels/attention_amx.hpp"
#include "fusedsl/backend/cpu/kernels/gemm.hpp"
#include "fusedsl/backend/cpu/kernels/threads.hpp"
#include "fusedsl/backend/cpu/view.hpp"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/plan/program.hpp"

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

struct threads {
  int count = 1;
  // How long idle pool threads poll for work before they sleep (kernels::thread_pool): 0 by
  // default, as polling made two-thread models slower on a shared VM (docs/performance.md); on
  // cores of its own, 50 us lets two threads split even the seed model's kernels (1.5-1.8x).
  std::chrono::microseconds spin{0};
};

// Run every group through the interpreter (a cross-check of the specialised kernels in tests).
struct interpreter_only {
  bool value = true;
};

// Run matmuls with bf16 weights on AMX tiles, activations rounded to bf16, and (`attention`)
// attention on the tiles with bf16 Q, K, V and probabilities (see the top comment).
struct amx_bf16 {
  bool value = true;
  bool attention = true;
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
  int fast_groups = 0;         // groups run by one specialised kernel call (per layer)
  int interpreted_groups = 0;  // groups run (at least partly) by the interpreter (per layer)
  int amx_matmuls = 0;         // matmuls with bf16 weights bound and packed for AMX tiles (all layers)
  int amx_attention = 0;       // attention groups run on AMX tiles (per layer)
  int parallel_groups = 0;     // groups whose kernels were split across the pool (per layer)
};

template <class Program>
class executor {
  static constexpr auto& g = Program::graph;
  static constexpr std::size_t N = Program::node_count;
  static constexpr auto& fp = Program::fusion;
  static constexpr auto& mp = Program::memory;
  using arch = kernels::native_arch;

  static constexpr bool supported() {
    for (int i = 0; i < int(N); ++i) {
      const graph::node& n = g[i];
      if (n.op == op_kind::repeat && n.region != 0) return false;  // no nested stacks yet
      const bool weight = n.op == op_kind::param && n.type == dtype::bf16;
      if (!weight && n.type != dtype::f32 && n.type != dtype::boolean && n.type != dtype::i32) return false;
    }
    return true;
  }
  static_assert(supported(), "cpu::executor: runs f32 programs (bf16 allowed for params) without nested stacks");

 public:
  explicit executor(Program = {}, threads t = threads{1}, interpreter_only io = {false}, amx_bf16 amx = {false})
      : pool_(t.count, t.spin),
        interpreter_only_(io.value),
        amx_(amx.value && kernels::amx_available()),
        amx_attention_(amx_ && amx.attention) {
    build_bindings();
    analyse_groups();
    arena_ = aligned_buffer(std::size_t(mp.arena_bytes) + 64);
    scratch_ = aligned_buffer(scratch_floats_ * sizeof(float) + 64);
    packed_ = aligned_buffer(packed_floats_ * sizeof(float) + 64);
    packed_bf16_ = aligned_buffer(packed_bf16_elements_ * sizeof(kernels::bf16_bits) + 64);
    widened_ = aligned_buffer(widened_floats_ * sizeof(float) + 64);
    for (int o = 0; o < g.n_outputs; ++o) outputs_[std::size_t(o)] = nullptr;
    counted_.reserve(std::size_t(fp.n_groups) + 1);
  }
  executor(Program p, threads t, amx_bf16 amx) : executor(p, t, interpreter_only{false}, amx) {}

  // Names this program needs bound, with their dtypes and shapes ("layers.0.attn.q.w", ...).
  using binding_info = graph::binding_info;
  std::vector<binding_info> bindings() const {
    std::vector<binding_info> r;
    for (const slot& s : slots_) r.push_back(binding_info::of(g, s.node, s.name));
    return r;
  }

  // Bind an input or a parameter by name; parameters are packed for the GEMM here, once.
  void bind(std::string_view name, tensor_ref t) {
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end()) throw binding_error("binding \"" + std::string(name) + "\": the program has no input or param of that name");
    slot& s = slots_[it->second];
    const graph::node& n = g[s.node];
    if (t.type != n.type || !(t.shape == n.shape))
      throw binding_error("binding \"" + s.name + "\": expected " + std::string(name_of(n.type)) + to_string(n.shape) +
                          ", got " + std::string(name_of(t.type)) + to_string(t.shape));
    if (t.data == nullptr) throw binding_error("binding \"" + s.name + "\": null data");
    s.data = t.data;
    if (n.type == dtype::f32) {
      s.f32 = static_cast<const float*>(t.data);
    } else {  // widened once, here: kernels compute in f32
      float* w = reinterpret_cast<float*>(widened_.data()) + s.widened;
      for (std::int64_t i = 0; i < n.shape.size(); ++i)
        w[i] = n.type == dtype::bf16 ? float(static_cast<const bf16*>(t.data)[i]) : float(static_cast<const f16*>(t.data)[i]);
      s.f32 = w;
    }
    if (n.op == op_kind::param) pack_weights_of(s);
  }

  // Where output k is written (user memory, row-major, the output's dtype and shape).
  void bind_output(int k, tensor_ref t) {
    if (k < 0 || k >= g.n_outputs) throw binding_error("output " + std::to_string(k) + ": the program has " + std::to_string(g.n_outputs) + " outputs");
    const graph::node& n = g[g.outputs[std::size_t(k)]];
    if (t.type != n.type || !(t.shape == n.shape))
      throw binding_error("output " + std::to_string(k) + ": expected " + std::string(name_of(n.type)) + to_string(n.shape) +
                          ", got " + std::string(name_of(t.type)) + to_string(t.shape));
    outputs_[std::size_t(k)] = static_cast<float*>(t.data);
  }

  // Run the program once. Allocates nothing.
  void run() {
    for (const slot& s : slots_)
      if (s.data == nullptr) throw binding_error("binding \"" + s.name + "\": not bound");
    for (int o = 0; o < g.n_outputs; ++o)
      if (outputs_[std::size_t(o)] == nullptr) throw binding_error("output " + std::to_string(o) + ": not bound");
    check_outputs_alias_nothing();
    set_region_values(0, 0, nullptr);
    for (int k = 0; k < fp.n_groups; ++k) {
      const int gi = fp.order[std::size_t(k)];
      if (fp.groups[std::size_t(gi)].region == 0) run_group(gi, 0);
    }
    // An output that is a leaf, or the same node as an earlier output, is copied into place.
    for (int o = 0; o < g.n_outputs; ++o) {
      const int id = g.outputs[std::size_t(o)];
      const graph::node& n = g[id];
      float* dst = outputs_[std::size_t(o)];
      if (n.op == op_kind::constant || n.op == op_kind::iota) {
        interpret(g.data(), n, nullptr, dst);
        continue;
      }
      const float* src = graph::is_leaf(n.op) ? slot_data(id, 0) : val_[std::size_t(id)];
      if (src != dst) std::memcpy(dst, src, std::size_t(n.shape.size()) * sizeof(float));
    }
  }

  // Convenience for one input and one output of static shape: run(x, out).
  template <class In, class Out>
  void operator()(In& x, Out& out) {
    bind(first_input_name(), x);
    bind_output(0, out);
    run();
  }

  executor_stats stats() const {
    executor_stats s = stats_;
    for (const packed_ref& p : packs_) s.amx_matmuls += p.amx && p.ready;
    return s;
  }

  // Per-group timing (steady_clock and the thread's CPU clock around each group; adds four clock
  // reads per group call).
  void profile(bool on) {
    profiling_ = on;
    for (int gi = 0; gi < fp.n_groups; ++gi) {
      profile_[std::size_t(gi)] = group_profile{};
      profile_[std::size_t(gi)].kind = fp.groups[std::size_t(gi)].kind;
      profile_[std::size_t(gi)].region = fp.groups[std::size_t(gi)].region;
    }
  }
  std::span<const group_profile> profile_results() const { return {profile_.data(), std::size_t(fp.n_groups)}; }
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
          throw binding_error("output " + std::to_string(o) + ": its memory overlaps the memory bound to \"" + s.name +
                              "\" (inputs and parameters are read while outputs are written; bind a separate buffer)");
      for (int p = 0; p < o; ++p)
        if (overlap(out, n_out, outputs_[std::size_t(p)], size_in_bytes(g[g.outputs[std::size_t(p)]])))
          throw binding_error("output " + std::to_string(o) + ": its memory overlaps output " + std::to_string(p) +
                              "'s (bind a separate buffer to each)");
    }
  }

  struct slot {
    std::string name;
    int node = -1;
    int iter = 0;
    const void* data = nullptr;   // the user's memory
    std::size_t widened = 0;      // bf16/f16 params: offset (floats) of their f32 copy in widened_
    const float* f32 = nullptr;   // what kernels read: the user's f32 data or the widened copy
  };
  struct packed_ref {
    int matmul = -1, iter = 0;
    std::size_t offset = 0;  // floats into packed_, or (amx) bf16 elements into packed_bf16_
    bool ready = false;
    bool amx = false;  // packed for the AMX tiles (bf16 weights, amx_bf16 opted in)
    const kernels::bf16_bits* amx_data = nullptr;  // the packed panels (aligned inside the slot)
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

  void build_bindings() {
    for (int i = 0; i < int(N); ++i) {
      const graph::node& n = g[i];
      if (n.op != op_kind::input && n.op != op_kind::param) continue;
      const int iters = iterations_of_region(n.region);
      for (int it = 0; it < iters; ++it) {
        slot s;
        s.name = (n.region ? prefix_of_region(n.region, it) : std::string()) + std::string(n.name.view());
        s.node = i;
        s.iter = it;
        if (by_name_.count(s.name)) throw binding_error("binding \"" + s.name + "\": declared twice");
        if (n.type != dtype::f32) {
          s.widened = widened_floats_;
          widened_floats_ += std::size_t(n.shape.size()) + 16;
        }
        by_name_[s.name] = slots_.size();
        slots_.push_back(s);
      }
    }
  }

  const float* slot_data(int node, int iter) const {
    for (const slot& s : slots_)
      if (s.node == node && s.iter == iter) return s.f32;
    return nullptr;
  }

  // A matmul's B read from a parameter through a 2-D view is packed at bind time.
  static bool b_is_param(int gi, int mm) {
    const strided_view b = read_view(g, fp, gi, g[mm].in[1]);
    return b.ok && g[b.base].op == op_kind::param && b.shape.rank == 2;
  }

  void analyse_groups() {
    std::size_t scratch = 0;
    for (int gi = 0; gi < fp.n_groups; ++gi) {
      const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
      if (gr.kind == plan::group_kind::matmul) matmul_plans_[std::size_t(gi)] = plan_matmul_group(gi);
      std::size_t need = 64;  // interpreter: every member and inlined leaf materialised
      for (int i = 0; i < int(N); ++i) {
        const bool member = fp.group_of[std::size_t(i)] == gi;
        bool inlined = false;
        if (!member && (g[i].op == op_kind::constant || g[i].op == op_kind::iota))
          for (int j = 0; j < int(N) && !inlined; ++j)
            if (fp.group_of[std::size_t(j)] == gi)
              for (int k = 0; k < g[j].n_in; ++k) inlined = inlined || g[j].in[std::size_t(k)] == i;
        if (member || inlined) need += std::size_t(g[i].shape.size()) + 16;
      }
      for (int i = 0; i < int(N); ++i) {
        if (fp.group_of[std::size_t(i)] != gi || g[i].op != op_kind::matmul) continue;
        const graph::node& mm = g[i];
        const std::int64_t k = mm.trans_a ? g[mm.in[0]].shape[g[mm.in[0]].shape.rank - 2] : g[mm.in[0]].shape.back();
        const std::int64_t n = mm.shape.back();
        std::size_t w = kernels::gemm_workspace_floats<arch>(k, pool_.size()) + kernels::packed_b_floats<arch>(k, n) + 64;
        if (gr.kind == plan::group_kind::attention)  // head_dim: Q Kᵀ's k, P V's n
          w += kernels::attention_workspace_floats<arch>(mm.trans_b ? k : n, pool_.size());
        if (amx_attention_ && gr.kind == plan::group_kind::attention && mm.trans_b)  // Q Kᵀ: n = seq_kv
          w = std::max(w, kernels::attention_amx_workspace_elements(k, n, pool_.size()) / 2 + 64);
        const bool amx = amx_ && gr.kind == plan::group_kind::matmul && b_is_param(gi, i) &&
                         g[read_view(g, fp, gi, mm.in[1]).base].type == dtype::bf16;
        if (amx) w = std::max(w, kernels::gemm_amx_workspace_elements(mm.shape.size() / n, k) / 2 + 64);
        if (w > need) need = w;
        if (gr.kind == plan::group_kind::matmul && b_is_param(gi, i)) {
          const int iters = iterations_of_region(mm.region);
          for (int it = 0; it < iters; ++it) {
            if (amx) {
              packs_.push_back({i, it, packed_bf16_elements_, false, true});
              packed_bf16_elements_ += kernels::packed_b_bf16_elements(k, n) + 32;
            } else {
              packs_.push_back({i, it, packed_floats_, false});
              packed_floats_ += kernels::packed_b_floats<arch>(k, n) + 16;
            }
          }
        }
      }
      if (need > scratch) scratch = need;
    }
    scratch_floats_ = scratch;
  }

  void pack_weights_of(const slot& s) {
    for (packed_ref& p : packs_) {
      if (p.iter != s.iter) continue;
      const int gi = fp.group_of[std::size_t(p.matmul)];
      const strided_view b = read_view(g, fp, gi, g[p.matmul].in[1]);
      if (b.base != s.node) continue;
      if (p.amx) {  // from the widened copy: bf16 -> f32 -> bf16 gives the bound bits back
        const b_operand o = b_operand_of(p.matmul, b);
        p.amx_data = kernels::pack_b_bf16(o.k, o.cols, s.f32 + b.offset, o.ld, o.trans,
                                          reinterpret_cast<kernels::bf16_bits*>(packed_bf16_.data()) + p.offset)
                         .data;
      } else {
        pack_b_into(p.matmul, b, s.f32, reinterpret_cast<float*>(packed_.data()) + p.offset);
      }
      p.ready = true;
    }
  }

  // B of matmul mm (a 2-D view) as the packing functions take it: k x cols, leading dimension,
  // transposed or not.
  struct b_operand {
    std::int64_t k, cols, ld;
    bool trans;
  };
  static b_operand b_operand_of(int mm, const strided_view& b) {
    const graph::node& n = g[mm];
    // Element (p, j) of B: b[p*s0 + j*s1] (or transposed). The kernel takes unit stride on one axis.
    b_operand o{n.trans_b ? b.shape[1] : b.shape[0], n.shape.back(), b.stride[0], n.trans_b};
    if (b.stride[1] != 1) {  // stored the other way round
      o.trans = !o.trans;
      o.ld = b.stride[1];
    }
    return o;
  }

  // Pack B (a 2-D view of `data`) for matmul mm into dst.
  kernels::packed_b<arch> pack_b_into(int mm, const strided_view& b, const float* data, float* dst) const {
    const b_operand o = b_operand_of(mm, b);
    return kernels::pack_b<arch>(o.k, o.cols, data + b.offset, o.ld, o.trans, dst);
  }

  // ---- per call ----
  // Pointers for every value of region r at iteration it.
  void set_region_values(int r, int it, float* body_arena) {
    std::byte* base = r == 0 ? arena_.data() : reinterpret_cast<std::byte*>(body_arena);
    for (int i = 0; i < int(N); ++i) {
      const graph::node& n = g[i];
      if (n.region != r) continue;
      if (n.op == op_kind::input || n.op == op_kind::param)
        val_[std::size_t(i)] = const_cast<float*>(slot_data(i, it));
      else if (mp.in_arena(i))
        val_[std::size_t(i)] = reinterpret_cast<float*>(base + mp.offset[std::size_t(i)]);
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

  void run_group(int gi, int it) {
    const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
    bool fast = false;
    if (gr.kind == plan::group_kind::repeat) {
      run_repeat(gr.anchor);
      return;
    }
    const auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    const double c0 = profiling_ ? thread_cpu_seconds() : 0.0;
    split_ = false;
    if (!interpreter_only_) switch (gr.kind) {
      case plan::group_kind::matmul: fast = run_matmul_group(gi, it); break;
      case plan::group_kind::attention: fast = run_attention(gi); break;
      case plan::group_kind::row: fast = run_row(gi); break;
      default: break;
    }
    if (!fast) interpret_group(gi);
    if (profiling_) {
      group_profile& pr = profile_[std::size_t(gi)];
      pr.calls += 1;
      pr.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      pr.cpu_seconds += thread_cpu_seconds() - c0;
    }
    if (it == 0 && counted_.size() < counted_.capacity()) {
      bool seen = false;
      for (int c : counted_) seen = seen || c == gi;
      if (!seen) {
        counted_.push_back(gi);
        (fast ? stats_.fast_groups : stats_.interpreted_groups) += 1;
        stats_.parallel_groups += split_;
        if (fast && gr.kind == plan::group_kind::attention && amx_attention_) stats_.amx_attention += 1;
      }
    }
  }

  void run_repeat(int rep) {
    const graph::node& n = g[rep];
    const int r = n.body;
    const int ph = g.regions[std::size_t(r)].placeholder, res = g.regions[std::size_t(r)].result;
    float* dest = val_[std::size_t(rep)];
    if (dest == nullptr) dest = reinterpret_cast<float*>(arena_.data() + mp.offset[std::size_t(rep)]);
    std::byte* scratch_base = arena_.data() + mp.scratch_offset[std::size_t(rep)];
    const bool in_place = mp.body_in_place[std::size_t(rep)];
    float* carry = reinterpret_cast<float*>(scratch_base);
    float* body_arena = reinterpret_cast<float*>(scratch_base + (in_place ? 0 : plan::align_up(n.bytes())));
    const float* input = val_[std::size_t(n.in[0])];
    for (int it = 0; it < n.count; ++it) {
      float* out = in_place ? dest : (((n.count - 1 - it) % 2 == 0) ? dest : carry);
      set_region_values(r, it, body_arena);
      val_[std::size_t(ph)] = const_cast<float*>(input);
      val_[std::size_t(res)] = out;
      for (int k = 0; k < fp.n_groups; ++k) {
        const int gi = fp.order[std::size_t(k)];
        if (fp.groups[std::size_t(gi)].region == r) run_group(gi, it);
      }
      input = out;
    }
  }

  const float* ptr(const strided_view& v) const { return val_[std::size_t(v.base)] + v.offset; }

  // Below this many multiply-adds a kernel runs on the calling thread: waking the pool costs more
  // than the work it would share (measured on the seed model: 2 sleeping threads were slower than
  // 1). A polling pool is cheap to start, so its threshold is lower.
  kernels::thread_pool* pool_for(double macs) {
    const double threshold = pool_.spin().count() > 0 ? double(FUSEDSL_CPU_PARALLEL_MACS_POLLING)
                                                      : double(FUSEDSL_CPU_PARALLEL_MACS);
    if (pool_.size() == 1 || macs < threshold) return nullptr;
    split_ = true;
    return &pool_;
  }

  // matmul groups: each matmul of the group (siblings too) with its epilogue chain. Every matmul
  // must take the fast path before any runs; each is planned once.
  bool run_matmul_group(int gi, int it) {
    float* ws = scratch();
    const matmul_group_plan& mg = matmul_plans_[std::size_t(gi)];
    if (!mg.ok) return false;
    for (int q = 0; q < mg.count; ++q) {
      const int i = mg.ids[std::size_t(q)];
      const gemm_plan& p = mg.plans[std::size_t(q)];
      kernels::packed_b<arch> b;
      const packed_ref* pre = nullptr;
      for (const packed_ref& pk : packs_)
        if (pk.matmul == i && pk.iter == it && pk.ready) pre = &pk;
      kernels::gemm_epilogue ep;
      ep.scale = p.scale;
      ep.bias = p.bias ? val_[std::size_t(p.bias_node)] + p.bias_offset : nullptr;
      ep.act = p.act;
      ep.residual = p.residual >= 0 ? val_[std::size_t(p.residual)] : nullptr;
      ep.ld_residual = p.n;
      const auto pool = pool_for(double(p.m) * double(p.n) * double(p.k));
      if (pre && pre->amx) {
        kernels::gemm_amx(p.m, p.n, p.k, ptr(p.a), p.lda, p.trans_a, kernels::packed_b_bf16{pre->amx_data, p.k, p.n},
                          val_[std::size_t(p.out)], p.n, ep, reinterpret_cast<kernels::bf16_bits*>(ws), pool);
        continue;
      }
      float* work = ws;
      if (pre) {
        b = kernels::packed_b<arch>{reinterpret_cast<const float*>(packed_.data()) + pre->offset, p.k, p.n};
      } else {
        b = pack_b_into(i, p.b, val_[std::size_t(p.b.base)], ws);
        work = ws + kernels::packed_b_floats<arch>(p.k, p.n) + 16;
      }
      kernels::gemm<arch>(p.m, p.n, p.k, ptr(p.a), p.lda, p.trans_a, b, val_[std::size_t(p.out)], p.n, ep, work, pool);
    }
    return true;
  }

  struct gemm_plan {
    bool ok = false;
    strided_view a, b;
    std::int64_t m = 0, n = 0, k = 0, lda = 0;
    bool trans_a = false;
    float scale = 1.0f;
    bool bias = false;
    int bias_node = -1;
    std::int64_t bias_offset = 0;
    kernels::activation act = kernels::activation::none;
    int residual = -1;
    int out = -1;
  };

  // Every matmul of a matmul group with its epilogue, planned once at construction; ok only if
  // all of them take the fast path.
  struct matmul_group_plan {
    bool ok = false;
    int count = 0;
    std::array<gemm_plan, plan::max_roots> plans{};
    std::array<int, plan::max_roots> ids{};
  };
  matmul_group_plan plan_matmul_group(int gi) const {
    matmul_group_plan mg;
    for (int i = 0; i < int(N); ++i) {
      if (fp.group_of[std::size_t(i)] != gi || g[i].op != op_kind::matmul) continue;
      if (mg.count == plan::max_roots) return mg;
      mg.plans[std::size_t(mg.count)] = plan_gemm(gi, i);
      if (!mg.plans[std::size_t(mg.count)].ok) return mg;
      mg.ids[std::size_t(mg.count++)] = i;
    }
    mg.ok = true;
    return mg;
  }

  static bool is_scalar_constant(int id) { return g[id].op == op_kind::constant; }

  gemm_plan plan_gemm(int gi, int mm) const {
    gemm_plan p;
    const graph::node& n = g[mm];
    p.a = read_view(g, fp, gi, n.in[0]);
    p.b = read_view(g, fp, gi, n.in[1]);
    if (!p.a.ok || !p.b.ok || p.b.shape.rank != 2) return p;
    if (p.b.stride[0] != 1 && p.b.stride[1] != 1) return p;
    const int ra = p.a.shape.rank;
    p.n = n.shape.back();
    p.trans_a = n.trans_a;
    if (!n.trans_a) {
      if (p.a.stride[std::size_t(ra - 1)] != 1) return p;
      p.lda = p.a.stride[std::size_t(ra - 2)];
      p.k = p.a.shape[ra - 1];
      // Leading axes fold into rows when they are laid out as consecutive row blocks.
      p.m = p.a.shape[ra - 2];
      std::int64_t expect = p.lda * p.m;
      for (int ax = ra - 3; ax >= 0; --ax) {
        if (p.a.stride[std::size_t(ax)] != expect && p.a.shape[ax] != 1) return p;
        p.m *= p.a.shape[ax];
        expect *= p.a.shape[ax];
      }
    } else {
      if (ra != 2 || p.a.stride[1] != 1) return p;
      p.lda = p.a.stride[0];
      p.k = p.a.shape[0];
      p.m = p.a.shape[1];
    }
    // Epilogue: act(scale * acc + bias) + residual, in that order, each step optional.
    int tail = mm, stage = 0;
    for (;;) {
      int next = -1;
      for (int i = tail + 1; i < int(N) && next < 0; ++i)
        if (fp.group_of[std::size_t(i)] == gi)
          for (int k = 0; k < g[i].n_in; ++k)
            if (g[i].in[std::size_t(k)] == tail && g[i].op != op_kind::matmul) next = i;
      if (next < 0) break;
      const graph::node& c = g[next];
      const int other = c.n_in == 2 ? (c.in[0] == tail ? c.in[1] : c.in[0]) : -1;
      if (stage == 0 && (c.op == op_kind::mul || c.op == op_kind::div) && c.in[0] == tail && is_scalar_constant(other)) {
        p.scale = c.op == op_kind::mul ? float(g[other].value) : float(1.0 / g[other].value);
        stage = 1;
      } else if (stage <= 1 && c.op == op_kind::add && fp.group_of[std::size_t(other)] != gi &&
                 (g[other].shape == make_dims(p.n) || g[other].shape == make_dims(1, p.n)) && !is_scalar_constant(other) &&
                 g[other].type == dtype::f32) {
        p.bias = true;
        p.bias_node = other;
        stage = 2;
      } else if (stage <= 2 && graph::is_unary(c.op) && activation_of(c.op) != kernels::activation::none) {
        p.act = activation_of(c.op);
        stage = 3;
      } else if (stage <= 3 && c.op == op_kind::add && fp.group_of[std::size_t(other)] != gi && g[other].shape == n.shape &&
                 g[other].type == dtype::f32) {
        p.residual = other;
        stage = 4;
      } else {
        return p;  // an epilogue the kernel does not express
      }
      tail = next;
    }
    p.out = tail;
    p.ok = true;
    return p;
  }

  static kernels::activation activation_of(op_kind k) {
    switch (k) {
      case op_kind::relu: return kernels::activation::relu;
      case op_kind::gelu_erf: return kernels::activation::gelu_erf;
      case op_kind::gelu_tanh: return kernels::activation::gelu_tanh;
      case op_kind::silu: return kernels::activation::silu;
      case op_kind::sigmoid: return kernels::activation::sigmoid;
      default: return kernels::activation::none;
    }
  }

  // attention groups: softmax(scale * Q Kᵀ [mask]) V with Q, K, V and O as strided views.
  bool run_attention(int gi) {
    const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
    const int pv = gr.anchor, sm = g[pv].in[0];
    int cur = g[sm].in[0];
    kernels::attention_args a;
    float scale = 1.0f;
    int mask = -1;
    while (g[cur].op != op_kind::matmul) {
      const graph::node& c = g[cur];
      if (c.op == op_kind::mul && is_scalar_constant(c.in[1])) scale *= float(g[c.in[1]].value);
      else if (c.op == op_kind::div && is_scalar_constant(c.in[1])) scale /= float(g[c.in[1]].value);
      else if (c.op == op_kind::select && is_causal(c.in[0])) a.causal = true;
      else if (c.op == op_kind::add && fp.group_of[std::size_t(c.in[1])] != gi && g[c.in[1]].shape.rank == 2) mask = c.in[1];
      else if (c.op != op_kind::reshape) return false;
      cur = (c.op == op_kind::select) ? c.in[1] : c.in[0];
    }
    const int s = cur;
    // Q: [H, L, dh], or [Hkv, G*L, dh] formed from [H, L, dh] by a reshape (grouped heads).
    int qn = g[s].in[0];
    if (g[qn].op == op_kind::reshape && fp.group_of[std::size_t(qn)] == gi && g[g[qn].in[0]].shape.rank == 3) qn = g[qn].in[0];
    const strided_view q = read_view(g, fp, gi, qn), k = read_view(g, fp, gi, g[s].in[1]), v = read_view(g, fp, gi, g[pv].in[1]);
    // O: the value after pv (and after the grouped-heads reshape back to [H, L, dh], if any).
    int on = pv;
    for (int i = pv + 1; i < int(N); ++i)
      if (fp.group_of[std::size_t(i)] == gi && g[i].op == op_kind::reshape && g[i].in[0] == on && g[i].shape.rank == 3 &&
          g[i].shape == g[qn].shape)
        on = i;
    const strided_view o = write_view(g, gr.roots[0], on);
    if (!q.ok || !k.ok || !v.ok || !o.ok) return false;
    if (q.shape.rank != 3 || k.shape.rank != 3 || v.shape.rank != 3 || o.shape.rank != 3) return false;
    if (q.stride[2] != 1 || k.stride[2] != 1 || v.stride[2] != 1 || o.stride[2] != 1) return false;
    if (g[s].trans_a || !g[s].trans_b) return false;
    kernels::attention_shape sh;
    sh.num_heads = q.shape[0];
    sh.seq_q = q.shape[1];
    sh.head_dim = q.shape[2];
    sh.num_kv_heads = k.shape[0];
    sh.seq_kv = k.shape[1];
    if (v.shape[0] != sh.num_kv_heads || v.shape[2] != sh.head_dim || o.shape[0] != sh.num_heads) return false;
    a.q = ptr(q), a.q_head_stride = q.stride[0], a.q_row_stride = q.stride[1];
    a.k = ptr(k), a.k_head_stride = k.stride[0], a.k_row_stride = k.stride[1];
    a.v = ptr(v), a.v_head_stride = v.stride[0], a.v_row_stride = v.stride[1];
    a.o = val_[std::size_t(gr.roots[0])] + o.offset, a.o_head_stride = o.stride[0], a.o_row_stride = o.stride[1];
    a.scale = scale;
    if (mask >= 0) {
      a.mask = val_[std::size_t(mask)];
      a.mask_row_stride = g[mask].shape[1];
    }
    kernels::thread_pool* pool = pool_for(double(sh.num_heads) * double(sh.seq_q) * double(sh.seq_kv) * double(sh.head_dim) * 2);
    if (amx_attention_)
      kernels::flash_attention_amx<arch>(sh, a, reinterpret_cast<kernels::bf16_bits*>(scratch()), pool);
    else
      kernels::flash_attention<arch>(sh, a, scratch(), pool);
    return true;
  }

  // pred == (iota over rows >= iota over columns) of an [L, L] shape: the causal mask.
  static bool is_causal(int pred) {
    const graph::node& p = g[pred];
    if (p.op != op_kind::ge || p.shape.rank != 2) return false;
    const graph::node &a = g[p.in[0]], &b = g[p.in[1]];
    return a.op == op_kind::iota && b.op == op_kind::iota && a.axis == 0 && b.axis == 1;
  }

  // row groups: the row kernel into the group's result, then the epilogue in place.
  bool run_row(int gi) {
    const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
    const graph::node& n = g[gr.anchor];
    if (n.axis != n.shape.rank - 1) return false;
    float* y = val_[std::size_t(gr.roots[0])];
    const float* in[3] = {val_[std::size_t(n.in[0])], n.n_in > 1 ? val_[std::size_t(n.in[1])] : nullptr,
                          n.n_in > 2 ? val_[std::size_t(n.in[2])] : nullptr};
    interpret(g.data(), n, in, y);
    for (int i = gr.anchor + 1; i < int(N); ++i) {
      if (fp.group_of[std::size_t(i)] != gi) continue;
      const graph::node& c = g[i];
      const float* ops[graph::max_operands]{};
      for (int k = 0; k < c.n_in; ++k) {
        const int o = c.in[std::size_t(k)];
        ops[k] = fp.group_of[std::size_t(o)] == gi ? y : leaf_or_value(o, nullptr);
      }
      interpret(g.data(), c, ops, y);
    }
    return true;
  }

  const float* leaf_or_value(int id, float** cursor) {
    const graph::node& n = g[id];
    if ((n.op == op_kind::constant || n.op == op_kind::iota) && val_[std::size_t(id)] == nullptr) {
      // Inlined leaves are materialised into scratch (the tail of it, past the interpreter's use).
      float* dst = cursor ? *cursor : scratch() + scratch_floats_ - std::size_t(n.shape.size()) - 16;
      interpret(g.data(), n, nullptr, dst);
      if (cursor) *cursor += n.shape.size() + 16;
      return dst;
    }
    return val_[std::size_t(id)];
  }

  // The general path: every member of the group in order, intermediates in scratch.
  void interpret_group(int gi) {
    float* cursor = scratch();
    std::array<float*, N> local{};
    for (int i = 0; i < int(N); ++i) {
      if (fp.group_of[std::size_t(i)] != gi) continue;
      const graph::node& n = g[i];
      const float* ops[graph::max_operands]{};
      for (int k = 0; k < n.n_in; ++k) {
        const int o = n.in[std::size_t(k)];
        ops[k] = fp.group_of[std::size_t(o)] == gi ? local[std::size_t(o)] : leaf_or_value(o, &cursor);
      }
      bool root = false;
      const plan::fusion_group& gr = fp.groups[std::size_t(gi)];
      for (int r = 0; r < gr.n_roots; ++r) root = root || gr.roots[std::size_t(r)] == i;
      float* y = root ? val_[std::size_t(i)] : cursor;
      if (!root) cursor += n.shape.size() + 16;
      interpret(g.data(), n, ops, y);
      local[std::size_t(i)] = y;
    }
  }

  kernels::thread_pool pool_;
  bool interpreter_only_ = false;
  bool amx_ = false;            // amx_bf16 asked for and available
  bool amx_attention_ = false;  // and attention on the tiles too
  bool profiling_ = false;
  std::array<group_profile, N> profile_{};
  std::vector<slot> slots_;
  std::map<std::string, std::size_t> by_name_;
  std::vector<packed_ref> packs_;
  std::size_t scratch_floats_ = 0, packed_floats_ = 0, widened_floats_ = 0, packed_bf16_elements_ = 0;
  aligned_buffer arena_, scratch_, packed_, widened_, packed_bf16_;
  std::array<float*, N> val_{};
  std::array<matmul_group_plan, N> matmul_plans_{};
  std::array<float*, graph::max_outputs> outputs_{};
  executor_stats stats_{};
  bool split_ = false;  // the current group's kernels used the pool
  std::vector<int> counted_;
};

}  // namespace fusedsl::cpu
