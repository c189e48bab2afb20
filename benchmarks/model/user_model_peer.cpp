// One program of user_models.hpp (FUSEDSL_USER_MODEL names it at compile time) served to
// benchmarks/model/user_models.py, which races it against PyTorch eager and torch.compile.
//
//   user_model_<name> --describe
//       the program's bindings (name, kind, shape), its output's shape, and its plan: kernels by
//       kind, copy kernels (loop kernels that only move data), GEMMs whose B is packed per call,
//       kernels that compute from no input (constants and iotas only, recomputed every call) and
//       from parameters only (work that could be done at bind), and one line per kernel
//   user_model_<name> --fma-peak
//       the FMA-chain peak of one core, in FLOP/s (fma_peak.hpp)
//   user_model_<name> --weights DIR --output FILE.npy
//       reads DIR/<binding>.npy for every binding, runs once on one thread, writes the output, then
//       serves the driver on stdin: `run K` (one untimed call, then K timed calls) and `quit`.
//
// Replies are one line on stdout starting with "@@user " holding a JSON object; times are
// wall-clock seconds per call. Errors go to stderr, with exit status 1.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fma_peak.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/plan/report.hpp"
#include "peer_json.hpp"
#include "user_models.hpp"

#ifndef FUSEDSL_USER_MODEL
#error "user_model_peer.cpp: define FUSEDSL_USER_MODEL to a program of user_models.hpp"
#endif
#define FUSEDSL_USER_STR2(x) #x
#define FUSEDSL_USER_STR(x) FUSEDSL_USER_STR2(x)

namespace fd = fusedsl;

namespace {

using fusedsl_bench::json_number;
using fusedsl_bench::json_shape;
using fusedsl_bench::json_string;

using program = fusedsl_user::FUSEDSL_USER_MODEL;
using executor = fd::cpu::executor<program>;
constexpr const char* model_name = FUSEDSL_USER_STR(FUSEDSL_USER_MODEL);
static_assert(executor::kernels_plan().n_refused == 0,
              "every group of a benchmarked program runs a generated kernel");

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(std::string("user_model_") + model_name + ": " + what);
}

void reply(const std::string& json) {
  std::cout << "@@user " << json << std::endl;
}

// What each node's value depends on: bit 0 an input or state, bit 1 a parameter.
std::vector<int> dependencies() {
  const auto& g = program::graph;
  std::vector<int> dep(program::node_count, 0);
  for (int i = 0; i < int(program::node_count); ++i) {
    const fd::graph::node& n = g[i];
    using k = fd::graph::op_kind;
    if (n.op == k::input || n.op == k::state || n.op == k::placeholder) dep[std::size_t(i)] = 1;
    if (n.op == k::param) dep[std::size_t(i)] = 2;
    for (int a = 0; a < n.n_in; ++a) dep[std::size_t(i)] |= dep[std::size_t(n.in[std::size_t(a)])];
  }
  return dep;
}

std::string describe_plan() {
  const auto& f = program::fusion;
  const auto& plan = executor::kernels_plan();
  const std::vector<int> dep = dependencies();
  int kinds[8] = {}, copies = 0, per_call_packs = 0, constant = 0, params_only = 0;
  std::string lines = "[";
  for (int s = 0; s < f.n_groups; ++s) {
    const int gi = f.order[std::size_t(s)];
    const fd::plan::kernel_desc& d = plan[gi];
    ++kinds[std::size_t(d.kind)];
    bool copy = d.kind == fd::plan::kernel_kind::loop;
    for (int i = 0; copy && i < d.c.n_ins; ++i)
      copy = d.c.instr[std::size_t(i)].kind == fd::plan::ins_kind::load;
    copies += copy;
    for (int q = 0; q < d.n_gemm; ++q) per_call_packs += !d.gemm[std::size_t(q)].b_param;
    int group_dep = 0;
    for (int i = 0; i < int(program::node_count); ++i)
      if (f.group_of[std::size_t(i)] == gi) group_dep |= dep[std::size_t(i)];
    constant += group_dep == 0;
    params_only += group_dep == 2;
    std::string line = fd::plan::describe(d);
    if (copy) line += " (a copy)";
    if (group_dep == 0) line += " (from constants only)";
    if (group_dep == 2) line += " (from parameters only)";
    lines += (s ? ", " : "") + json_string(line);
  }
  std::string by_kind = "{";
  for (int k = 0; k < 8; ++k)
    if (kinds[k] != 0)
      by_kind += std::string(by_kind.size() > 1 ? ", " : "") +
                 json_string(std::string(fd::plan::name_of(fd::plan::kernel_kind(k)))) + ": " +
                 std::to_string(kinds[k]);
  return "{\"kernels\": " + std::to_string(f.n_groups) + ", \"by_kind\": " + by_kind +
         "}, \"copy_kernels\": " + std::to_string(copies) +
         ", \"per_call_packs\": " + std::to_string(per_call_packs) +
         ", \"constant_kernels\": " + std::to_string(constant) +
         ", \"parameter_only_kernels\": " + std::to_string(params_only) +
         ", \"arena_bytes\": " + std::to_string(program::memory.arena_bytes) +
         ", \"kernel_list\": " + lines + "]}";
}

fd::dims output_shape() {
  return program::graph[program::graph.outputs[0]].shape;
}

int describe() {
  executor probe(program{}, fd::cpu::threads{1});
  std::string r = "{\"model\": " + json_string(model_name) + ", \"bindings\": [";
  bool first = true;
  for (const auto& b : probe.bindings()) {
    r += std::string(first ? "" : ", ") + "{\"name\": " + json_string(b.name) +
         ", \"kind\": " + json_string(b.kind == fd::graph::op_kind::input ? "input" : "param") +
         ", \"shape\": " + json_shape(b.shape) + "}";
    first = false;
  }
  r += "], \"output_shape\": " + json_shape(output_shape()) + ", \"plan\": " + describe_plan() +
       ", \"constant_kernels_computed_once\": " + std::to_string(probe.stats().constant_groups) +
       ", \"parameter_kernels_computed_at_bind\": " +
       std::to_string(probe.stats().parameter_groups) +
       ", \"isa\": " + json_string(fd::cpu::instruction_set()) +
       ", \"compiler\": " + json_string(__VERSION__) + "}";
  reply(r);
  return 0;
}

struct peer {
  executor ex{program{}, fd::cpu::threads{1}};
  std::vector<fd::dynamic_tensor> storage;
  fd::dynamic_tensor out{fd::dtype::f32, output_shape()};

  explicit peer(const std::string& dir) {
    for (const auto& info : ex.bindings()) {
      const std::string path = dir + "/" + info.name + ".npy";
      const fd::io::npy_array a = fd::io::read_npy(path);
      if (a.dtype != fd::io::npy_dtype::f4) fail(path + ": not float32");
      bool same = int(a.shape.size()) == info.shape.rank && info.type == fd::dtype::f32;
      for (int i = 0; same && i < info.shape.rank; ++i)
        same = a.shape[std::size_t(i)] == info.shape[i];
      if (!same) fail(path + ": not the program's f32 " + fd::to_string(info.shape));
      storage.emplace_back(info.type, info.shape);
      std::memcpy(storage.back().data<float>(), a.data.data(), a.data.size());
      ex.bind(info.name, storage.back().ref());
    }
    ex.bind_output(0, out.ref());
  }
};

int serve(const std::string& dir, const std::string& output) {
  peer p(dir);
  p.ex.run();
  std::vector<std::int64_t> shape;
  for (int i = 0; i < output_shape().rank; ++i) shape.push_back(output_shape()[i]);
  fd::io::write_npy<float>(
      output, std::span<const float>(p.out.data<float>(), std::size_t(output_shape().size())),
      shape);
  reply("{\"ready\": true, \"interpreted_groups\": " +
        std::to_string(p.ex.stats().interpreted_groups) + "}");
  const auto timed = [&](long calls) {
    p.ex.run();  // untimed: the caches held the other peers' data
    std::string times = "[";
    for (long c = 0; c < calls; ++c) {
      const double t0 = fusedsl_bench::wall_seconds();
      p.ex.run();
      times += (c ? ", " : "") + json_number(fusedsl_bench::wall_seconds() - t0);
    }
    return "{\"times\": " + times + "]}";
  };
  return fusedsl_bench::serve_requests(std::string("user_model_") + model_name, timed, reply);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 1 && args[0] == "--describe") return describe();
    if (args.size() == 1 && args[0] == "--fma-peak") {
      char buf[64];
      std::snprintf(buf, sizeof buf, "{\"fma_peak_flops\": %.6g}",
                    fusedsl_bench::measure_fma_peak());
      reply(buf);
      return 0;
    }
    if (args.size() == 4 && args[0] == "--weights" && args[2] == "--output")
      return serve(args[1], args[3]);
    std::cerr << "usage: " << argv[0]
              << " --describe | --fma-peak | --weights DIR --output FILE.npy\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
