// fusedsl-tpu: schedules an HLO text module on a model of a TPU chip, computes its results tile by
// tile following that schedule, and reports what the schedule costs.
//
//   fusedsl-tpu module.hlo --chip v5e [--inputs DIR|FILE.npy | --seed N] [--json report.json]
//               [--trace trace.json] [--check DIR] [--outputs DIR] [--no-execute]
//               [--chip-spec k=v,...] [--blocks BM,BK,BN] [--vmem-mib N] [--f32-dot-passes N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_number.hpp"
#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/tpu/cost.hpp"
#include "fusedsl/tpu/execute.hpp"
#include "fusedsl/tpu/inputs.hpp"
#include "fusedsl/tpu/report.hpp"
#include "fusedsl/tpu/schedule.hpp"
#include "fusedsl/tpu/trace.hpp"

namespace tpu = fusedsl::tpu;
namespace hlo = fusedsl::hlo;

namespace {

constexpr const char* usage =
    "usage: fusedsl-tpu MODULE.hlo [--chip v4|v5e|v5p|v6e] [--chip-spec key=value,...]\n"
    "                   [--inputs DIR|FILE.npy] [--seed N] [--no-execute]\n"
    "                   [--json REPORT.json] [--trace TRACE.json] [--check DIR] [--outputs DIR]\n"
    "                   [--blocks BM,BK,BN] [--vmem-mib N] [--f32-dot-passes N] [--tolerance T]\n"
    "  --chip-spec keys: name, mxu_dim, mxus, cores, vmem_mib, hbm_gbps, peak_tflops,\n"
    "                    step_overhead_us (unset keys keep the --chip values, default v5e)\n"
    "  --inputs DIR: <parameter name>.npy, param<N>.npy or <N>.npy for each entry parameter;\n"
    "               without --inputs the inputs are random (normal, from --seed, default 0)\n"
    "  --check DIR: compare the results with DIR/out<N>.npy (exit 3 if off by more than\n"
    "               --tolerance, default 1e-2, relative to the largest |expected| value, or if\n"
    "               a NaN, an infinity or an integer result differs)\n";

struct cli_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw cli_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text)) throw cli_error("cannot write " + path);
}

long long parse_int(const std::string& flag, const std::string& v) {
  const std::optional<long long> x = fusedsl::tools::parse_whole_integer(v);
  if (!x) throw cli_error(flag + ": expected an integer, got '" + v + "'");
  return *x;
}

std::vector<const tpu::value*> leaves(const tpu::value& v) {
  if (!v.shape.is_tuple()) return {&v};
  std::vector<const tpu::value*> out;
  for (const auto& e : v.elements)
    for (auto* l : leaves(e)) out.push_back(l);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string module_path, chip_name = "v5e", chip_spec, inputs, json, trace, check, outputs;
  std::uint64_t seed = 0;
  bool execute = true;
  double tolerance = 1e-2;
  tpu::schedule_options opt;
  try {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      auto next = [&]() -> const std::string& {
        if (i + 1 >= args.size()) throw cli_error(a + " needs a value");
        return args[++i];
      };
      if (a == "-h" || a == "--help") {
        std::cout << usage;
        return 0;
      } else if (a == "--chip") chip_name = next();
      else if (a == "--chip-spec") chip_spec = next();
      else if (a == "--inputs") inputs = next();
      else if (a == "--seed") seed = std::uint64_t(parse_int(a, next()));
      else if (a == "--json") json = next();
      else if (a == "--trace") trace = next();
      else if (a == "--check") check = next();
      else if (a == "--outputs") outputs = next();
      else if (a == "--no-execute") execute = false;
      else if (a == "--vmem-mib") opt.vmem_budget = parse_int(a, next()) * tpu::mib;
      else if (a == "--f32-dot-passes") opt.f32_dot_passes = int(parse_int(a, next()));
      else if (a == "--tolerance") tolerance = std::stod(next());
      else if (a == "--blocks") {
        std::string v = next();
        long long bm = 0, bk = 0, bn = 0;
        if (std::sscanf(v.c_str(), "%lld,%lld,%lld", &bm, &bk, &bn) != 3)
          throw cli_error("--blocks: expected BM,BK,BN, got '" + v + "'");
        opt.blocks = tpu::matmul_blocks{bm, bk, bn};
      } else if (!a.empty() && a[0] == '-') throw cli_error("unknown option " + a);
      else if (module_path.empty()) module_path = a;
      else throw cli_error("more than one module given: " + module_path + ", " + a);
    }
    if (module_path.empty()) throw cli_error("no module given");
    if (opt.f32_dot_passes < 1) throw cli_error("--f32-dot-passes must be at least 1");
  } catch (const std::exception& e) {
    std::cerr << "fusedsl-tpu: " << e.what() << "\n" << usage;
    return 2;
  }
  try {
    auto chip = tpu::chip_by_name(chip_name);
    if (!chip_spec.empty()) chip = tpu::parse_chip_spec(chip_spec, chip);
    hlo::module m;
    try {
      m = hlo::parse_module(read_file(module_path));
    } catch (const hlo::parse_error& e) {
      throw cli_error(module_path + ":" + e.what());
    }
    const auto s = tpu::make_schedule(m, chip, opt);
    const auto cost = tpu::summarize(s);
    std::cout << "module " << module_path << "\n" << tpu::text_summary(s, cost);
    if (!json.empty()) {
      write_file(json, tpu::json_report(s, cost));
      std::cout << "\nJSON report: " << json << "\n";
    }
    if (!trace.empty()) {
      write_file(trace, tpu::chrome_trace(s));
      std::cout << "trace (Chrome trace-event JSON, open in Perfetto): " << trace << "\n";
    }
    if (!execute) return 0;
    std::vector<tpu::value> in;
    if (!inputs.empty()) {
      in = tpu::load_inputs(m, inputs);
      std::cout << "\ninputs: " << in.size() << " from " << inputs << "\n";
    } else {
      in = tpu::random_inputs(m, seed);
      std::cout << "\ninputs: " << in.size() << " random (normal(0,1), seed " << seed << ")\n";
    }
    const auto result = tpu::execute(s, in);
    const auto outs = leaves(result);
    bool ok = true;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      const auto& v = *outs[i];
      double lo = INFINITY, hi = -INFINITY, sum = 0;
      for (double x : v.data) lo = std::min(lo, x), hi = std::max(hi, x), sum += x;
      std::printf("output %zu: %s min %.6g max %.6g mean %.6g\n", i,
                  hlo::to_short_string(v.shape).c_str(), lo, hi,
                  v.data.empty() ? 0.0 : sum / double(v.data.size()));
      if (!outputs.empty()) {
        std::filesystem::create_directories(outputs);
        tpu::write_npy_f32(std::filesystem::path(outputs) / ("out" + std::to_string(i) + ".npy"),
                           v);
      }
      if (!check.empty()) {
        const auto ref = tpu::read_npy_value(std::filesystem::path(check) /
                                             ("out" + std::to_string(i) + ".npy"));
        if (ref.data.size() != v.data.size())
          throw cli_error("--check: out" + std::to_string(i) + ".npy has " +
                          std::to_string(ref.data.size()) + " values, the result " +
                          std::to_string(v.data.size()));
        // NaN must be where the expected NaNs are, infinities equal, integer results exact.
        double max_abs = 0, max_ref = 0;
        std::size_t special = 0;
        const bool exact = !hlo::is_floating(v.shape.type);
        for (std::size_t j = 0; j < v.data.size(); ++j) {
          const double got = v.data[j], want = ref.data[j];
          if (!std::isfinite(want) || !std::isfinite(got) || exact) {
            special += std::isnan(want) ? !std::isnan(got) : got != want;
            continue;
          }
          max_abs = std::max(max_abs, std::fabs(got - want));
          max_ref = std::max(max_ref, std::fabs(want));
        }
        const double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
        const bool pass = rel <= tolerance && special == 0;
        ok = ok && pass;
        std::printf(
            "  vs %s/out%zu.npy: max |diff| %.3g, relative to max |expected| %.3g, %zu "
            "NaN/inf/integer mismatches: %s\n",
            check.c_str(), i, max_abs, rel, special, pass ? "ok" : "FAIL");
      }
    }
    return ok ? 0 : 3;
  } catch (const std::exception& e) {
    std::cerr << "fusedsl-tpu: " << e.what() << "\n";
    return 1;
  }
}
