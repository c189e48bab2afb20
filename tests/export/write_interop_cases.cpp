// Writes, into the directory given as argv[1], the data the real-XLA interop check reads
// (run_exported.py): for each case its exported modules (unfused; fused with each group a `call`,
// which XLA's CPU backend compiles; fused with the plan's fusion kinds, which XLA parses and converts;
// Megatron-sharded over 8 devices for the transformers), random inputs as .npy (f32 values; the
// manifest names the dtype to convert them to), the reference backend's outputs as .npy, and
// manifest.json listing every run with its tolerance and our arena bytes.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cases.hpp"
#include "fusedsl/hlo/export_sharding.hpp"
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

std::string json_list(const std::vector<std::string>& xs) {
  std::string s = "[";
  for (std::size_t i = 0; i < xs.size(); ++i) s += (i ? ", \"" : "\"") + xs[i] + "\"";
  return s + "]";
}

struct writer {
  fs::path dir;
  std::vector<std::string> runs;

  template <class Program>
  void add(const std::string& name, const Program& p, double rtol, bool sharded = false) {
    const fd::graph::graph_view g(Program::graph);
    const auto bs = fd::hlo::export_bindings(g);
    auto inputs = ec::random_bindings(bs, 1234);
    const auto outputs = ec::reference_outputs(g, bs, inputs);
    std::vector<std::string> in_files, in_types, out_files;
    for (std::size_t i = 0; i < bs.size(); ++i) {
      in_files.push_back(name + ".in" + std::to_string(i) + ".npy");
      in_types.push_back(std::string(fd::name_of(bs[i].type)));
      write_npy(dir / in_files.back(), inputs[i]);
    }
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      out_files.push_back(name + ".out" + std::to_string(k) + ".npy");
      write_npy(dir / out_files.back(), outputs[k]);
    }
    auto run = [&](const std::string& form, const fd::hlo::export_options& o, int partitions, bool execute) {
      const std::string file = name + "." + form + ".hlo";
      write_text(dir / file, fd::hlo::to_text(p, o));
      runs.push_back("{\"case\": \"" + name + "\", \"form\": \"" + form + "\", \"hlo\": \"" + file +
                     "\", \"inputs\": " + json_list(in_files) + ", \"input_types\": " + json_list(in_types) +
                     ", \"expected\": " + json_list(out_files) + ", \"rtol\": " + std::to_string(rtol) +
                     ", \"partitions\": " + std::to_string(partitions) + ", \"execute\": " +
                     (execute ? "true" : "false") + ", \"arena_bytes\": " + std::to_string(Program::arena_bytes()) + "}");
    };
    fd::hlo::export_options unfused;
    fd::hlo::export_options fused;
    fused.form = fd::hlo::export_form::fused;
    fused.groups = fd::hlo::group_calls::call;
    fd::hlo::export_options fused_plan;
    fused_plan.form = fd::hlo::export_form::fused;
    run("unfused", unfused, 1, true);
    run("fused", fused, 1, true);
    run("fused_plan", fused_plan, 1, false);
    if (sharded) run("sharded", fd::hlo::megatron_sharding(8).options(), 8, true);
  }

  void finish() const {
    std::string s = "{\"runs\": [\n";
    for (std::size_t i = 0; i < runs.size(); ++i) s += "  " + runs[i] + (i + 1 < runs.size() ? ",\n" : "\n");
    write_text(dir / "manifest.json", s + "]}\n");
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " <output directory>\n";
    return 2;
  }
  try {
    writer w{fs::path(argv[1]), {}};
    fs::create_directories(w.dir);
    w.add("unary_a", ec::unary_a, 1e-5);
    w.add("unary_b", ec::unary_b, 1e-5);
    w.add("binary", ec::binary, 1e-5);
    w.add("compare", ec::compare, 1e-5);
    w.add("casts", ec::casts, 1e-2);
    w.add("reduce", ec::reduce, 1e-5);
    w.add("matmul", ec::matmul, 1e-5);
    w.add("structure", ec::structure, 1e-5);
    w.add("rows", ec::rows, 1e-5);
    w.add("low_precision", ec::low_precision, 2e-2);
    w.add("stack", ec::stack, 1e-5);
    w.add("seed_transformer", ec::seed, 1e-5, true);
    w.add("gpt_small", ec::gpt, 1e-5, true);
    w.finish();
    std::cout << "wrote " << w.runs.size() << " runs to " << w.dir.string() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "write_interop_cases: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
