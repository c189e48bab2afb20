#pragma once
// Runs a list of kernel launches on a user stream, eagerly or as one captured CUDA graph: after
// capture() a whole program is one cudaGraphLaunch.

#include <cuda_runtime_api.h>

#include <functional>
#include <fusedsl/backend/cuda/error.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fusedsl::cuda {

class graph_runner {
 public:
  using launch = std::function<void(cudaStream_t)>;

  explicit graph_runner(cudaStream_t stream) : stream_(stream) {}
  graph_runner(const graph_runner&) = delete;
  graph_runner& operator=(const graph_runner&) = delete;
  ~graph_runner() { reset_graph(); }

  // Appends one step; steps run in the order added. Adding invalidates a captured graph.
  void add(std::string name, launch step) {
    if (!step) throw std::invalid_argument("graph_runner: step '" + name + "' has no launch");
    steps_.push_back({std::move(name), std::move(step)});
    reset_graph();
  }

  // Launches every step now, in order, on the stream.
  void run_eager() const {
    for (const auto& s : steps_) run_step(s);
  }

  // Records the steps into a CUDA graph (stream capture) and instantiates it.
  void capture() {
    if (steps_.empty()) throw std::logic_error("graph_runner: nothing to capture");
    reset_graph();
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
          "graph_runner: begin capture");
    try {
      for (const auto& s : steps_) run_step(s);
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(stream_, &broken);
      if (broken) cudaGraphDestroy(broken);
      throw;
    }
    check(cudaStreamEndCapture(stream_, &graph_), "graph_runner: end capture");
    check(cudaGraphInstantiate(&exec_, graph_, 0), "graph_runner: instantiate");
  }

  // One launch of the whole captured program on the stream.
  void replay() const {
    if (!exec_) throw std::logic_error("graph_runner: replay() before capture()");
    check(cudaGraphLaunch(exec_, stream_), "graph_runner: graph launch");
  }

  // Launches step i alone (for per-step timing).
  void run_step(std::size_t i) const {
    if (i >= steps_.size()) throw std::out_of_range("graph_runner: no step " + std::to_string(i));
    run_step(steps_[i]);
  }
  [[nodiscard]] const std::string& step_name(std::size_t i) const { return steps_.at(i).name; }

  [[nodiscard]] std::size_t kernel_nodes() const {
    if (!graph_) return 0;
    std::size_t n = 0;
    check(cudaGraphGetNodes(graph_, nullptr, &n), "graph_runner: count nodes");
    return n;
  }
  [[nodiscard]] std::size_t size() const noexcept { return steps_.size(); }
  [[nodiscard]] bool captured() const noexcept { return exec_ != nullptr; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

 private:
  struct step {
    std::string name;
    launch fn;
  };

  void run_step(const step& s) const {
    try {
      s.fn(stream_);
    } catch (const cuda_error& e) {
      throw e.in("graph_runner: step '" + s.name + "'");
    }
  }

  void reset_graph() noexcept {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }

  cudaStream_t stream_;
  std::vector<step> steps_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace fusedsl::cuda
