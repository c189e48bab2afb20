// hlo::export_sharding: meshes and partition specs become XLA sharding annotations; the Megatron
// layout of a transformer; bad specs are errors naming the problem.
#include <doctest/doctest.h>

#include <string>

#include "fusedsl/export/sharding.hpp"
#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "fusedsl/models/transformer.hpp"

namespace fd = fusedsl;
namespace hlo = fusedsl::hlo;

namespace {
std::string text_of(const hlo::device_mesh& mesh, const hlo::partition_spec& spec,
                    const fd::dims& shape) {
  return hlo::to_text(hlo::to_sharding(mesh, spec, shape));
}
const hlo::instruction& parameter_named(const hlo::module& m, const std::string& name) {
  const hlo::computation& e = m.entry_computation();
  for (auto id : e.parameters())
    if (e.instructions[id].op_name == name) return e.instructions[id];
  throw std::runtime_error("no parameter " + name);
}
}  // namespace

TEST_CASE("a spec over a one-axis mesh tiles the named dimension over iota devices") {
  const hlo::device_mesh mesh{{{"model", 8}}};
  CHECK(text_of(mesh, {"", "model"}, fd::make_dims(128, 512)) == "{devices=[1,8]<=[8]}");
  CHECK(text_of(mesh, {"model", ""}, fd::make_dims(512, 128)) == "{devices=[8,1]<=[8]}");
  CHECK(text_of(mesh, {"model"}, fd::make_dims(512)) == "{devices=[8]<=[8]}");
  CHECK(text_of(mesh, {"", ""}, fd::make_dims(4, 4)) == "{replicated}");
}

TEST_CASE(
    "mesh axes a spec leaves out become a replicated last tile dimension, in mesh device order") {
  const hlo::device_mesh mesh{{{"data", 2}, {"model", 4}}};
  CHECK(text_of(mesh, {"data", "model"}, fd::make_dims(8, 8)) == "{devices=[2,4]<=[8]}");
  CHECK(text_of(mesh, {"model", "data"}, fd::make_dims(8, 8)) == "{devices=[4,2]<=[2,4]T(1,0)}");
  CHECK(text_of(mesh, {"", "model"}, fd::make_dims(8, 8)) ==
        "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  CHECK(text_of(mesh, {"data", ""}, fd::make_dims(8, 8)) ==
        "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
}

TEST_CASE("bad specs are errors that name the axis or dimension at fault") {
  const hlo::device_mesh mesh{{{"model", 8}}};
  CHECK_THROWS_WITH_AS(hlo::to_sharding(mesh, {"heads"}, fd::make_dims(8)),
                       "sharding: the mesh has no axis named 'heads'", hlo::ir_error);
  CHECK_THROWS_WITH_AS(
      hlo::to_sharding(mesh, {"model"}, fd::make_dims(12)),
      "sharding: dimension 0 of size 12 does not divide over mesh axis 'model' of size 8",
      hlo::ir_error);
  CHECK_THROWS_AS(hlo::to_sharding(mesh, {"model", "model"}, fd::make_dims(8, 8)), hlo::ir_error);
  CHECK_THROWS_AS(hlo::to_sharding(mesh, {"model"}, fd::make_dims(8, 8)), hlo::ir_error);
}

TEST_CASE("patterns match binding names with '*'; the first matching rule wins") {
  CHECK(hlo::glob_match("*attn.q.w", "layers.1.attn.q.w"));
  CHECK(hlo::glob_match("layers.*.ln1.*", "layers.0.ln1.gamma"));
  CHECK_FALSE(hlo::glob_match("*attn.q.w", "layers.1.attn.q.b"));
  hlo::sharding_spec s{hlo::device_mesh{{{"model", 2}}}};
  s.replicate("special.w").shard("*.w", {"", "model"});
  CHECK(s.of("special.w", fd::make_dims(4, 4)) == hlo::sharding::replicated());
  CHECK(hlo::to_text(s.of("other.w", fd::make_dims(4, 4))) == "{devices=[1,2]<=[2]}");
  CHECK(s.of("no_rule", fd::make_dims(4)) == hlo::sharding::replicated());
}

TEST_CASE(
    "the Megatron layout of the seed transformer: q/k/v and fc1 by columns, o and fc2 by rows") {
  const hlo::module m =
      hlo::to_module(fd::models::seed::program, hlo::megatron_sharding(8).options());
  auto sharding_of = [&](const std::string& name) {
    return hlo::to_text(*parameter_named(m, name).sharding);
  };
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "layers." + std::to_string(layer) + ".";
    CHECK(sharding_of(p + "attn.q.w") == "{devices=[1,8]<=[8]}");
    CHECK(sharding_of(p + "attn.k.b") == "{devices=[8]<=[8]}");
    CHECK(sharding_of(p + "attn.o.w") == "{devices=[8,1]<=[8]}");
    CHECK(sharding_of(p + "attn.o.b") == "{replicated}");
    CHECK(sharding_of(p + "ffn.fc1.w") == "{devices=[1,8]<=[8]}");
    CHECK(sharding_of(p + "ffn.fc2.w") == "{devices=[8,1]<=[8]}");
    CHECK(sharding_of(p + "ln2.gamma") == "{replicated}");
  }
  CHECK(sharding_of("x") == "{replicated}");
  CHECK(hlo::to_text(*m.entry_computation().root_instruction().sharding) == "{replicated}");
  // The annotations survive printing and parsing.
  CHECK(hlo::parse_module(hlo::to_text(m)) == m);
}

TEST_CASE("several outputs are annotated with a tuple sharding") {
  constexpr auto x = fd::input<"x", float, 8, 4>();
  constexpr auto p = fd::compile(fd::exp(x), fd::sum<1>(x));
  hlo::sharding_spec s{hlo::device_mesh{{{"rows", 2}}}};
  s.shard("x", {"rows", ""}).shard("output.0", {"rows", ""}).shard("output.1", {"rows"});
  const std::string text = hlo::to_text(p, s.options());
  CHECK(text.find("sharding={{devices=[2,1]<=[2]}, {devices=[2]<=[2]}}") != std::string::npos);
  CHECK(text.find("%x = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}") !=
        std::string::npos);
}
