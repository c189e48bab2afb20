// backend::binding_table, the binding by name both executors use: the names of a program's inputs
// and parameters (a stacked parameter once per layer), looked up by name, and the checks of what a
// caller binds, of outputs and of states, each a binding_error naming the thing at fault.
#include "fusedsl/backend/bindings.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusedsl/fusedsl.hpp"

namespace fd = fusedsl;
using fd::backend::binding_table;

namespace {

constexpr auto x = fd::input<"x", float, 4, 8>();
constexpr auto body = fd::nn::block([](auto h) { return fd::nn::linear<"fc", 8>(h); });
constexpr auto stacked = fd::compile(fd::nn::stack<"layers", 2>(body, x));

constexpr auto cache = fd::state<"cache", float, 8, 4>();
constexpr auto row = fd::input<"row", float, 1, 4>();
constexpr auto pos = fd::input<"pos", std::int32_t>();
constexpr auto next = fd::dynamic_update_slice<0>(cache, row, pos);
constexpr auto with_state = fd::compile(fd::sum<0>(next), fd::update(cache, next));

fd::graph::graph_view view_of(const auto& program) {
  return fd::graph::graph_view(std::remove_cvref_t<decltype(program)>::graph);
}

}  // namespace

TEST_CASE("a stacked parameter has one name per layer, in node order, after the inputs before it") {
  const binding_table t(view_of(stacked));
  std::vector<std::string> names;
  for (const auto& s : t.slots()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"x", "layers.0.fc.w", "layers.1.fc.w", "layers.0.fc.b",
                                          "layers.1.fc.b"});
  const auto& w1 = t[t.find("layers.1.fc.w")];
  CHECK(w1.iter == 1);
  CHECK(t.slot_of(w1.node, 1) == int(t.find("layers.1.fc.w")));
  CHECK(t.slot_of(w1.node, 2) == -1);
  CHECK(t.slot_of(w1.node, -1) == -1);
  CHECK(t.slot_of(t[0].node, 0) == 0);
  CHECK(t.slot_of(t[0].node, 1) == -1);  // x is not in the body: one slot
  CHECK(t.slot_of(-1, 0) == -1);
  CHECK(t.slot_of(1000, 0) == -1);
  CHECK(fd::backend::layers_of_region(view_of(stacked), 0) == 1);
  CHECK(t.first_input_name() == "x");
  const auto infos = t.infos();
  REQUIRE(infos.size() == 5);
  CHECK(infos[1].name == "layers.0.fc.w");
  CHECK(infos[1].shape == fd::make_dims(8, 8));
  const int body_region = view_of(stacked)[w1.node].region;
  CHECK(body_region != 0);
  CHECK(fd::backend::layers_of_region(view_of(stacked), body_region) == 2);
  CHECK(fd::backend::binding_prefix(view_of(stacked), body_region, 1) == "layers.1.");
  CHECK(fd::backend::binding_prefix(view_of(stacked), 0, 0).empty());
}

TEST_CASE("what is bound is checked: the name, the dtype and shape, the data") {
  const binding_table t(view_of(stacked));
  std::vector<float> data(64);
  const fd::tensor_ref ok{data.data(), fd::dtype::f32, fd::make_dims(8, 8)};
  CHECK(t.check("layers.0.fc.w", ok) == t.find("layers.0.fc.w"));
  CHECK_THROWS_WITH_AS(t.check("fc.w", ok),
                       "binding \"fc.w\": the program has no input or param of that name (it has: "
                       "x, layers.0.fc.w, layers.1.fc.w, layers.0.fc.b, layers.1.fc.b)",
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(t.check("layers.2.fc.w", ok), doctest::Contains("no input or param"),
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(
      t.check("layers.1.fc.w", fd::tensor_ref{data.data(), fd::dtype::f32, fd::make_dims(8, 4)}),
      "binding \"layers.1.fc.w\": expected f32[8,8], got f32[8,4]", fd::binding_error);
  CHECK_THROWS_WITH_AS(
      t.check("layers.1.fc.w", fd::tensor_ref{data.data(), fd::dtype::bf16, fd::make_dims(8, 8)}),
      "binding \"layers.1.fc.w\": expected f32[8,8], got bf16[8,8]", fd::binding_error);
  CHECK_THROWS_WITH_AS(t.check("x", fd::tensor_ref{nullptr, fd::dtype::f32, fd::make_dims(4, 8)}),
                       "binding \"x\": null data", fd::binding_error);
  std::vector<const void*> bound(t.size(), data.data());
  CHECK_NOTHROW(t.require_bound(bound.data()));
  bound[3] = nullptr;
  CHECK_THROWS_WITH_AS(t.require_bound(bound.data()), "binding \"layers.0.fc.b\": not bound",
                       fd::binding_error);
}

TEST_CASE(
    "outputs: the index, dtype and shape, the data, and no state's new value to user memory") {
  const auto g = view_of(with_state);
  std::vector<float> data(32);
  const fd::tensor_ref sum{data.data(), fd::dtype::f32, fd::make_dims(4)};
  CHECK_NOTHROW(binding_table::check_output(g, 0, sum, true));
  CHECK_THROWS_WITH_AS(binding_table::output_node(g, 2), "output 2: the program has 2 outputs",
                       fd::binding_error);
  CHECK_THROWS_WITH_AS(binding_table::check_output(g, -1, sum, true),
                       "output -1: the program has 2 outputs", fd::binding_error);
  CHECK_THROWS_WITH_AS(
      binding_table::check_output(
          g, 0, fd::tensor_ref{data.data(), fd::dtype::f32, fd::make_dims(8)}, true),
      "output 0: expected f32[4], got f32[8]", fd::binding_error);
  CHECK_THROWS_WITH_AS(binding_table::check_output(
                           g, 0, fd::tensor_ref{nullptr, fd::dtype::f32, fd::make_dims(4)}, true),
                       "output 0: null data", fd::binding_error);
  const fd::tensor_ref whole{data.data(), fd::dtype::f32, fd::make_dims(8, 4)};
  CHECK_THROWS_WITH_AS(binding_table::check_output(g, 1, whole, true),
                       doctest::Contains("output 1: it is the new value of state \"cache\""),
                       fd::binding_error);
  CHECK_NOTHROW(binding_table::check_output(g, 1, whole, false));  // read back from the device
}

TEST_CASE("states are found by name and what is read or written as one is checked") {
  const auto g = view_of(with_state);
  const int s = binding_table::state_node(g, "cache");
  CHECK(g[s].op == fd::graph::op_kind::state);
  CHECK_THROWS_WITH_AS(binding_table::state_node(g, "kv"),
                       "state \"kv\": the program has no state of that name", fd::binding_error);
  std::vector<float> data(32);
  const fd::tensor_ref st{data.data(), fd::dtype::f32, fd::make_dims(8, 4)};
  CHECK_NOTHROW(binding_table::check_state("cache", st, st));
  CHECK_THROWS_WITH_AS(
      binding_table::check_state("cache", st,
                                 fd::tensor_ref{data.data(), fd::dtype::f32, fd::make_dims(4, 8)}),
      "state \"cache\": expected f32[8,4], got f32[4,8]", fd::binding_error);
  CHECK_THROWS_WITH_AS(
      binding_table::check_state("cache", st,
                                 fd::tensor_ref{nullptr, fd::dtype::f32, fd::make_dims(8, 4)}),
      "state \"cache\": null data", fd::binding_error);
}

TEST_CASE("an output may not overlap a bound value or another output, by a single byte") {
  const binding_table t(view_of(with_state));  // row [1,4] f32, pos i32; output 0: f32[4]
  std::vector<float> mem(64);
  const int row_slot = int(t.find("row")), pos_slot = int(t.find("pos"));
  std::vector<const void*> bound(t.size(), nullptr);
  bound[std::size_t(row_slot)] = mem.data();
  bound[std::size_t(pos_slot)] = mem.data() + 8;
  const void* apart[2] = {mem.data() + 16, mem.data() + 32};
  CHECK_NOTHROW(t.check_no_alias(bound.data(), apart));
  const void* over_row[2] = {mem.data() + 3, mem.data() + 32};  // its first float is row's last
  CHECK_THROWS_WITH_AS(t.check_no_alias(bound.data(), over_row),
                       doctest::Contains("output 0: its memory overlaps the memory bound to "
                                         "\"row\""),
                       fd::binding_error);
  const void* touching[2] = {mem.data() + 4, mem.data() + 32};  // right after row: no overlap
  CHECK_NOTHROW(t.check_no_alias(bound.data(), touching));
}
