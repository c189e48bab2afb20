#pragma once
// Where everything lives in the device executor's one allocation, and the sequence of group
// launches of one call: plain host C++ (no CUDA header), shared by the executor, which turns the
// byte offsets into device pointers, and by tests, which replay the same schedule on the CPU.
//
// Layout: [plan arena][one buffer per binding, per layer for stacked params][one per output]
// [one per state (fd::state)], each aligned to `alignment`. An output that is a state's new value
// has no buffer of its own: it is written into the state (in place, for a dynamic update slice),
// as the CPU executor does. A stacked block runs its body's groups once per layer; the body's
// values sit in the repeat's scratch area, its result ping-pongs between the repeat's output and a
// carry buffer unless the plan runs it in place (memory.hpp), exactly as the CPU executor does.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fusedsl/backend/bindings.hpp"
#include "fusedsl/plan/memory.hpp"

namespace fusedsl::cuda {

struct binding_slot {
  std::string name;  // "x", "layers.1.attn.q.w", ...
  int node = -1;
  int iter = 0;            // layer of a stacked param
  std::size_t offset = 0;  // bytes into the allocation
};

template <std::size_t N>
struct device_layout {
  std::vector<binding_slot> slots;
  std::array<std::size_t, graph::max_outputs> output_offset{};
  std::array<std::int64_t, N> state_offset{};      // per node: its state's offset, or -1
  std::size_t states_begin = 0, states_bytes = 0;  // the states' range (zeroed together)
  std::size_t arena_bytes = 0, binding_bytes = 0, output_bytes = 0;  // the other parts' sizes
  std::size_t bytes = 0;                                             // the whole allocation
};

template <std::size_t N>
device_layout<N> layout_device_memory(const graph::graph<N>& g, const plan::memory_plan<N>& m,
                                      std::size_t alignment) {
  auto round_up = [alignment](std::size_t b) {
    return (b + alignment - 1) / alignment * alignment;
  };
  device_layout<N> d;
  std::size_t bytes = round_up(std::size_t(m.arena_bytes));
  d.arena_bytes = bytes;
  const backend::binding_table table(g);
  for (const backend::binding_slot& s : table.slots()) {
    d.slots.push_back({s.name, s.node, s.iter, bytes});
    bytes += round_up(std::size_t(g[s.node].bytes()));
  }
  d.binding_bytes = bytes - d.arena_bytes;
  for (int o = 0; o < g.n_outputs; ++o) {
    if (g.output_state[std::size_t(o)] >= 0) continue;
    d.output_offset[std::size_t(o)] = bytes;
    bytes += round_up(std::size_t(g[g.outputs[std::size_t(o)]].bytes()));
  }
  d.output_bytes = bytes - d.arena_bytes - d.binding_bytes;
  d.states_begin = bytes;
  d.state_offset.fill(-1);
  for (int i = 0; i < int(N); ++i)
    if (g[i].op == graph::op_kind::state) {
      d.state_offset[std::size_t(i)] = std::int64_t(bytes);
      bytes += round_up(std::size_t(g[i].bytes()));
    }
  d.states_bytes = bytes - d.states_begin;
  for (int o = 0; o < g.n_outputs; ++o)
    if (const int st = g.output_state[std::size_t(o)]; st >= 0)
      d.output_offset[std::size_t(o)] = std::size_t(d.state_offset[std::size_t(st)]);
  d.bytes = bytes > 0 ? bytes : alignment;
  return d;
}

// Calls step(group, layer, addr) for every group of one call, in execution order (a block body's
// groups once per layer); addr[node] is the byte offset of that node's buffer in the allocation
// (-1 for values that have none).
template <std::size_t N>
class call_schedule {
 public:
  using addresses = std::array<std::int64_t, N>;

  call_schedule(const graph::graph<N>& g, const plan::fusion_plan<N>& f,
                const plan::memory_plan<N>& m, const device_layout<N>& d)
      : g_(g), f_(f), m_(m), d_(d) {
    addr_.fill(-1);
  }

  template <class Step>
  void for_each(Step&& step) {
    addr_.fill(-1);
    set_region(0, 0, 0);
    for (int k = 0; k < f_.n_groups; ++k) {
      const int gi = f_.order[std::size_t(k)];
      if (f_.groups[std::size_t(gi)].region == 0) group(gi, 0, step);
    }
  }

 private:
  void set_region(int r, int it, std::int64_t region_base) {
    for (const binding_slot& s : d_.slots)
      if (g_[s.node].region == r && s.iter == it)
        addr_[std::size_t(s.node)] = std::int64_t(s.offset);
    for (int i = 0; i < int(N); ++i)
      if (g_[i].region == r && m_.in_arena(i))
        addr_[std::size_t(i)] = region_base + m_.offset[std::size_t(i)];
    for (int i = 0; i < int(N); ++i)
      if (g_[i].region == r && d_.state_offset[std::size_t(i)] >= 0)
        addr_[std::size_t(i)] = d_.state_offset[std::size_t(i)];
    if (r == 0)
      for (int o = 0; o < g_.n_outputs; ++o)
        addr_[std::size_t(g_.outputs[std::size_t(o)])] =
            std::int64_t(d_.output_offset[std::size_t(o)]);
  }

  template <class Step>
  void group(int gi, int it, Step& step) {
    const plan::fusion_group& gr = f_.groups[std::size_t(gi)];
    if (gr.kind == plan::group_kind::repeat) return repeat(gr.anchor, step);
    step(gi, it, addr_);
  }

  template <class Step>
  void repeat(int rep, Step& step) {
    const graph::node& n = g_[rep];
    const int r = n.body;
    const int ph = g_.regions[std::size_t(r)].placeholder, res = g_.regions[std::size_t(r)].result;
    const std::int64_t dest = addr_[std::size_t(rep)];
    const std::int64_t scratch = m_.scratch_offset[std::size_t(rep)];
    const bool in_place = m_.body_in_place[std::size_t(rep)];
    const std::int64_t carry = scratch;
    const std::int64_t body_arena = scratch + (in_place ? 0 : plan::align_up(n.bytes()));
    std::int64_t input = addr_[std::size_t(n.in[0])];
    for (int it = 0; it < n.count; ++it) {
      const std::int64_t out = in_place ? dest : (((n.count - 1 - it) % 2 == 0) ? dest : carry);
      set_region(r, it, body_arena);
      addr_[std::size_t(ph)] = input;
      addr_[std::size_t(res)] = out;
      for (int k = 0; k < f_.n_groups; ++k) {
        const int gi = f_.order[std::size_t(k)];
        if (f_.groups[std::size_t(gi)].region == r) group(gi, it, step);
      }
      input = out;
    }
  }

  const graph::graph<N>& g_;
  const plan::fusion_plan<N>& f_;
  const plan::memory_plan<N>& m_;
  const device_layout<N>& d_;
  addresses addr_{};
};

}  // namespace fusedsl::cuda
