// Writes, into the directory given as argv[1], the cases the real-XLA harness
// (tests/interop/run_hlo.py --cases DIR) runs: one folder <case>.<form> per exported module, with
// module.hlo and the same module as StableHLO by hlo/stablehlo.hpp's printer (module.mlir, run with
// --format mlir), `keep_fusions` for the fused_xla_cpu form (run_hlo.py then checks that XLA's
// compiled module runs exactly the module's fusions), input_<k>.npy (f32 values; the harness
// converts each to its parameter's type), expected_<k>.npy (the reference backend's outputs) and,
// for sharded modules, `partitions`. Forms: unfused; fused with each group a `call`; fused_xla_cpu,
// each group the kLoop fusion(s) XLA's CPU backend compiles (group_calls::xla_cpu);
// fused_xla_cpu_dots, the same with every product a plain library `dot`
// (xla_cpu_options::library_dots); sharded and sharded_xla_cpu (Megatron layout over 8 devices,
// transformers only). The fused form with the plan's fusion kinds (kLoop/kInput/kOutput), which
// XLA's CPU backend does not compile, goes to plan_forms/<case>.hlo for check_plan_forms.py (XLA
// parses it and converts it to StableHLO). Each folder also gets `arena_bytes`: the compiled
// program's arena, printed next to XLA's.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cases.hpp"
#include "fusedsl/export/sharding.hpp"
#include "fusedsl/hlo/stablehlo.hpp"
#include "fusedsl/io/npy.hpp"

namespace fd = fusedsl;
namespace ec = export_cases;
namespace fs = std::filesystem;

namespace {

std::vector<float> as_f32(const fd::dynamic_tensor& t) {
  std::vector<float> v(std::size_t(t.shape().size()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (t.type()) {
      case fd::dtype::f32: v[i] = t.data<float>()[i]; break;
      case fd::dtype::bf16: v[i] = float(t.data<fd::bf16>()[i]); break;
      case fd::dtype::f16: v[i] = float(t.data<fd::f16>()[i]); break;
      case fd::dtype::i32: v[i] = float(t.data<std::int32_t>()[i]); break;
      case fd::dtype::boolean: v[i] = t.data<bool>()[i] ? 1.0f : 0.0f; break;
      case fd::dtype::i8: v[i] = float(t.data<std::int8_t>()[i]); break;
      case fd::dtype::u8: v[i] = float(t.data<std::uint8_t>()[i]); break;
    }
  }
  return v;
}

void write_npy(const fs::path& p, const fd::dynamic_tensor& t) {
  const std::vector<float> v = as_f32(t);
  const std::vector<std::int64_t> shape(t.shape().d.begin(), t.shape().d.begin() + t.shape().rank);
  fd::io::write_npy<float>(p.string(), v, shape);
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p);
  f << s;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

struct writer {
  fs::path dir;
  int count = 0;

  // `bound`: bindings made by name instead of random values.
  template <class Program>
  void add(const std::string& name, const Program& p, bool sharded = false,
           const std::vector<std::pair<std::string, fd::dynamic_tensor (*)()>>& bound = {}) {
    const fd::graph::graph_view g(Program::graph);
    const auto bs = fd::hlo::export_bindings(g);
    auto inputs = ec::random_bindings(bs, 1234);
    for (const auto& [binding, make] : bound)
      for (std::size_t i = 0; i < bs.size(); ++i)
        if (bs[i].name == binding) inputs[i] = make();
    const auto outputs = ec::reference_outputs(g, bs, inputs);
    auto write_case = [&](const std::string& form, const fd::hlo::export_options& o, int partitions,
                          bool keep_fusions = false) {
      const fs::path d = dir / (name + "." + form);
      fs::create_directories(d);
      const fd::hlo::module m = fd::hlo::to_module(p, o);
      write_text(d / "module.hlo", fd::hlo::to_text(m));
      write_text(d / "module.mlir", fd::hlo::to_stablehlo(m));
      for (std::size_t i = 0; i < inputs.size(); ++i)
        write_npy(d / ("input_" + std::to_string(i) + ".npy"), inputs[i]);
      for (std::size_t k = 0; k < outputs.size(); ++k)
        write_npy(d / ("expected_" + std::to_string(k) + ".npy"), outputs[k]);
      if (partitions > 1) write_text(d / "partitions", std::to_string(partitions) + "\n");
      write_text(d / "arena_bytes", std::to_string(Program::arena_bytes()) + "\n");
      if (keep_fusions)
        write_text(d / "keep_fusions", "XLA's compiled entry must hold module.hlo's fusions\n");
      ++count;
    };
    fd::hlo::export_options fused;
    fused.form = fd::hlo::export_form::fused;
    fused.groups = fd::hlo::group_calls::call;
    fd::hlo::export_options xla_cpu = fused;
    xla_cpu.groups = fd::hlo::group_calls::xla_cpu;
    write_case("unfused", {}, 1);
    write_case("fused", fused, 1);
    write_case("fused_xla_cpu", xla_cpu, 1, true);
    fd::hlo::export_options library_dots = xla_cpu;
    library_dots.xla_cpu.library_dots = true;
    write_case("fused_xla_cpu_dots", library_dots, 1);
    if (sharded) write_case("sharded", fd::hlo::megatron_sharding(8).options(), 8);
    if (sharded)
      write_case("sharded_xla_cpu",
                 fd::hlo::megatron_sharding(8).options(fd::hlo::export_form::fused,
                                                       fd::hlo::group_calls::xla_cpu),
                 8);
    fd::hlo::export_options plan_form;
    plan_form.form = fd::hlo::export_form::fused;
    fs::create_directories(dir / "plan_forms");
    write_text(dir / "plan_forms" / (name + ".hlo"), fd::hlo::to_text(p, plan_form));
    std::cout << name << ": arena_bytes " << Program::arena_bytes() << "\n";
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " <output directory>\n";
    return 2;
  }
  try {
    writer w{fs::path(argv[1])};
    fs::create_directories(w.dir);
    w.add("unary_a", ec::unary_a);
    w.add("unary_b", ec::unary_b);
    w.add("binary", ec::binary);
    w.add("compare", ec::compare);
    w.add("casts", ec::casts);
    w.add("reduce", ec::reduce);
    w.add("matmul", ec::matmul);
    w.add("structure", ec::structure);
    w.add("rows", ec::rows);
    w.add("low_precision", ec::low_precision);
    w.add("embedding", ec::embedding);
    w.add("decode", ec::decode);
    w.add("argmax", ec::argmax, false, {{"logits", ec::argmax_logits}});
    w.add("order", ec::order, false, {{"logits", ec::argmax_logits}});
    w.add("scatter_add", ec::scatter_add);
    w.add("pred_between_parts", ec::pred_between_parts);
    w.add("rope", ec::rope);
    w.add("rounding", ec::rounding, false, {{"r", ec::rounding_values}});
    w.add("quantization", ec::quantization);
    w.add("int8_linear", ec::int8_linear);
    w.add("stack", ec::stack);
    w.add("batched_gqa", ec::batched_gqa);
    w.add("attention_options", ec::attention_options);
    w.add("moe_routed", ec::moe_routed);
    w.add("seed_transformer", ec::seed, true);
    w.add("gpt_small", ec::gpt, true);
    std::cout << "wrote " << w.count << " cases to " << w.dir.string() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "write_interop_cases: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
