#pragma once
// The options an executor is built with (threads, interpreter_only, amx_bf16, gemm_pairs) and what
// it reports (executor_stats, group_profile, memory_footprint).
#include <chrono>
#include <cstddef>

#include "fusedsl/plan/groups.hpp"

// Kernels below this many multiply-adds run on the calling thread: waking a sleeping worker costs
// about as much as half of such a kernel's work saves (docs/performance.md, "Threads").
#ifndef FUSEDSL_CPU_PARALLEL_MACS
#define FUSEDSL_CPU_PARALLEL_MACS (1 << 24)
#endif
// The same when the pool polls (threads::spin > 0): a polling worker starts within microseconds,
// so much smaller kernels are worth splitting.
#ifndef FUSEDSL_CPU_PARALLEL_MACS_POLLING
#define FUSEDSL_CPU_PARALLEL_MACS_POLLING (1 << 20)
#endif

namespace fusedsl::cpu {

struct threads {
  int count = 1;
  // How long idle pool threads poll for work before they sleep (kernels::thread_pool): 0 by
  // default, since polling threads compete with other work on shared cores; on cores of its own,
  // tens of microseconds let two threads split even small models' kernels (docs/performance.md,
  // "Threads").
  std::chrono::microseconds spin{0};
};

// Run every group through the interpreter (a cross-check of the generated kernels in tests).
struct interpreter_only {
  bool value = true;
};

// Run matmuls with bf16 weights on AMX tiles, activations rounded to bf16, and (`attention`)
// attention on the tiles with bf16 Q, K, V and probabilities (cpu/executor.hpp).
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
  int constant_groups = 0;  // groups computed once, when the executor was built (their values
                            // depend on no input, parameter or state), not on every call
  int parameter_groups = 0;  // groups computed at the first call after a parameter they read is
                             // bound (their values depend on parameters, no input or state)
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
  std::size_t constants = 0;       // the values of the groups computed once (constant_groups and
                                   // parameter_groups)
  std::size_t total() const {
    return arena + workspace + packed_weights + interpreter + states + constants;
  }
};

}  // namespace fusedsl::cpu
