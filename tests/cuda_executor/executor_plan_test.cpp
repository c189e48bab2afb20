// The device executor's plan, checked on the host (no CUDA needed): which launch each group's
// kernel descriptor becomes (the kernel, its route, the CUDA-specific merges), read off the
// descriptors alone, and which groups are refused with a reason.
#include "fusedsl/backend/cuda/executor_plan.hpp"

#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include "../common/compare.hpp"
#include "fusedsl/backend/cuda/codegen.cuh"
#include "fusedsl/backend/cuda/executor_schedule.hpp"
#include "programs.hpp"

namespace fd = fusedsl;
using fd::cuda::attention_route;
using fd::cuda::gemm_route;
using fd::cuda::launch_kind;
using fd::cuda::refusal;
using fd::graph::op_kind;
using fd::plan::group_kind;

namespace {

template <class Program>
using plan_of = fd::cuda::device_program<Program>;

template <class Program>
constexpr const auto& launches_of() {
  return plan_of<Program>::launches;
}

// The groups of region r of kind k.
template <class Program>
std::vector<int> groups_of(group_kind k, int region = -1) {
  std::vector<int> r;
  for (int gi = 0; gi < Program::fusion.n_groups; ++gi)
    if (Program::fusion.groups[std::size_t(gi)].kind == k &&
        (region < 0 || Program::fusion.groups[std::size_t(gi)].region == region))
      r.push_back(gi);
  return r;
}

// The gemm group and part whose B is param `name` (as written in the block, e.g. "attn.q.w").
template <class Program>
std::pair<int, int> part_reading(std::string_view name) {
  const auto& low = plan_of<Program>::lowered::value;
  for (int gi = 0; gi < Program::fusion.n_groups; ++gi)
    for (int q = 0; q < low[gi].n_gemm; ++q) {
      const int b = low[gi].gemm[std::size_t(q)].b.base;
      if (Program::graph[b].op == op_kind::param && Program::graph[b].name.view() == name)
        return {gi, q};
    }
  return {-1, -1};
}

using namespace fd::test::cuda_programs;
using seed = seed_bf16::program_type;

}  // namespace

TEST_CASE("the bf16 seed transformer runs every group on the device in 5 launches per layer") {
  constexpr const auto& lp = launches_of<seed>();
  static_assert(lp.ok(), "the bf16 seed transformer must run on the device");
  CHECK(fd::cuda::device_launches(lp, seed::fusion, 1) == 5);
  CHECK(fd::cuda::device_launches(lp, seed::fusion, 0) == 0);  // the repeat group itself
  for (int gi : groups_of<seed>(group_kind::repeat)) CHECK(lp[gi].kind == launch_kind::none);
  for (int gi : groups_of<seed>(group_kind::attention))
    CHECK(lp[gi].kind == launch_kind::attention);
}

TEST_CASE(
    "the Q/K/V projections are one sibling launch of three tensor-core GEMMs that share A and "
    "their epilogue code") {
  const auto [gq, pq] = part_reading<seed>("attn.q.w");
  const auto [gk, pk] = part_reading<seed>("attn.k.w");
  const auto [gv, pv] = part_reading<seed>("attn.v.w");
  REQUIRE(gq >= 0);
  CHECK((gk == gq && gv == gq));
  const fd::cuda::group_launch& l = launches_of<seed>()[gq];
  CHECK(l.n_gemm == 3);
  CHECK(l.gemm[std::size_t(pq)].route == gemm_route::tensor_core);
  CHECK(l.gemm[std::size_t(pq)].siblings == 2);
  CHECK(l.gemm[std::size_t(pq)].shared_epilogue);  // one bias-add code for the three members
  CHECK(l.gemm[std::size_t(pk)].absorbed);
  CHECK(l.gemm[std::size_t(pv)].absorbed);
  CHECK(l.device_launches() == 1);
  CHECK(l.gemm[std::size_t(pq)].m == 128);
  CHECK(l.gemm[std::size_t(pq)].n == 128);
  CHECK(l.gemm[std::size_t(pq)].k == 128);
  CHECK(l.gemm[std::size_t(pq)].out_type == fd::dtype::bf16);
}

TEST_CASE(
    "post-LN: the GEMMs before both layernorms finish them in their epilogues, the row groups "
    "launch nothing, fc1 stays a lone GEMM") {
  constexpr const auto& lp = launches_of<seed>();
  for (const char* w : {"attn.o.w", "ffn.fc2.w"}) {
    CAPTURE(w);
    const int gi = part_reading<seed>(w).first;
    REQUIRE(gi >= 0);
    const int ln = lp[gi].layernorm;
    REQUIRE(ln >= 0);
    CHECK(seed::fusion.groups[std::size_t(ln)].kind == group_kind::row);
    CHECK(lp[ln].kind == launch_kind::none);
    CHECK(lp[ln].finished_by == gi);
    CHECK(plan_of<seed>::lowered::value[ln].row_op == op_kind::layernorm);
  }
  const int f1 = part_reading<seed>("ffn.fc1.w").first;
  CHECK(lp[f1].layernorm == -1);
  CHECK(lp[f1].gemm[0].route == gemm_route::tensor_core);
  CHECK(lp[f1].gemm[0].n == 512);
}

TEST_CASE(
    "pre-LN: a layernorm that feeds a GEMM is not folded into the GEMM before it: 7 launches per "
    "layer") {
  using P = causal_bf16::program_type;
  constexpr const auto& lp = launches_of<P>();
  static_assert(lp.ok());
  for (int gi = 0; gi < P::fusion.n_groups; ++gi) CHECK(lp[gi].layernorm == -1);
  for (int gi : groups_of<P>(group_kind::row)) {
    CHECK(lp[gi].kind == launch_kind::row);
    CHECK(lp[gi].row_threads == 32);  // 128 columns: a warp per row, cached
    CHECK(lp[gi].row_cached);
  }
  CHECK(fd::cuda::device_launches(lp, P::fusion, 1) == 7);
}

TEST_CASE(
    "the two layernorms of a pre-LN block pack into the same descriptor type: one kernel serves "
    "both") {
  using P = causal_bf16::program_type;
  // The k-th row group of the program (its index is a template argument below).
  constexpr auto row_group = [](int k) {
    for (int gi = 0; gi < P::fusion.n_groups; ++gi)
      if (P::fusion.groups[std::size_t(gi)].kind == group_kind::row && k-- == 0) return gi;
    return -1;
  };
  constexpr int r1 = row_group(0), r2 = row_group(1);
  static_assert(r1 >= 0 && r2 >= 0 && row_group(2) < 0, "a pre-LN block has two layernorm groups");
  using DP = plan_of<P>;
  using ln1 = decltype(fd::cuda::gen::packed_desc_of<DP::desc<r1>>::make());
  using ln2 = decltype(fd::cuda::gen::packed_desc_of<DP::desc<r2>>::make());
  CHECK(std::is_same_v<ln1, ln2>);
  // Node ids are not packed: the two prologues read different buffers through the same code.
  CHECK(DP::lowered::value[r1].c.acc[0].node != DP::lowered::value[r2].c.acc[0].node);
}

TEST_CASE(
    "the seed's attention takes flash attention over the projections' row layout "
    "[seq, heads * head_dim]") {
  const std::vector<int> att = groups_of<seed>(group_kind::attention);
  REQUIRE(att.size() == 1);
  const fd::cuda::attention_launch& a = launches_of<seed>()[att[0]].att;
  const fd::plan::attention_part& d = plan_of<seed>::lowered::value[att[0]].att;
  CHECK(a.route == attention_route::flash);
  CHECK_FALSE(a.score);
  CHECK(a.batches == 1);
  CHECK(a.q_row == 128);
  CHECK(a.k_row == 128);
  CHECK(a.v_row == 128);
  CHECK(a.o_row == 128);
  CHECK(d.heads == 4);
  CHECK(d.head_dim == 32);
  CHECK_FALSE(d.causal);
  CHECK(fd::test::compare(d.scale, 1.0 / 5.656854249492381, fd::test::rel_tol(1e-6)));
}

TEST_CASE(
    "grouped-query causal attention takes flash attention with 2 key/value heads, K and V at "
    "their own width") {
  const std::vector<int> att = groups_of<gqa_bf16>(group_kind::attention);
  REQUIRE(att.size() == 1);
  const fd::cuda::attention_launch& a = launches_of<gqa_bf16>()[att[0]].att;
  const fd::plan::attention_part& d = plan_of<gqa_bf16>::lowered::value[att[0]].att;
  CHECK(a.route == attention_route::flash);
  CHECK(d.causal);
  CHECK(d.heads == 4);
  CHECK(d.kv_heads == 2);
  CHECK(a.q_row == 128);
  CHECK(a.k_row == 64);  // the K and V projections are kv_heads * head_dim wide
  CHECK(a.v_row == 64);
}

TEST_CASE("batched attention with an additive mask runs its score program in general attention") {
  const std::vector<int> att = groups_of<masked_bf16>(group_kind::attention);
  REQUIRE(att.size() == 1);
  const fd::cuda::group_launch& l = launches_of<masked_bf16>()[att[0]];
  CHECK(l.kind == launch_kind::attention);
  CHECK(l.att.route == attention_route::general);
  CHECK(l.att.score);
  CHECK(l.att.batches == 2);
  CHECK(l.att.q_type == fd::dtype::bf16);
}

TEST_CASE("f32 attention, and head_dim 20 over 80 keys for 48 queries, take general attention") {
  using F = seed_f32::program_type;
  for (int gi : groups_of<F>(group_kind::attention))
    CHECK(launches_of<F>()[gi].att.route == attention_route::general);
  using C = std::remove_const_t<decltype(offset_causal)>;
  const std::vector<int> att = groups_of<C>(group_kind::attention);
  REQUIRE(att.size() == 1);
  CHECK(launches_of<C>()[att[0]].att.route == attention_route::general);
  CHECK(plan_of<C>::lowered::value[att[0]].att.seq_q == 48);
  CHECK(plan_of<C>::lowered::value[att[0]].att.seq_kv == 80);
}

TEST_CASE(
    "reduce groups take a thread, a warp or a block per output by the reduction's length and "
    "axes") {
  using R = std::remove_const_t<decltype(reductions)>;
  constexpr const auto& lp = launches_of<R>();
  static_assert(lp.ok());
  const auto& low = plan_of<R>::lowered::value;
  int seen = 0;
  for (int gi : groups_of<R>(group_kind::reduce)) {
    const fd::plan::kernel_desc& d = low[gi];
    CHECK(lp[gi].kind == launch_kind::reduce);
    const std::int64_t length = d.reduce_length;
    CAPTURE(length);
    const int lanes = length == 5000 ? 256 : length == 100 ? 32 : 1;
    CHECK(lp[gi].reduce_lanes == lanes);
    seen += length == 5000 || length == 100 || length == 33 || length == 40 || length == 6;
  }
  CHECK(seen == 5);
}

TEST_CASE(
    "a softmax over 50257 columns takes 512 threads per row, evaluating its prologue per pass") {
  constexpr const auto& lp = launches_of<vocab_bf16>();
  const std::vector<int> rows = groups_of<vocab_bf16>(group_kind::row);
  REQUIRE(rows.size() == 1);
  CHECK(lp[rows[0]].kind == launch_kind::row);
  CHECK(lp[rows[0]].row_threads == 512);
  CHECK_FALSE(lp[rows[0]].row_cached);
}

TEST_CASE(
    "GEMMs off the 32-element tile, reading B transposed or batched take the strided GEMM with "
    "predicated tails") {
  constexpr const auto& lp = launches_of<odd_bf16>();
  static_assert(lp.ok());
  int strided = 0;
  for (int gi : groups_of<odd_bf16>(group_kind::matmul)) {
    const fd::cuda::gemm_launch& e = lp[gi].gemm[0];
    CHECK(e.route == gemm_route::strided);
    ++strided;
    if (e.m == 48) CHECK((e.n == 72 && e.k == 40 && e.a_type == fd::dtype::bf16));
    if (e.m == 37) CHECK((e.n == 53 && e.k == 29 && e.a_type == fd::dtype::f32));
    if (e.batches == 3) CHECK((e.m == 40 && e.n == 56 && e.k == 24));
  }
  CHECK(strided == 3);
}

TEST_CASE("loop groups become one generated loop launch") {
  constexpr auto x = fd::input<"x", float, 64, 32>();
  constexpr auto b = fd::param<"b", float, 32>();
  using P = decltype(fd::compile(fd::exp(x * fd::lit<2.0> + b)));
  constexpr const auto& lp = launches_of<P>();
  REQUIRE(P::fusion.n_groups == 1);
  CHECK(lp[0].kind == launch_kind::loop);
  CHECK(lp[0].device_launches() == 1);
}

TEST_CASE("groups no CUDA launch computes are refused with the group and the reason") {
  SUBCASE("a group the lowering refuses (a matmul with an f16 result)") {
    constexpr auto h = fd::input<"h", fd::f16, 32, 32>();
    using P = decltype(fd::compile(fd::matmul(h, h)));
    constexpr const auto& lp = launches_of<P>();
    static_assert(!lp.ok() && lp.failed_group == 0);
    CHECK(lp[0].why == refusal::lowering_refused);
    CHECK(lp[0].kind == launch_kind::refused);
    const std::string why = fd::cuda::refusal_message(P::graph, P::fusion, lp);
    CHECK(why.find("group 0 (matmul, anchor %1 matmul[32,32])") != std::string::npos);
    CHECK(why.find("neither f32 nor bf16") != std::string::npos);
  }
  SUBCASE("attention with head_dim 512") {
    constexpr auto q = fd::input<"q", fd::bf16, 2, 64, 512>();
    using P = decltype(fd::compile(
        fd::matmul(fd::softmax(fd::matmul<false, true>(q, q) * fd::lit<0.0441941738>), q)));
    constexpr const auto& lp = launches_of<P>();
    static_assert(!lp.ok() && lp.failed_group == 0);
    CHECK(lp[0].why == refusal::attention_head_dim_above_256);
    CHECK(fd::cuda::refusal_message(P::graph, P::fusion, lp).find("head_dim above 256") !=
          std::string::npos);
  }
  SUBCASE("attention stopped at a run-time key length (a KV-cache decode step)") {
    constexpr auto kc = fd::state<"k_cache", float, 4, 40, 16>();
    constexpr auto q = fd::input<"q", float, 4, 1, 16>();
    constexpr auto k = fd::input<"k", float, 4, 1, 16>();
    constexpr auto pos = fd::input<"pos", std::int32_t>();
    constexpr auto k2 = fd::dynamic_update_slice<1>(kc, k, pos);
    constexpr auto keys = fd::iota<std::int32_t, 1, 1, 40>();
    constexpr auto s = fd::matmul<false, true>(q, k2) * fd::lit<0.25>;
    constexpr auto o = fd::matmul(fd::softmax(fd::where(keys <= pos, s, fd::neg_inf)), k2);
    using P = decltype(fd::compile(o, fd::update(kc, k2)));
    constexpr const auto& lp = launches_of<P>();
    static_assert(!lp.ok());
    int update = 0, key_length = 0;
    for (int gi = 0; gi < P::fusion.n_groups; ++gi) {
      update += lp[gi].kind == launch_kind::update;
      key_length += lp[gi].why == refusal::runtime_key_length;
    }
    CHECK(update == 1);  // the cache write itself has its launch
    CHECK(key_length == 1);
    CHECK(fd::cuda::refusal_message(P::graph, P::fusion, lp).find("run-time key length") !=
          std::string::npos);
  }
}

namespace {
// Whether some instruction of a group's code is a gather (a load at a run-time row).
template <class Program>
int gather_groups() {
  int n = 0;
  for (int gi = 0; gi < Program::fusion.n_groups; ++gi) {
    const fd::plan::kernel_desc& d = plan_of<Program>::lowered::value.desc[std::size_t(gi)];
    bool any = false;
    for (int i = 0; i < d.c.n_ins; ++i)
      any = any || d.c.instr[std::size_t(i)].kind == fd::plan::ins_kind::gather;
    n += any;
  }
  return n;
}
}  // namespace

TEST_CASE("an embedding gather and a dynamic slice run as generated loop launches") {
  SUBCASE("gather") {
    constexpr auto table = fd::param<"table", float, 11, 19>();
    constexpr auto ids = fd::input<"ids", std::int32_t, 3, 5>();
    using P = decltype(fd::compile(fd::gather(table, ids) * fd::lit<2.0>));
    constexpr const auto& lp = launches_of<P>();
    static_assert(lp.ok());
    CHECK(gather_groups<P>() == 1);
    for (int gi = 0; gi < P::fusion.n_groups; ++gi) CHECK(lp[gi].kind == launch_kind::loop);
    // the gather's access: a row of 19 elements, rows 0 .. 10, packed for the device code
    using D = decltype(fd::cuda::gen::packed_desc_of<plan_of<P>::desc<0>>::make());
    bool found = false;
    for (int a = 0; a < D::get().c.n_access; ++a)
      if (D::get().c.acc[std::size_t(a)].dyn_stride != 0) {
        CHECK(D::get().c.acc[std::size_t(a)].dyn_stride == 19);
        CHECK(D::get().c.acc[std::size_t(a)].dyn_max == 10);
        found = true;
      }
    CHECK(found);
  }
  SUBCASE("dynamic slice") {
    constexpr auto x = fd::input<"x", float, 12, 8>();
    constexpr auto pos = fd::input<"pos", std::int32_t>();
    using P = decltype(fd::compile(fd::exp(fd::dynamic_slice<0, 3>(x, pos))));
    constexpr const auto& lp = launches_of<P>();
    static_assert(lp.ok());
    CHECK(gather_groups<P>() == 1);
  }
}

TEST_CASE("a dynamic update slice into a state is an update launch written in place") {
  constexpr auto cache = fd::state<"cache", float, 8, 4>();
  constexpr auto row = fd::input<"row", float, 1, 4>();
  constexpr auto pos = fd::input<"pos", std::int32_t>();
  constexpr auto next = fd::dynamic_update_slice<0>(cache, row, pos);
  using P = decltype(fd::compile(fd::sum<0>(next), fd::update(cache, next)));
  constexpr const auto& lp = launches_of<P>();
  static_assert(lp.ok());
  int updates = 0;
  for (int gi = 0; gi < P::fusion.n_groups; ++gi) {
    if (lp[gi].kind != launch_kind::update) continue;
    ++updates;
    const fd::cuda::update_launch& e = lp[gi].upd;
    CHECK(lp[gi].device_launches() == 1);
    CHECK(e.bytes == 4);
    CHECK((e.outer == 1 && e.extent == 8 && e.len == 1 && e.inner == 4));
    CHECK(!e.start_is_constant);
  }
  CHECK(updates == 1);
  // The state has its own buffer, zeroed with the others; output 1 (its new value) is that buffer.
  const auto layout = fd::cuda::layout_device_memory(P::graph, P::memory, 256);
  int state = -1;
  for (int i = 0; i < int(P::node_count); ++i)
    if (P::graph[i].op == op_kind::state) state = i;
  REQUIRE(state >= 0);
  CHECK(layout.state_offset[std::size_t(state)] >= 0);
  CHECK(layout.output_offset[1] == std::size_t(layout.state_offset[std::size_t(state)]));
  CHECK(layout.output_offset[0] != layout.output_offset[1]);
  CHECK(layout.states_bytes == 256);  // 128 bytes, one 256-byte aligned slot
  CHECK(layout.states_begin + layout.states_bytes == layout.bytes);
  CHECK(layout.arena_bytes + layout.binding_bytes + layout.output_bytes + layout.states_bytes ==
        layout.bytes);
  // The update reads the old state and writes the new one into the same buffer: in place.
  fd::cuda::call_schedule<P::node_count> schedule(P::graph, P::fusion, P::memory, layout);
  bool in_place = false;
  schedule.for_each([&](int gi, int, const auto& addr) {
    if (lp[gi].kind != launch_kind::update) return;
    const fd::plan::kernel_desc& d = plan_of<P>::lowered::value.desc[std::size_t(gi)];
    in_place = addr[std::size_t(d.update_x)] == addr[std::size_t(d.root)] &&
               addr[std::size_t(d.root)] == layout.state_offset[std::size_t(state)];
  });
  CHECK(in_place);
}

TEST_CASE("argmax is a reduce launch") {
  constexpr auto x = fd::input<"x", float, 6, 300>();
  using P = decltype(fd::compile(fd::argmax<1>(x * fd::lit<2.0>)));
  constexpr const auto& lp = launches_of<P>();
  static_assert(lp.ok());
  REQUIRE(P::fusion.n_groups == 1);
  CHECK(lp[0].kind == launch_kind::reduce);
  CHECK(plan_of<P>::lowered::value.desc[0].reduce_op == op_kind::argmax);
  CHECK(lp[0].reduce_lanes == 32);
}
