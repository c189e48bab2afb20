// The device executor's group -> launch mapping, checked on the host (no CUDA needed): which
// kernel each fusion group becomes, with which shapes, strides and operands, and which groups are
// refused with a reason.
#include "fusedsl/backend/cuda/executor_plan.hpp"

#include <doctest/doctest.h>

#include <string>

#include "../common/compare.hpp"
#include "fusedsl/models/transformer.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;
using fd::cuda::launch_kind;
using fd::graph::op_kind;

namespace {

template <class Program>
constexpr auto launches_of(const Program&) {
  return fd::cuda::plan_launches(Program::graph, Program::fusion);
}

template <std::size_t N>
int count_of(const fd::cuda::launch_plan<N>& p, launch_kind k) {
  int c = 0;
  for (int i = 0; i < p.n_launches; ++i) c += p.launches[std::size_t(i)].kind == k;
  return c;
}

// The node of param `name` (as written in the block, e.g. "attn.q.w").
template <class Program>
int param_node(const Program&, std::string_view name) {
  for (int i = 0; i < int(Program::node_count); ++i)
    if (Program::graph[i].op == op_kind::param && Program::graph[i].name.view() == name) return i;
  return -1;
}

template <std::size_t N>
const fd::cuda::gemm_launch* gemm_reading(const fd::cuda::launch_plan<N>& p, int weight) {
  for (int i = 0; i < p.n_launches; ++i)
    if (p.launches[std::size_t(i)].kind == launch_kind::gemm &&
        p.launches[std::size_t(i)].gemm.b.node == weight)
      return &p.launches[std::size_t(i)].gemm;
  return nullptr;
}

using seed_bf16 = fd::models::transformer<128, 128, 4, 512, 2, fd::nn::post_ln, false, fd::bf16>;
using causal_bf16 = fd::models::transformer<128, 128, 4, 512, 2, fd::nn::pre_ln, true, fd::bf16>;

}  // namespace

TEST_CASE("the bf16 seed transformer maps every group to a GEMM, flash-attention or row launch") {
  constexpr auto p = seed_bf16::program;
  static constexpr auto lp = launches_of(p);
  static_assert(lp.ok(), "the bf16 seed transformer must map onto the CUDA kernels");
  CHECK(lp.n_launches == 9);
  CHECK(count_of(lp, launch_kind::gemm) == 6);  // Q, K, V, out-projection, fc1, fc2
  CHECK(count_of(lp, launch_kind::attention) == 1);
  CHECK(count_of(lp, launch_kind::row) == 2);
  CHECK(count_of(lp, launch_kind::loop) == 0);
  // Every group of the body has its launches; the repeat group has none of its own.
  for (int gi = 0; gi < p.fusion.n_groups; ++gi) {
    const bool body = p.fusion.groups[std::size_t(gi)].kind != fd::plan::group_kind::repeat;
    CHECK((lp.count[std::size_t(gi)] > 0) == body);
  }
}

TEST_CASE(
    "on the device the seed's layer is 5 launches: Q/K/V as one sibling GEMM, both layernorms "
    "finished in the GEMM before them") {
  constexpr auto p = seed_bf16::program;
  static constexpr auto lp = launches_of(p);
  CHECK(lp.device_launches() == 5);
  const auto* q = gemm_reading(lp, param_node(p, "attn.q.w"));
  const auto* k = gemm_reading(lp, param_node(p, "attn.k.w"));
  const auto* v = gemm_reading(lp, param_node(p, "attn.v.w"));
  const auto index = [&](const fd::cuda::gemm_launch* e) {
    for (int i = 0; i < lp.n_launches; ++i)
      if (&lp.launches[std::size_t(i)].gemm == e) return i;
    return -1;
  };
  const int iq = index(q);
  REQUIRE(iq >= 0);
  CHECK(lp.siblings[std::size_t(iq)] == 2);
  CHECK(lp.absorbed[std::size_t(index(k))]);
  CHECK(lp.absorbed[std::size_t(index(v))]);
  // out-projection + residual -> layernorm 1, fc2 + residual -> layernorm 2 (post-LN, N = 128).
  for (const char* w : {"attn.o.w", "ffn.fc2.w"}) {
    const int i = index(gemm_reading(lp, param_node(p, w)));
    REQUIRE(i >= 0);
    const int r = lp.layernorm[std::size_t(i)];
    REQUIRE(r >= 0);
    CHECK(lp.launches[std::size_t(r)].kind == launch_kind::row);
    CHECK(lp.launches[std::size_t(r)].row.in == lp.launches[std::size_t(i)].gemm.out);
    CHECK(lp.absorbed[std::size_t(r)]);
  }
  // fc1 (+ gelu) stays a lone GEMM: nothing after it is a layernorm.
  const int f1 = index(gemm_reading(lp, param_node(p, "ffn.fc1.w")));
  CHECK(lp.siblings[std::size_t(f1)] == 0);
  CHECK(lp.layernorm[std::size_t(f1)] == -1);
}

TEST_CASE(
    "pre-LN: a layernorm that feeds a GEMM is not folded into the GEMM before it, and the "
    "residual GEMM output read twice keeps its own launch") {
  constexpr auto p = causal_bf16::program;
  static constexpr auto lp = launches_of(p);
  static_assert(lp.ok());
  for (int i = 0; i < lp.n_launches; ++i) CHECK(lp.layernorm[std::size_t(i)] == -1);
  // Q/K/V siblings still merge: 9 logical launches, 7 on the device.
  CHECK(lp.device_launches() == lp.n_launches - 2);
}

TEST_CASE(
    "the horizontal Q/K/V group becomes three GEMMs with their biases, each into its own buffer") {
  constexpr auto p = seed_bf16::program;
  static constexpr auto lp = launches_of(p);
  int group = -1;
  for (const char* w : {"attn.q.w", "attn.k.w", "attn.v.w"}) {
    const auto* g = gemm_reading(lp, param_node(p, w));
    REQUIRE(g != nullptr);
    CHECK(g->m == 128);
    CHECK(g->n == 128);
    CHECK(g->k == 128);
    CHECK(p.graph[g->a.node].op == op_kind::placeholder);  // the layer's input
    CHECK(g->a.offset == 0);
    CHECK(g->bias >= 0);
    CHECK(p.graph[g->bias].op == op_kind::param);
    CHECK(g->residual == -1);
    CHECK_FALSE(g->has_act);
    CHECK(p.memory.in_arena(g->out));
    const int gi = p.fusion.group_of[std::size_t(g->out)];
    CHECK((group < 0 || group == gi));
    group = gi;
  }
}

TEST_CASE(
    "flash attention reads Q, K and V as row views [seq, heads * head_dim] of the projection "
    "buffers") {
  constexpr auto p = seed_bf16::program;
  static constexpr auto lp = launches_of(p);
  const fd::cuda::attention_launch* a = nullptr;
  for (int i = 0; i < lp.n_launches; ++i)
    if (lp.launches[std::size_t(i)].kind == launch_kind::attention)
      a = &lp.launches[std::size_t(i)].attention;
  REQUIRE(a != nullptr);
  CHECK(a->heads == 4);
  CHECK(a->kv_heads == 4);
  CHECK(a->seq_q == 128);
  CHECK(a->seq_k == 128);
  CHECK(a->head_dim == 32);
  CHECK_FALSE(a->causal);
  CHECK(ft::compare(a->scale, 1.0 / 5.656854249492381, ft::rel_tol(1e-6)));
  CHECK(a->q_row_stride == 128);
  CHECK(a->k_row_stride == 128);
  CHECK(a->v_row_stride == 128);
  CHECK(a->o_row_stride == 128);
  CHECK(a->q.node == gemm_reading(lp, param_node(p, "attn.q.w"))->out);
  CHECK(a->k.node == gemm_reading(lp, param_node(p, "attn.k.w"))->out);
  CHECK(a->v.node == gemm_reading(lp, param_node(p, "attn.v.w"))->out);
  CHECK(a->q.offset == 0);
  // O is written merged back to [seq, d_model], the out-projection's A.
  CHECK(a->o.node == gemm_reading(lp, param_node(p, "attn.o.w"))->a.node);
}

TEST_CASE("out-projection and fc2 fuse bias and residual; fc1 fuses bias and gelu_tanh") {
  constexpr auto p = seed_bf16::program;
  static constexpr auto lp = launches_of(p);
  const auto* o = gemm_reading(lp, param_node(p, "attn.o.w"));
  const auto* f1 = gemm_reading(lp, param_node(p, "ffn.fc1.w"));
  const auto* f2 = gemm_reading(lp, param_node(p, "ffn.fc2.w"));
  REQUIRE((o && f1 && f2));
  CHECK(o->bias == param_node(p, "attn.o.b"));
  CHECK(p.graph[o->residual].op == op_kind::placeholder);
  CHECK_FALSE(o->has_act);
  CHECK(f1->m == 128);
  CHECK(f1->n == 512);
  CHECK(f1->k == 128);
  CHECK(f1->bias == param_node(p, "ffn.fc1.b"));
  CHECK(f1->has_act);
  CHECK(f1->act == op_kind::gelu_tanh);
  CHECK(f1->residual == -1);
  CHECK(f2->k == 512);
  CHECK(f2->a.node == f1->out);
  CHECK(f2->bias == param_node(p, "ffn.fc2.b"));
  CHECK(p.graph[f2->residual].op == op_kind::layernorm);  // post-LN: h + ffn(h)
}

TEST_CASE("layernorm groups become row launches with their gamma, beta and epsilon") {
  constexpr auto p = seed_bf16::program;
  static constexpr auto lp = launches_of(p);
  int rows = 0;
  for (int i = 0; i < lp.n_launches; ++i) {
    const auto& l = lp.launches[std::size_t(i)];
    if (l.kind != launch_kind::row) continue;
    ++rows;
    CHECK(l.row.op == op_kind::layernorm);
    CHECK(l.row.rows == 128);
    CHECK(l.row.cols == 128);
    CHECK(ft::compare(l.row.eps, 1e-5, ft::rel_tol(1e-6, 0.0)));
    CHECK(p.graph[l.row.gamma].name.view().ends_with("gamma"));
    CHECK(p.graph[l.row.beta].name.view().ends_with("beta"));
    CHECK(p.graph[l.row.in].op == op_kind::add);  // the residual sum the GEMM wrote
  }
  CHECK(rows == 2);
}

TEST_CASE("a causal pre-LN model maps its iota mask onto the kernel's causal flag") {
  constexpr auto p = causal_bf16::program;
  static constexpr auto lp = launches_of(p);
  static_assert(lp.ok());
  int att = 0;
  for (int i = 0; i < lp.n_launches; ++i)
    if (lp.launches[std::size_t(i)].kind == launch_kind::attention) {
      ++att;
      CHECK(lp.launches[std::size_t(i)].attention.causal);
    }
  CHECK(att == 1);
  // pre-LN: the first layernorm reads the layer input directly.
  bool ln_on_input = false;
  for (int i = 0; i < lp.n_launches; ++i)
    if (lp.launches[std::size_t(i)].kind == launch_kind::row)
      ln_on_input =
          ln_on_input || p.graph[lp.launches[std::size_t(i)].row.in].op == op_kind::placeholder;
  CHECK(ln_on_input);
}

TEST_CASE("f32 attention is refused with the group and the reason") {
  static constexpr auto lp = launches_of(fd::models::seed::program);
  CHECK_FALSE(lp.ok());
  REQUIRE(lp.failed_group >= 0);
  CHECK(fd::models::seed::program.fusion.groups[std::size_t(lp.failed_group)].kind ==
        fd::plan::group_kind::attention);
  CHECK(std::string(lp.error).find("attention on f32 operands") != std::string::npos);
}

TEST_CASE("an elementwise group becomes one loop program with strided, broadcast loads") {
  constexpr auto x = fd::input<"x", float, 64, 32>();
  constexpr auto b = fd::param<"b", float, 32>();
  constexpr auto p = fd::compile(fd::exp(x * fd::lit<2.0> + b));
  static constexpr auto lp = launches_of(p);
  static_assert(lp.ok());
  REQUIRE(lp.n_launches == 1);
  const auto& l = lp.launches[0].loop;
  CHECK(lp.launches[0].kind == launch_kind::loop);
  CHECK(l.shape == fd::make_dims(64, 32));
  CHECK(l.n_loads == 2);
  CHECK(l.n_instructions == 6);  // load x, constant, mul, load b, add, exp
  CHECK(l.n_outputs == 1);
  CHECK(l.loads[0].node == 0);
  CHECK(l.loads[0].stride[0] == 32);
  CHECK(l.loads[0].stride[1] == 1);
  CHECK(l.loads[1].stride[0] == 0);  // b broadcast over rows
  CHECK(l.loads[1].stride[1] == 1);
  CHECK(l.code[std::size_t(l.out_register[0])].op == op_kind::exp);
}

TEST_CASE("a transposed read inside a loop group is a strided load") {
  constexpr auto x = fd::input<"x", float, 16, 48>();
  constexpr auto p = fd::compile(fd::tanh(fd::transpose(x)));
  static constexpr auto lp = launches_of(p);
  static_assert(lp.ok());
  REQUIRE(lp.n_launches == 1);
  const auto& l = lp.launches[0].loop;
  CHECK(l.shape == fd::make_dims(48, 16));
  CHECK(l.loads[0].stride[0] == 1);
  CHECK(l.loads[0].stride[1] == 48);
}

TEST_CASE("a row group with an elementwise epilogue is a row launch, then the epilogue in place") {
  constexpr auto x = fd::input<"x", fd::bf16, 64, 256>();
  constexpr auto p = fd::compile(fd::softmax(x) * fd::lit<3.0>);
  static constexpr auto lp = launches_of(p);
  static_assert(lp.ok());
  REQUIRE(lp.n_launches == 2);
  CHECK(lp.launches[0].kind == launch_kind::row);
  CHECK(lp.launches[0].row.op == op_kind::softmax);
  CHECK(lp.launches[0].row.rows == 64);
  CHECK(lp.launches[0].row.cols == 256);
  CHECK(lp.launches[1].kind == launch_kind::loop);
  // The epilogue reads the row kernel's output from the buffer it then overwrites.
  CHECK(lp.launches[1].loop.loads[0].node == lp.launches[0].row.out);
  CHECK(lp.launches[1].loop.out_node[0] == lp.launches[0].row.out);
}

TEST_CASE("groups without a CUDA kernel are refused, never approximated") {
  SUBCASE("reduce") {
    constexpr auto x = fd::input<"x", float, 8, 32>();
    static constexpr auto lp = launches_of(fd::compile(fd::sum<1>(fd::exp(x))));
    CHECK_FALSE(lp.ok());
    CHECK(std::string(lp.error).find("reduce groups") != std::string::npos);
  }
  SUBCASE("transposed GEMM operand") {
    constexpr auto x = fd::input<"x", fd::bf16, 64, 64>();
    constexpr auto w = fd::param<"w", fd::bf16, 64, 64>();
    static constexpr auto lp = launches_of(fd::compile(fd::matmul(x, fd::transpose(w))));
    CHECK_FALSE(lp.ok());
    CHECK(std::string(lp.error).find("transposed") != std::string::npos);
  }
  SUBCASE("16-bit GEMM off the tensor-core tile") {
    constexpr auto x = fd::input<"x", fd::bf16, 48, 64>();
    constexpr auto w = fd::param<"w", fd::bf16, 64, 40>();
    static constexpr auto lp = launches_of(fd::compile(fd::matmul(x, w)));
    CHECK_FALSE(lp.ok());
    CHECK(std::string(lp.error).find("multiples of 32") != std::string::npos);
  }
  SUBCASE("concat") {
    constexpr auto x = fd::input<"x", float, 8, 32>();
    static constexpr auto lp = launches_of(fd::compile(fd::exp(fd::concat<1>(x, x))));
    CHECK_FALSE(lp.ok());
    CHECK(std::string(lp.error).find("concat") != std::string::npos);
  }
}

TEST_CASE("an f32 GEMM of any shape maps to the exact CUDA-core path with its epilogue") {
  constexpr auto x = fd::input<"x", float, 24, 40>();
  constexpr auto w = fd::param<"w", float, 40, 56>();
  constexpr auto b = fd::param<"b", float, 56>();
  constexpr auto p = fd::compile(fd::relu(fd::matmul(x, w) + b));
  static constexpr auto lp = launches_of(p);
  static_assert(lp.ok());
  REQUIRE(lp.n_launches == 1);
  const auto& gl = lp.launches[0].gemm;
  CHECK(lp.launches[0].kind == launch_kind::gemm);
  CHECK(gl.m == 24);
  CHECK(gl.n == 56);
  CHECK(gl.k == 40);
  CHECK(gl.has_act);
  CHECK(gl.act == op_kind::relu);
  CHECK(gl.bias == param_node(p, "b"));
}

TEST_CASE(
    "grouped-query attention maps to the kernel's kv_heads, K and V read at their own width") {
  constexpr auto x = fd::input<"x", fd::bf16, 128, 128>();
  constexpr auto block = fd::nn::transformer_block<fd::nn::pre_ln, 4, 512, 2, true>;
  static constexpr auto lp = launches_of(fd::compile(fd::nn::stack<"layers", 2>(block, x)));
  static_assert(lp.ok());
  int att = 0;
  for (int i = 0; i < lp.n_launches; ++i) {
    const auto& l = lp.launches[std::size_t(i)];
    if (l.kind != launch_kind::attention) continue;
    ++att;
    CHECK(l.attention.heads == 4);
    CHECK(l.attention.kv_heads == 2);
    CHECK(l.attention.q_row_stride == 128);
    CHECK(l.attention.k_row_stride == 64);  // K and V projections are kv_heads * head_dim wide
    CHECK(l.attention.v_row_stride == 64);
    CHECK(l.attention.causal);
  }
  CHECK(att == 1);
}
