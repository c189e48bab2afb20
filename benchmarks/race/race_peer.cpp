// One model of the race (FUSEDSL_RACE_MODEL names it at compile time, race_models.hpp) run by
// fusedsl's CPU executor or by the hand-written Eigen implementation (eigen_transformer.hpp), as a
// peer that benchmarks/race/race.py times beside PyTorch, ONNX Runtime and XLA. A model with bf16
// weights runs with cpu::amx_bf16{} (AMX tiles where the CPU has them); its weight files hold f32
// values that are bf16 numbers, narrowed exactly at load. Only the f32 GPT/BERT stacks have an
// Eigen peer.
//
//   race_<model> --describe          the program's bindings (name, shape), FLOPs and arena bytes
//   race_<model> --fma-peak          the start-up FMA-chain peak of one core (fma_peak.hpp)
//   race_<model> --self-check        random weights: fusedsl (1 and 2 threads) against Eigen
//   race_<model> --peer fusedsl|eigen --weights DIR --output FILE.npy [--threads N] [--spin-us U]
//       reads DIR/<binding>.npy for every binding, runs the model once, writes its output, then
//       serves the driver on stdin: `run K` (one untimed call, then K timed calls) and `quit`.
//
// Every reply is one line on stdout starting with "@@race " and holding a JSON object; times are
// wall-clock seconds per call (CLOCK_MONOTONIC). Errors go to stderr, with exit status 1.
#include <malloc.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/io/npy.hpp"
#include "peer_json.hpp"
#include "race_models.hpp"

// After fusedsl's headers: they include <immintrin.h> and Eigen under GCC 12's warning fixes.
#include "eigen_transformer.hpp"

#ifndef FUSEDSL_RACE_MODEL
#error "race_peer.cpp: define FUSEDSL_RACE_MODEL to a model of race_models.hpp"
#endif
#define FUSEDSL_RACE_STR2(x) #x
#define FUSEDSL_RACE_STR(x) FUSEDSL_RACE_STR2(x)

namespace fd = fusedsl;

// ---- what the executor allocates ----
// The executor's buffers (arena, scratch, packed weights, widened copies) are aligned_buffers,
// allocated by the aligned operator new. This program replaces that operator to count its live
// bytes, so the footprint is measured at the one public seam there is (the executor reports only
// arena_bytes()).
namespace {

using fusedsl_bench::json_number;
using fusedsl_bench::json_shape;
using fusedsl_bench::json_string;

std::size_t g_aligned_live = 0;
}

void* operator new(std::size_t bytes, std::align_val_t align) {
  const std::size_t a = std::max(std::size_t(align), sizeof(void*));
  void* p = std::aligned_alloc(a, (bytes + a - 1) / a * a);
  if (p == nullptr) throw std::bad_alloc();
  g_aligned_live += malloc_usable_size(p);
  return p;
}
void operator delete(void* p, std::align_val_t) noexcept {
  if (p == nullptr) return;
  g_aligned_live -= malloc_usable_size(p);
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t align) noexcept {
  operator delete(p, align);
}

namespace {

using model = fusedsl_race::FUSEDSL_RACE_MODEL;
using program = typename model::program_type;
constexpr const char* model_name = FUSEDSL_RACE_STR(FUSEDSL_RACE_MODEL);
constexpr bool bf16_model = fusedsl_race::bf16_weights<model>;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(std::string("race_") + model_name + ": " + what);
}

void reply(const std::string& json) {
  std::cout << "@@race " << json << std::endl;
}

// VmRSS or VmHWM of this process, in bytes (from /proc/self/status).
long proc_status_bytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') kib = std::atol(line + n + 1);
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The weights and the input, one tensor per binding (of the binding's dtype), by binding name.
struct bound_tensors {
  std::vector<fd::graph::binding_info> infos;
  std::vector<fd::dynamic_tensor> tensors;
  const float* find(const std::string& name) const {
    for (std::size_t i = 0; i < infos.size(); ++i)
      if (infos[i].name == name) {
        if (infos[i].type != fd::dtype::f32) fail("binding " + name + " is not f32");
        return tensors[i].data<float>();
      }
    fail("no binding named " + name);
  }
};

// Stores f32 value v at element i of t: as it is, or narrowed to t's bf16. Returns whether the
// stored value is v (false: v is not a bf16 number, so the bound weights would differ from those
// the Python peers read).
bool store(fd::dynamic_tensor& t, std::int64_t i, float v) {
  if (t.type() == fd::dtype::f32) {
    t.data<float>()[i] = v;
    return true;
  }
  const fd::bf16 b(v);
  t.data<fd::bf16>()[i] = b;
  return float(b) == v || (std::isnan(v) && std::isnan(float(b)));
}

std::vector<fd::graph::binding_info> binding_list() {
  static_assert(fd::cpu::executor<program>::kernels_plan().n_refused == 0,
                "every group of the raced model runs a generated kernel");
  fd::cpu::executor<program> probe(program{});
  return probe.bindings();
}

bound_tensors read_weights(const std::string& dir) {
  bound_tensors b;
  b.infos = binding_list();
  for (const auto& info : b.infos) {
    const std::string path = dir + "/" + info.name + ".npy";
    const fd::io::npy_array a = fd::io::read_npy(path);
    if (a.dtype != fd::io::npy_dtype::f4) fail(path + ": not float32");
    bool same = int(a.shape.size()) == info.shape.rank;
    for (int i = 0; same && i < info.shape.rank; ++i)
      same = a.shape[std::size_t(i)] == info.shape[i];
    if (!same) fail(path + ": shape differs from the program's " + fd::to_string(info.shape));
    if (info.type != fd::dtype::f32 && info.type != fd::dtype::bf16)
      fail(info.name + ": a binding of dtype " + std::string(fd::name_of(info.type)));
    b.tensors.emplace_back(info.type, info.shape);
    const std::int64_t n = info.shape.size();
    for (std::int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, a.data.data() + std::size_t(i) * sizeof(float), sizeof v);
      if (!store(b.tensors.back(), i, v))
        fail(path + ": element " + std::to_string(i) + " (" + std::to_string(v) +
             ") is not a bf16 number, and " + info.name + " is bf16");
    }
  }
  return b;
}

// normal(0, 0.05) for every binding, 1 + normal(0, 0.05) for the layernorm gammas (as model_bench).
bound_tensors random_weights(unsigned seed) {
  bound_tensors b;
  b.infos = binding_list();
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (const auto& info : b.infos) {
    b.tensors.emplace_back(info.type, info.shape);
    const float base = info.name.find("gamma") != std::string::npos ? 1.0f : 0.0f;
    for (std::int64_t i = 0; i < info.shape.size(); ++i)
      store(b.tensors.back(), i, base + nd(rng));  // bf16: narrowed, which is what is bound
  }
  return b;
}

constexpr fd::dims output_shape() {
  return program::graph[program::graph.outputs[0]].shape;
}

// A peer: one call computes the model on the bound input into `out`.
struct peer {
  virtual ~peer() = default;
  virtual void call() = 0;
  virtual std::string describe() const = 0;
  std::vector<float> out = std::vector<float>(std::size_t(output_shape().size()));
};

struct fusedsl_peer final : peer {
  fusedsl_peer(const bound_tensors& w, int threads, long spin_us)
      : threads_(threads), spin_(spin_us) {
    const std::size_t before = g_aligned_live;
    ex_ = std::make_unique<fd::cpu::executor<program>>(
        program{}, fd::cpu::threads{threads, std::chrono::microseconds(spin_us)},
        fd::cpu::amx_bf16{bf16_model});
    buffer_bytes_ = g_aligned_live - before;
    for (std::size_t i = 0; i < w.infos.size(); ++i)
      ex_->bind(w.infos[i].name, const_cast<fd::dynamic_tensor&>(w.tensors[i]).ref());
    ex_->bind_output(0, fd::tensor_ref{out.data(), fd::dtype::f32, output_shape()});
  }
  void call() override { ex_->run(); }
  std::string describe() const override {
    // Packed GEMM panels: one per [in, out] weight (every linear's B is a param, packed at bind),
    // sized as the executor sizes them (kernels::packed_b_floats plus its 16 floats of slack); not
    // given for bf16 weights, whose panels take the AMX or bf16 layouts.
    std::size_t packed = 0;
    for (const auto& b : ex_->bindings())
      if (b.kind == fd::graph::op_kind::param && b.shape.rank == 2)
        packed += (fd::cpu::kernels::packed_b_floats<fd::cpu::kernels::native_arch>(b.shape[0],
                                                                                    b.shape[1]) +
                   16) *
                  sizeof(float);
    const auto st = ex_->stats();
    return "{\"threads\": " + std::to_string(threads_) + ", \"spin_us\": " + std::to_string(spin_) +
           ", \"isa\": " + json_string(fd::cpu::instruction_set()) +
           ", \"arena_bytes\": " + std::to_string(ex_->arena_bytes()) +
           ", \"executor_buffer_bytes\": " + std::to_string(buffer_bytes_) +
           ", \"packed_weight_bytes\": " + (bf16_model ? "null" : std::to_string(packed)) +
           ", \"fast_groups\": " + std::to_string(st.fast_groups) +
           ", \"interpreted_groups\": " + std::to_string(st.interpreted_groups) +
           ", \"parallel_groups\": " + std::to_string(st.parallel_groups) +
           ", \"amx_bf16_requested\": " + (bf16_model ? "true" : "false") +
           ", \"amx_available\": " + (fd::cpu::kernels::amx_available() ? "true" : "false") +
           ", \"amx_matmuls\": " + std::to_string(st.amx_matmuls) +
           ", \"amx_attention_groups\": " + std::to_string(st.amx_attention) + "}";
  }

 private:
  int threads_;
  long spin_;
  std::size_t buffer_bytes_ = 0;
  std::unique_ptr<fd::cpu::executor<program>> ex_;
};

template <class Model>
struct eigen_peer final : peer {
  eigen_peer(const bound_tensors& w, int threads)
      : threads_(threads),
        x_(w.find("x")),
        eigen_([&](const std::string& n) { return w.find(n); }) {
    Eigen::setNbThreads(threads);
  }
  void call() override { eigen_.run(x_, out.data()); }
  std::string describe() const override {
    return "{\"threads\": " + std::to_string(threads_) +
           ", \"eigen_threads\": " + std::to_string(Eigen::nbThreads()) +
           ", \"eigen_simd\": " + json_string(Eigen::SimdInstructionSetsInUse()) + "}";
  }

 private:
  int threads_;
  const float* x_;
  fusedsl_bench::eigen_transformer<Model> eigen_;
};

std::string times_reply(peer& p, long calls) {
  p.call();  // untimed: the caches held the previous peer's data
  std::string times = "[";
  const double cpu0 = process_cpu_seconds(), wall0 = fusedsl_bench::wall_seconds();
  for (long c = 0; c < calls; ++c) {
    const double t0 = fusedsl_bench::wall_seconds();
    p.call();
    const double t1 = fusedsl_bench::wall_seconds();
    times += (c ? ", " : "") + json_number(t1 - t0);
  }
  const double wall = fusedsl_bench::wall_seconds() - wall0, cpu = process_cpu_seconds() - cpu0;
  return "{\"times\": " + times + "], \"cpu_per_wall\": " + json_number(cpu / wall) + "}";
}

int serve(peer& p, const std::string& output) {
  p.call();
  std::vector<std::int64_t> shape;
  for (int i = 0; i < output_shape().rank; ++i) shape.push_back(output_shape()[i]);
  fd::io::write_npy<float>(output, p.out, shape);
  reply("{\"ready\": true, \"config\": " + p.describe() +
        ", \"rss_bytes\": " + std::to_string(proc_status_bytes("VmRSS")) + "}");
  return fusedsl_bench::serve_requests(
      std::string("race_") + model_name, [&](long calls) { return times_reply(p, calls); }, reply);
}

int describe() {
  std::string r = "{\"model\": " + json_string(model_name) + ", \"bindings\": [";
  bool first = true;
  for (const auto& b : binding_list()) {
    r += std::string(first ? "" : ", ") + "{\"name\": " + json_string(b.name) +
         ", \"kind\": " + json_string(b.kind == fd::graph::op_kind::input ? "input" : "param") +
         ", \"shape\": " + json_shape(b.shape) + "}";
    first = false;
  }
  r += "], \"output_shape\": " + json_shape(output_shape()) +
       ", \"flops\": " + json_number(model::flops()) +
       ", \"arena_bytes\": " + std::to_string(program::memory.arena_bytes) +
       ", \"isa\": " + json_string(fd::cpu::instruction_set()) +
       ", \"compiler\": " + json_string(__VERSION__) + ", \"eigen\": " +
       json_string(std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) +
                   "." + std::to_string(EIGEN_MINOR_VERSION)) +
       "}";
  reply(r);
  return 0;
}

int fma_peak() {
  const double peak = fusedsl_bench::measure_fma_peak();
  reply("{\"fma_peak_flops\": " + json_number(peak) +
        ", \"isa\": " + json_string(fd::cpu::instruction_set()) +
        ", \"method\": \"start-up FMA-chain peak: the best of runs of 2^20 iterations of " +
        "independent FMA chains on one core (benchmarks/cpu/fma_peak.hpp)\"}");
  return 0;
}

// fusedsl on one and two threads against the Eigen implementation, on random weights: the largest
// difference relative to the output's largest magnitude must stay under 2e-5 (NaN fails). A
// template, so that a model without an Eigen implementation does not instantiate one.
template <class Model = model>
int self_check() {
  if constexpr (!fusedsl_bench::eigen_transformer_traits<Model>::f32_transformer) {
    fail("no Eigen implementation of this model to check against");
  } else {
    const bound_tensors w = random_weights(7);
    eigen_peer<Model> e(w, 1);
    e.call();
    double scale = 0;
    for (float v : e.out) scale = std::max(scale, double(std::fabs(v)));
    int failures = 0;
    for (int threads : {1, 2}) {
      fusedsl_peer f(w, threads, threads > 1 ? 50 : 0);
      f.call();
      double worst = 0;
      for (std::size_t i = 0; i < e.out.size(); ++i) {
        const double err = std::fabs(double(f.out[i]) - double(e.out[i])) / std::max(scale, 1e-30);
        if (!(err <= worst)) worst = err;  // NaN becomes the worst error
      }
      const bool ok = std::isfinite(worst) && worst <= 2e-5 && std::isfinite(scale);
      failures += !ok;
      std::printf(
          "%s: fusedsl threads{%d} vs Eigen: max |diff| / max |y| = %.3g (%s, tolerance 2e-5)\n",
          model_name, threads, worst, ok ? "ok" : "FAIL");
    }
    return failures ? 1 : 0;
  }
}

template <class Model = model>
int serve_eigen(const bound_tensors& w, int threads, const std::string& output) {
  if constexpr (!fusedsl_bench::eigen_transformer_traits<Model>::f32_transformer) {
    fail("no Eigen peer for this model");
  } else {
    eigen_peer<Model> p(w, threads);
    return serve(p, output);
  }
}

int run(int argc, char** argv) {
  std::map<std::string, std::string> opt;
  std::string mode;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--describe" || a == "--fma-peak" || a == "--self-check") {
      mode = a;
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      opt[a.substr(2)] = argv[++i];
    } else {
      fail("unknown argument " + a + " (see the top of benchmarks/race/race_peer.cpp)");
    }
  }
  if (mode == "--describe") return describe();
  if (mode == "--fma-peak") return fma_peak();
  if (mode == "--self-check") return self_check();
  for (const char* need : {"peer", "weights", "output"})
    if (!opt.count(need)) fail(std::string("missing --") + need);
  const int threads = opt.count("threads") ? std::stoi(opt["threads"]) : 1;
  const long spin = opt.count("spin-us") ? std::stol(opt["spin-us"]) : 0;
  if (threads < 1) fail("--threads must be at least 1");
  const bound_tensors w = read_weights(opt["weights"]);
  if (opt["peer"] == "fusedsl") {
    fusedsl_peer p(w, threads, spin);
    return serve(p, opt["output"]);
  }
  if (opt["peer"] == "eigen") return serve_eigen(w, threads, opt["output"]);
  fail("unknown --peer " + opt["peer"] + " (fusedsl or eigen)");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
