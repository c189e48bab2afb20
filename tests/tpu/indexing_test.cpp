// gather, dynamic-slice, dynamic-update-slice, argmax's variadic reduce and sin/cos on the
// TPU-style backend: jax-emitted modules (data/gen_jax_modules.py) against XLA's results,
// fusedsl's exports (unfused and with the plan's fusions) against the reference backend, and
// what the cost model charges them (row copies by DMA, in-place updates, comparator ops).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../common/test_paths.hpp"
#include "../export/bindings.hpp"
#include "../export/tpu_values.hpp"
#include "fusedsl/export/export.hpp"
#include "fusedsl/fusedsl.hpp"
#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/tpu/cost.hpp"
#include "fusedsl/tpu/execute.hpp"
#include "fusedsl/tpu/inputs.hpp"
#include "fusedsl/tpu/report.hpp"
#include "fusedsl/tpu/schedule.hpp"
#include "invariants.hpp"

namespace fd = fusedsl;
namespace tpu = fusedsl::tpu;
namespace hlo = fusedsl::hlo;
namespace fs = std::filesystem;

namespace programs {
// An embedding lookup with positions and layernorm: the gather is the row group's prologue.
constexpr auto ids = fd::input<"ids", std::int32_t, 2, 16>();
constexpr auto table = fd::param<"table", float, 256, 128>();
constexpr auto positions = fd::param<"positions", float, 16, 128>();
constexpr auto embedding =
    fd::compile(fd::layernorm(fd::gather(table, ids) + positions, fd::param<"g", float, 128>(),
                              fd::param<"b", float, 128>()));
// Two rows written one after the other into a cache, then a window read back and argmax over it.
constexpr auto cache = fd::input<"cache", float, 64, 32>();
constexpr auto step = fd::input<"step", std::int32_t>();
constexpr auto first =
    fd::dynamic_update_slice<0>(cache, fd::tanh(fd::input<"k0", float, 1, 32>()), step);
constexpr auto second =
    fd::dynamic_update_slice<0>(first, fd::input<"k1", float, 1, 32>(), step + fd::lit<1.0>);
constexpr auto decode =
    fd::compile(second, fd::argmax<1>(fd::dynamic_slice<0, 4>(second, step - fd::lit<2.0>)));
// RoPE-like: rows rotated by sin and cos of position times frequency.
constexpr auto q = fd::input<"q", float, 16, 32>();
constexpr auto angle =
    fd::cast<float>(fd::iota<std::int32_t, 0, 16, 16>()) * fd::param<"freq", float, 16>();
constexpr auto rope = fd::compile(fd::concat<1>(
    fd::slice<1, 0, 16>(q) * fd::cos(angle) - fd::slice<1, 16, 32>(q) * fd::sin(angle),
    fd::slice<1, 16, 32>(q) * fd::cos(angle) + fd::slice<1, 0, 16>(q) * fd::sin(angle)));
}  // namespace programs

namespace {

const fs::path data_dir = fusedsl::test::test_path(FUSEDSL_TPU_DATA_DIR);

hlo::module load(const std::string& name) {
  std::ifstream f(data_dir / name / "module.hlo");
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return hlo::parse_module(ss.str());
}

std::vector<const tpu::value*> leaves(const tpu::value& v) {
  if (!v.shape.is_tuple()) return {&v};
  std::vector<const tpu::value*> out;
  for (const auto& e : v.elements) out.push_back(&e);
  return out;
}

// got matches want: NaN exactly where want has NaN, infinities equal, integer results equal,
// finite values within tol of the largest |want|.
void check_matches(const tpu::value& got, const tpu::value& want, double tol) {
  REQUIRE(got.data.size() == want.data.size());
  double scale = 1e-30, err = 0;
  for (double w : want.data)
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  for (std::size_t i = 0; i < want.data.size(); ++i) {
    const double g = got.data[i], w = want.data[i];
    CAPTURE(i);
    if (std::isnan(w) || std::isinf(w) || hlo::is_integral(want.shape.type)) {
      CHECK((std::isnan(w) ? std::isnan(g) : g == w));
      continue;
    }
    REQUIRE(std::isfinite(g));
    err = std::max(err, std::fabs(g - w));
  }
  CHECK(err <= tol * scale);
}

const tpu::kernel_plan& kernel_of(const tpu::schedule& s, hlo::opcode op) {
  for (std::size_t k = 0; k < s.groups.size(); ++k)
    for (auto id : s.groups[k].nodes)
      if (s.graph.op(id) == op) return s.kernels[k];
  FAIL("no kernel holds a " << hlo::to_string(op));
  return s.kernels.front();
}

}  // namespace

TEST_CASE(
    "jax's gathers, dynamic slices, donated cache update, argmax and RoPE compute what XLA "
    "computes, on every chip model") {
  for (const char* name :
       {"embedding_layernorm", "decode_step", "argmax_logits", "rope", "gathers"}) {
    CAPTURE(name);
    const auto m = load(name);
    const auto inputs = tpu::load_inputs(m, data_dir / name);
    for (const auto& chip : tpu::known_chips()) {
      CAPTURE(chip.name);
      const auto s = tpu::make_schedule(m, chip);
      check_invariants(s.kernels, s.tl, chip);
      const auto out = tpu::execute(s, inputs);
      const auto outs = leaves(out);
      for (std::size_t i = 0; i < outs.size(); ++i) {
        CAPTURE(i);
        const auto want =
            tpu::read_npy_value(data_dir / name / ("out" + std::to_string(i) + ".npy"));
        CHECK(outs[i]->shape.dims == want.shape.dims);
        check_matches(*outs[i], want, 1e-5);
      }
    }
  }
}

TEST_CASE("a gather reads only the rows it picks and a dynamic-slice only its window, by DMA") {
  const auto m = load("gathers");
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  std::size_t row_copies = 0;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const auto& kp = s.kernels[k];
    if (kp.kind != tpu::kernel_kind::dma) continue;
    ++row_copies;
    const auto id = s.groups[k].nodes.at(0);
    const auto& node = s.graph.nodes[id];
    const std::int64_t out = s.graph.shape(id).byte_count();
    // indices (gather) or start scalars (dynamic-slice), then the rows read and written
    std::int64_t index_bytes = 0;
    for (std::size_t o = 1; o < node.operands.size(); ++o)
      index_bytes += tpu::detail::source_bytes(s.graph, node.operands[o]);
    CHECK(kp.hbm_bytes == index_bytes + 2 * out);
    CHECK(kp.hbm_bytes < s.graph.shape(node.operands[0]).byte_count() + out);
    CHECK(kp.flops == 0);
    for (const auto& step : kp.steps) CHECK(step.vpu_cycles == 0);
  }
  CHECK(row_copies == 4);  // take_along_axis, x[rows, cols], x[:, cols], dynamic_slice
  const auto c = tpu::summarize(s);
  for (const auto& k : c.kernels)
    if (k.kind == tpu::kernel_kind::dma) CHECK((k.bound == "HBM" || k.bound == "overhead"));
}

TEST_CASE(
    "a donated cache is updated in place (only the row moves); without input_output_alias the "
    "update copies the cache first") {
  auto m = load("decode_step");
  REQUIRE(m.input_output_alias.size() == 1);
  const auto chip = tpu::chip_by_name("v5e");
  const auto donated = tpu::make_schedule(m, chip);
  const auto& in_place = kernel_of(donated, hlo::opcode::dynamic_update_slice);
  CHECK(in_place.kind == tpu::kernel_kind::dma);
  CHECK(in_place.in_place);
  const std::int64_t row = 16 * 4, cache = 32 * 16 * 4, start = 4;
  CHECK(in_place.hbm_bytes == start + 2 * row);
  m.input_output_alias.clear();
  const auto kept = tpu::make_schedule(m, chip);
  const auto& copy = kernel_of(kept, hlo::opcode::dynamic_update_slice);
  CHECK_FALSE(copy.in_place);
  CHECK(copy.hbm_bytes == start + row + 2 * cache);
  // The numbers do not depend on it.
  const auto inputs = tpu::load_inputs(m, data_dir / "decode_step");
  const auto a = tpu::execute(donated, inputs), b = tpu::execute(kept, inputs);
  CHECK(a.elements.at(0).data == b.elements.at(0).data);
  // The JSON report says which.
  const std::string report = tpu::json_report(donated, tpu::summarize(donated));
  CHECK(report.find("\"kind\": \"dma\"") != std::string::npos);
  CHECK(report.find("\"in_place\": true") != std::string::npos);
}

TEST_CASE("argmax's variadic reduce is a VPU kernel charged for every op of its comparator") {
  const auto m = load("argmax_logits");
  const auto chip = tpu::chip_by_name("v5e");
  const auto s = tpu::make_schedule(m, chip);
  const auto& kp = kernel_of(s, hlo::opcode::reduce);
  CHECK(kp.kind == tpu::kernel_kind::vector);
  // jax's comparator: 4 compares, 2 ors, an and, 2 selects.
  std::size_t reduce = 0;
  for (std::size_t id = 0; id < s.graph.nodes.size(); ++id)
    if (s.graph.op(id) == hlo::opcode::reduce) reduce = id;
  CHECK(tpu::detail::reducer_weight(m, *s.graph.nodes[reduce].inst) == 9);
  double vpu = 0;
  for (const auto& st : kp.steps) vpu += st.vpu_cycles;
  CHECK(vpu >= 9 * tpu::vpu_tile_cycles(4, 16, 4, chip));
}

namespace {

hlo::export_options plan_form() {
  hlo::export_options o;
  o.form = hlo::export_form::fused;  // the plan's groups as kLoop/kInput/kOutput fusions
  return o;
}

// The exported module, unfused and in the plan's fused form, run on the TPU model with random
// bindings, against the reference backend; returns the fused form's schedule inputs.
template <class Program>
void check_against_reference(const Program& p) {
  const fd::graph::graph_view g(Program::graph);
  const auto bs = hlo::export_bindings(g);
  auto inputs = export_cases::random_bindings(bs, 11);
  const auto want = export_cases::reference_outputs(g, bs, inputs);
  for (const hlo::export_options& o : {hlo::export_options{}, plan_form()}) {
    CAPTURE(o.form == hlo::export_form::fused);
    const hlo::module m = hlo::to_module(p, o);
    for (const auto& chip : tpu::known_chips()) {
      CAPTURE(chip.name);
      const auto s = tpu::make_schedule(m, chip);
      check_invariants(s.kernels, s.tl, chip);
      tpu_values::check_outputs(tpu::execute(s, tpu_values::to_values(m, inputs)), want, 1e-5);
    }
  }
}

}  // namespace

TEST_CASE(
    "fusedsl's embedding, decode and RoPE exports run on the TPU model as the reference backend "
    "computes them") {
  check_against_reference(programs::embedding);
  check_against_reference(programs::decode);
  check_against_reference(programs::rope);
}

TEST_CASE("an exported fusion holding a gather reads only the gathered rows of the table") {
  const hlo::module unfused = hlo::to_module(programs::embedding);
  const hlo::module fused = hlo::to_module(programs::embedding, plan_form());
  const auto chip = tpu::chip_by_name("v5e");
  const auto su = tpu::make_schedule(unfused, chip), sf = tpu::make_schedule(fused, chip);
  const std::int64_t rows = 2 * 16 * 128 * 4, table = 256 * 128 * 4, ids = 2 * 16 * 4;
  // Unfused: the gather alone is a row copy; fused: the layernorm fusion reads rows, not the table.
  const auto& gather = kernel_of(su, hlo::opcode::gather);
  CHECK(gather.kind == tpu::kernel_kind::dma);
  CHECK(gather.hbm_bytes == ids + 2 * rows);
  const auto& norm = kernel_of(sf, hlo::opcode::gather);
  CHECK(norm.kind == tpu::kernel_kind::vector);
  const std::int64_t params = 16 * 128 * 4 + 2 * 128 * 4;  // positions, gamma, beta
  CHECK(norm.hbm_bytes == ids + rows + params + rows);
  CHECK(norm.hbm_bytes < ids + table + params + rows);  // what reading the whole table would cost
  CHECK(tpu::summarize(sf).hbm_bytes < tpu::summarize(su).hbm_bytes);
}

TEST_CASE(
    "the second of two cache updates is in place (the first buffer is dead); the first copies the "
    "undonated cache") {
  const hlo::module m = hlo::to_module(programs::decode, plan_form());
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  std::vector<bool> in_place;
  for (std::size_t k = 0; k < s.kernels.size(); ++k)
    if (s.graph.op(s.groups[k].output) == hlo::opcode::dynamic_update_slice)
      in_place.push_back(s.kernels[k].in_place);
  CHECK(in_place == std::vector<bool>{false, true});
}

TEST_CASE("an exported argmax's reduce is charged for every op of our comparator") {
  const hlo::module m = hlo::to_module(programs::decode, plan_form());
  const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
  // Our comparator also orders NaNs among themselves: 5 compares, a not, 3 ands, 3 ors, 2 selects.
  std::size_t reduces = 0;
  for (std::size_t id = 0; id < s.graph.nodes.size(); ++id)
    if (s.graph.op(id) == hlo::opcode::reduce) {
      ++reduces;
      CHECK(tpu::detail::reducer_weight(m, *s.graph.nodes[id].inst) == 14);
    }
  CHECK(reduces == 1);
}
