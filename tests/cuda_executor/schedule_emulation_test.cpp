// The device executor's launch schedule replayed on the CPU: one host allocation laid out as the
// device's (executor_schedule.hpp), each launch computed by plain loops with its kernel's
// semantics (f32 accumulation, one rounding at the store; loop programs round every step). This
// checks the executor's own logic without a GPU (which buffers feed which launch, strides,
// offsets, epilogue order, the in-place steps, the layer ping-pong) against the Eigen reference.
// The kernels themselves are checked against the same semantics by tests/cuda on a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "../common/compare.hpp"
#include "fusedsl/backend/cuda/executor_schedule.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"
#include "programs.hpp"

namespace fd = fusedsl;
using fd::dtype;
using fd::graph::op_kind;

namespace {

float load(dtype t, const std::byte* p, std::int64_t i) {
  if (t == dtype::bf16) return float(reinterpret_cast<const fd::bf16*>(p)[i]);
  if (t == dtype::f16) return float(reinterpret_cast<const fd::f16*>(p)[i]);
  return reinterpret_cast<const float*>(p)[i];
}
void store(dtype t, std::byte* p, std::int64_t i, float v) {
  if (t == dtype::bf16)
    reinterpret_cast<fd::bf16*>(p)[i] = fd::bf16(v);
  else if (t == dtype::f16)
    reinterpret_cast<fd::f16*>(p)[i] = fd::f16(v);
  else
    reinterpret_cast<float*>(p)[i] = v;
}
float round_to(dtype t, float v) {
  if (t == dtype::bf16) return float(fd::bf16(v));
  if (t == dtype::f16) return float(fd::f16(v));
  return v;
}

// The ops of plan_kernels.cuh's apply_op, on the host.
float apply_op(op_kind k, float a, float b, float c) {
  switch (k) {
    case op_kind::add:
      return a + b;
    case op_kind::sub:
      return a - b;
    case op_kind::mul:
      return a * b;
    case op_kind::div:
      return a / b;
    case op_kind::max:
      return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
    case op_kind::min:
      return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b);
    case op_kind::pow:
      return std::pow(a, b);
    case op_kind::eq:
      return a == b;
    case op_kind::ne:
      return a != b;
    case op_kind::lt:
      return a < b;
    case op_kind::le:
      return a <= b;
    case op_kind::gt:
      return a > b;
    case op_kind::ge:
      return a >= b;
    case op_kind::select:
      return a != 0.0f ? b : c;
    case op_kind::cast:
      return a;
    default:
      return fd::reference::kernels::apply_unary(k, a);
  }
}

template <class Program>
class emulator {
  static constexpr auto& g = Program::graph;
  static constexpr std::size_t N = Program::node_count;
  static constexpr auto plan = fd::cuda::plan_launches(g, Program::fusion);

 public:
  emulator()
      : layout_(fd::cuda::layout_device_memory(g, Program::memory, 256)), memory_(layout_.bytes) {
    static_assert(plan.ok(), "emulator: the program must map onto the CUDA kernels");
    // NaN everywhere: a value read before any launch wrote it poisons the result.
    for (std::size_t i = 0; i + 4 <= memory_.size(); i += 4)
      store(dtype::f32, memory_.data() + i, 0, NAN);
  }
  const fd::cuda::device_layout<N>& layout() const { return layout_; }
  std::byte* at(std::size_t offset) { return memory_.data() + offset; }
  int launches = 0;
  int merged = 0;  // gemm + layernorm launches

  void run() {
    fd::cuda::call_schedule<N> schedule(g, Program::fusion, Program::memory, plan, layout_);
    schedule.for_each([&](int l, int, const auto& addr) {
      ++launches;
      const fd::cuda::launch& d = plan.launches[std::size_t(l)];
      auto buf = [&](int node) {
        REQUIRE(addr[std::size_t(node)] >= 0);
        return at(std::size_t(addr[std::size_t(node)]));
      };
      // Launches the executor folds into an earlier one are replayed there (below).
      if (plan.absorbed[std::size_t(l)]) return;
      const int ln = d.kind == fd::cuda::launch_kind::gemm ? plan.layernorm[std::size_t(l)] : -1;
      if (ln >= 0) {
        // gemm_layernorm: the GEMM's output lives only in the kernel (a scratch here); the
        // arena buffer the plan gave it stays poisoned, so a reader the merge missed sees NaN.
        const fd::cuda::row_launch& r = plan.launches[std::size_t(ln)].row;
        std::vector<std::byte> scratch(std::size_t(g[d.gemm.out].bytes()));
        auto via_scratch = [&](int node) {
          return node == d.gemm.out ? scratch.data() : buf(node);
        };
        gemm(d.gemm, via_scratch);
        row(r, via_scratch);
        ++merged;
        return;
      }
      switch (d.kind) {
        case fd::cuda::launch_kind::gemm:
          for (int j = 0; j <= plan.siblings[std::size_t(l)]; ++j)
            gemm(plan.launches[std::size_t(l + j)].gemm, buf);
          break;
        case fd::cuda::launch_kind::attention:
          attention(d.attention, buf);
          break;
        case fd::cuda::launch_kind::row:
          row(d.row, buf);
          break;
        case fd::cuda::launch_kind::loop:
          loop(d.loop, buf);
          break;
      }
    });
  }

 private:
  template <class Buf>
  void gemm(const fd::cuda::gemm_launch& e, Buf& buf) {
    const dtype in = g[e.a.node].type, out = g[e.out].type;
    std::byte *a = buf(e.a.node), *b = buf(e.b.node), *c = buf(e.out);
    for (int m = 0; m < e.m; ++m)
      for (int n = 0; n < e.n; ++n) {
        float acc = 0;
        for (int k = 0; k < e.k; ++k)
          acc += load(in, a, e.a.offset + std::int64_t(m) * e.k + k) *
                 load(in, b, e.b.offset + std::int64_t(k) * e.n + n);
        float v = e.scale * acc;
        if (e.bias >= 0) v += load(out, buf(e.bias), n);
        if (e.has_act) v = apply_op(e.act, v, 0, 0);
        if (e.residual >= 0) v += load(out, buf(e.residual), std::int64_t(m) * e.n + n);
        store(out, c, std::int64_t(m) * e.n + n, v);
      }
  }
  template <class Buf>
  void attention(const fd::cuda::attention_launch& e, Buf& buf) {
    const dtype t = g[e.q.node].type;
    std::byte *q = buf(e.q.node), *k = buf(e.k.node), *v = buf(e.v.node), *o = buf(e.o.node);
    const int group = e.heads / e.kv_heads;
    std::vector<float> s(std::size_t(e.seq_k)), acc(std::size_t(e.head_dim));
    for (int h = 0; h < e.heads; ++h)
      for (int i = 0; i < e.seq_q; ++i) {
        const int kvh = h / group, last = e.causal ? i + (e.seq_k - e.seq_q) : e.seq_k - 1;
        float mx = -INFINITY;
        for (int j = 0; j <= last; ++j) {
          float dot = 0;
          for (int x = 0; x < e.head_dim; ++x)
            dot += load(t, q, e.q.offset + i * e.q_row_stride + h * e.head_dim + x) *
                   load(t, k, e.k.offset + j * e.k_row_stride + kvh * e.head_dim + x);
          s[std::size_t(j)] = e.scale * dot;
          mx = std::max(mx, s[std::size_t(j)]);
        }
        float sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int j = 0; j <= last; ++j) {
          const float p = std::exp(s[std::size_t(j)] - mx);
          sum += p;
          for (int x = 0; x < e.head_dim; ++x)
            acc[std::size_t(x)] +=
                p * load(t, v, e.v.offset + j * e.v_row_stride + kvh * e.head_dim + x);
        }
        for (int x = 0; x < e.head_dim; ++x)
          store(t, o, e.o.offset + i * e.o_row_stride + h * e.head_dim + x,
                acc[std::size_t(x)] / sum);
      }
  }
  template <class Buf>
  void row(const fd::cuda::row_launch& e, Buf& buf) {
    const dtype ti = g[e.in].type, to = g[e.out].type;
    std::byte *in = buf(e.in), *out = buf(e.out);
    std::vector<float> x(std::size_t(e.cols));
    for (int r = 0; r < e.rows; ++r) {
      for (int c = 0; c < e.cols; ++c)
        x[std::size_t(c)] = load(ti, in, std::int64_t(r) * e.cols + c);
      float mx = -INFINITY, sum = 0, sq = 0;
      for (float v : x) mx = std::max(mx, v), sum += v;
      const float mean = sum / float(e.cols);
      for (float v : x) sq += e.op == op_kind::rmsnorm ? v * v : (v - mean) * (v - mean);
      const float rstd = 1.0f / std::sqrt(sq / float(e.cols) + e.eps);
      float se = 0;
      for (float v : x) se += std::exp(v - mx);
      for (int c = 0; c < e.cols; ++c) {
        const float v = x[std::size_t(c)];
        float y = 0;
        switch (e.op) {
          case op_kind::softmax:
            y = std::exp(v - mx) / se;
            break;
          case op_kind::log_softmax:
            y = v - mx - std::log(se);
            break;
          case op_kind::layernorm:
            y = (v - mean) * rstd * load(to, buf(e.gamma), c) + load(to, buf(e.beta), c);
            break;
          default:
            y = v * rstd * load(to, buf(e.gamma), c);
            break;
        }
        store(to, out, std::int64_t(r) * e.cols + c, y);
      }
    }
  }
  template <class Buf>
  void loop(const fd::cuda::loop_launch& lp, Buf& buf) {
    std::vector<float> reg(std::size_t(lp.n_instructions));
    for (std::int64_t i = 0; i < lp.shape.size(); ++i) {
      std::int64_t idx[fd::max_rank] = {}, rest = i;
      for (int d = lp.shape.rank - 1; d >= 0; --d) idx[d] = rest % lp.shape[d], rest /= lp.shape[d];
      for (int s = 0; s < lp.n_instructions; ++s) {
        const fd::cuda::loop_instruction& in = lp.code[std::size_t(s)];
        float& r = reg[std::size_t(s)];
        if (in.code == fd::cuda::loop_code::load) {
          const fd::cuda::loop_load& ld = lp.loads[std::size_t(in.load)];
          std::int64_t off = ld.offset;
          for (int d = 0; d < lp.shape.rank; ++d) off += idx[d] * ld.stride[std::size_t(d)];
          r = load(ld.type, buf(ld.node), off);
        } else if (in.code == fd::cuda::loop_code::constant) {
          r = in.value;
        } else if (in.code == fd::cuda::loop_code::iota) {
          r = float(idx[in.axis]);
        } else {
          r = round_to(in.type, apply_op(in.op, reg[std::size_t(in.a)],
                                         in.b >= 0 ? reg[std::size_t(in.b)] : 0.0f,
                                         in.c >= 0 ? reg[std::size_t(in.c)] : 0.0f));
        }
      }
      for (int o = 0; o < lp.n_outputs; ++o)
        store(lp.out_type[std::size_t(o)], buf(lp.out_node[std::size_t(o)]), i,
              reg[std::size_t(lp.out_register[std::size_t(o)])]);
    }
  }

  fd::cuda::device_layout<N> layout_;
  std::vector<std::byte> memory_;
};

// Random bindings (gammas near 1, inputs larger than weights) copied into the emulated device
// memory; returns the worst norm-wise relative L2 error of the outputs against the reference.
// With Twin (the same program in f32), the reference runs in f32 on the same (bf16-rounded)
// values: the error of the bf16 computation itself, not the difference of two roundings.
template <class Program, class Twin = Program>
double emulated_error(const Program&, unsigned seed, int* launches = nullptr,
                      int* merged = nullptr) {
  emulator<Program> em;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<fd::dynamic_tensor> data;
  std::vector<fd::reference::binding> refs;
  data.reserve(2 * em.layout().slots.size());
  for (const auto& s : em.layout().slots) {
    const fd::graph::node& n = Program::graph[s.node];
    data.emplace_back(n.type, n.shape);
    fd::dynamic_tensor& t = data.back();
    for (std::int64_t i = 0; i < n.shape.size(); ++i) {
      float v = nd(rng) * (n.op == op_kind::input ? 10.0f : 1.0f);
      if (s.name.find("gamma") != std::string::npos) v += 1.0f;
      store(n.type, static_cast<std::byte*>(t.raw()), i, v);
    }
    std::memcpy(em.at(s.offset), t.raw(), t.ref().bytes());
    if constexpr (!std::is_same_v<Twin, Program>) {
      fd::dynamic_tensor wide(dtype::f32, n.shape);
      for (std::int64_t i = 0; i < n.shape.size(); ++i)
        wide.data<float>()[i] = load(n.type, static_cast<std::byte*>(t.raw()), i);
      data.push_back(std::move(wide));
    }
    refs.push_back({s.name, data.back().ref()});
  }
  em.run();
  if (launches) *launches = em.launches;
  if (merged) *merged = em.merged;
  const auto expected = fd::reference::run(fd::graph::graph_view(Twin::graph),
                                           std::span<const fd::reference::binding>(refs));
  double worst = 0;
  for (int o = 0; o < Program::graph.n_outputs; ++o) {
    const fd::graph::node& n = Program::graph[Program::graph.outputs[std::size_t(o)]];
    const std::byte* got = em.at(em.layout().output_offset[std::size_t(o)]);
    const std::byte* want = static_cast<const std::byte*>(
        const_cast<fd::dynamic_tensor&>(expected[std::size_t(o)]).raw());
    const dtype want_type = expected[std::size_t(o)].type();
    std::vector<double> a(std::size_t(n.shape.size())), b(a.size());
    for (std::int64_t i = 0; i < n.shape.size(); ++i)
      a[std::size_t(i)] = load(n.type, got, i), b[std::size_t(i)] = load(want_type, want, i);
    // compare_rel_l2: +inf where a NaN or inf appears, never NaN.
    worst = std::max(worst, fd::test::compare_rel_l2(a, b, 0.0).max_error);
  }
  return worst;
}

using namespace fd::test::cuda_programs;

}  // namespace

TEST_CASE(
    "the bf16 seed transformer's launch schedule, replayed on the CPU, matches the reference "
    "within 1e-2") {
  int launches = 0, merged = 0;
  const double err = emulated_error<seed_bf16::program_type, seed_f32::program_type>(
      seed_bf16::program, 21, &launches, &merged);
  const double err_bf16_ref = emulated_error(seed_bf16::program, 21);
  MESSAGE("seed bf16 (emulated schedule): relative L2 error "
          << err << " against the f32 reference, " << err_bf16_ref
          << " against the bf16 reference (rounds every node)");
  CHECK(err < 1e-2);
  CHECK(err_bf16_ref < 2e-2);
  CHECK(launches == 18);  // logical launches; on the device Q/K/V are one, and
  CHECK(merged == 4);     // both layernorms of each layer run inside the GEMM before them
}

TEST_CASE(
    "a 3-layer causal pre-LN bf16 stack (odd layer count: carry-buffer ping-pong) matches within "
    "1e-2") {
  const double err =
      emulated_error<causal_bf16::program_type, causal_f32::program_type>(causal_bf16::program, 22);
  const double err_bf16_ref = emulated_error(causal_bf16::program, 22);
  MESSAGE("causal pre-LN bf16, 3 layers (emulated schedule): relative L2 error "
          << err << " against the f32 reference, " << err_bf16_ref
          << " against the bf16 reference");
  CHECK(err < 1e-2);
  CHECK(err_bf16_ref < 2e-2);
}

TEST_CASE(
    "f32 GEMM + bias + relu, layernorm with an epilogue, and a transposed loop match within 1e-5") {
  const double err = emulated_error(f32_mlp, 23);
  MESSAGE("f32 program (emulated schedule): relative L2 error " << err);
  CHECK(err < 1e-5);
}

TEST_CASE("a bf16 loop group with a broadcast bias and gelu_tanh matches within 1e-2") {
  constexpr auto x = fd::input<"x", fd::bf16, 128, 256>();
  constexpr auto bias = fd::param<"bias", fd::bf16, 256>();
  CHECK(emulated_error(fd::compile(fd::gelu_tanh(x * fd::lit<0.5> + bias)), 24) < 1e-2);
}

TEST_CASE("grouped-query attention (4 query heads, 2 key/value heads) matches within 1e-2") {
  const double err = emulated_error<gqa_bf16, gqa_f32>(gqa_bf16{}, 25);
  MESSAGE("grouped-query bf16 (emulated schedule): relative L2 error "
          << err << " against the f32 reference");
  CHECK(err < 1e-2);
}
