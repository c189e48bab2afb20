#pragma once
// The TPU-style cost report as text and JSON.
// The bodies of fusedsl/tpu/report.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/tpu/report.hpp"

namespace fusedsl::tpu {

namespace detail {
inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
inline std::string human_time(double s) {
  if (s >= 1e-3) return fmt("%.3f ms", s * 1e3);
  return fmt("%.3f us", s * 1e6);
}
inline std::string human_bytes(double b) {
  if (b >= double(1 << 20)) return fmt("%.2f MiB", b / double(1 << 20));
  if (b >= 1024) return fmt("%.1f KiB", b / 1024);
  return fmt("%.0f B", b);
}
}  // namespace detail

FUSEDSL_DECL std::string text_summary(const schedule& s, const cost_summary& c) {
  using detail::fmt;
  std::string out;
  out += "chip " + s.chip.name + ": " + std::to_string(s.chip.cores_per_chip) +
         " TensorCore(s) x " + std::to_string(s.chip.mxus_per_core) + " MXU " +
         std::to_string(s.chip.mxu_dim) + "x" + std::to_string(s.chip.mxu_dim) + ", clock " +
         fmt("%.3f GHz", c.clock_hz / 1e9) + ", HBM " +
         fmt("%.0f GB/s", s.chip.hbm_bytes_per_s / 1e9) + ", VMEM " +
         detail::human_bytes(double(s.chip.vmem_bytes_per_core)) + "/core, peak " +
         fmt("%.0f TFLOP/s bf16", s.chip.peak_bf16_flops / 1e12) + "\n";
  out += "total " + detail::human_time(c.total_time_s) + " (" + fmt("%.0f", c.total_cycles) +
         " cycles), roofline bound " + detail::human_time(c.roofline_time_s) +
         ", MXU utilisation " + fmt("%.1f%%", 100 * c.mxu_utilization) + ", HBM " +
         detail::human_bytes(double(c.hbm_bytes)) + ", VMEM peak " +
         detail::human_bytes(double(c.vmem_peak_bytes)) + "\n";
  out += "matmul FLOPs " + fmt("%.4g", c.matmul_flops) + ", vector FLOPs " +
         fmt("%.4g", c.vector_flops) + "\n\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-36s %-7s %-8s %12s %8s %12s %10s  %s\n", "kernel", "kind",
                "bound", "time", "MXU%", "HBM", "VMEM", "blocks / ops");
  out += line;
  for (const auto& k : c.kernels) {
    if (k.kind == kernel_kind::layout) continue;
    std::string extra;
    if (k.kind == kernel_kind::matmul)
      extra = "[" + std::to_string(k.mm.batch) + "x" + std::to_string(k.mm.m) + "x" +
              std::to_string(k.mm.k) + "x" + std::to_string(k.mm.n) + "] blocks " +
              std::to_string(k.blocks.bm) + "x" + std::to_string(k.blocks.bk) + "x" +
              std::to_string(k.blocks.bn);
    if (k.ops.size() > 1)
      extra += (extra.empty() ? "" : ", ") + std::to_string(k.ops.size()) + " ops fused";
    if (k.kind == kernel_kind::dma || k.in_place)
      extra += (extra.empty() ? "" : ", ") + std::string(k.in_place ? "in place" : "row copy");
    std::snprintf(line, sizeof line, "%-36.36s %-7s %-8s %12s %7.1f%% %12s %10s  %s\n",
                  k.name.c_str(), to_string(k.kind), k.bound.c_str(),
                  detail::human_time(k.time_s).c_str(), 100 * k.mxu_utilization,
                  detail::human_bytes(double(k.hbm_bytes)).c_str(),
                  detail::human_bytes(double(k.vmem_bytes)).c_str(), extra.c_str());
    out += line;
  }
  return out;
}

FUSEDSL_DECL std::string json_report(const schedule& s, const cost_summary& c) {
  std::string o = "{\n";
  auto kv = [&](const char* k, const std::string& v, bool comma = true) {
    o += std::string("  ") + json_string(k) + ": " + v + (comma ? ",\n" : "\n");
  };
  kv("chip", json_string(c.chip));
  kv("chip_spec", "{\"mxu_dim\": " + std::to_string(s.chip.mxu_dim) +
                      ", \"mxus_per_core\": " + std::to_string(s.chip.mxus_per_core) +
                      ", \"cores_per_chip\": " + std::to_string(s.chip.cores_per_chip) +
                      ", \"vmem_bytes_per_core\": " + std::to_string(s.chip.vmem_bytes_per_core) +
                      ", \"hbm_bytes_per_s\": " + json_number(s.chip.hbm_bytes_per_s) +
                      ", \"peak_bf16_flops\": " + json_number(s.chip.peak_bf16_flops) +
                      ", \"int8_rate\": " + std::to_string(s.chip.int8_rate) +
                      ", \"clock_hz\": " + json_number(c.clock_hz) +
                      ", \"step_overhead_s\": " + json_number(s.chip.step_overhead_s) + "}");
  kv("total_time_s", json_number(c.total_time_s));
  kv("total_cycles", json_number(c.total_cycles));
  kv("roofline_time_s", json_number(c.roofline_time_s));
  kv("mxu_utilization", json_number(c.mxu_utilization));
  kv("matmul_flops", json_number(c.matmul_flops));
  kv("vector_flops", json_number(c.vector_flops));
  kv("hbm_bytes", std::to_string(c.hbm_bytes));
  kv("vmem_peak_bytes", std::to_string(c.vmem_peak_bytes));
  o += "  \"kernels\": [\n";
  for (std::size_t i = 0; i < c.kernels.size(); ++i) {
    const auto& k = c.kernels[i];
    o += "    {\"index\": " + std::to_string(i) + ", \"name\": " + json_string(k.name) +
         ", \"kind\": " + json_string(to_string(k.kind)) + ", \"bound\": " + json_string(k.bound) +
         ", \"start_s\": " + json_number(k.start_s) + ", \"time_s\": " + json_number(k.time_s) +
         ", \"cycles\": " + json_number(k.cycles) + ", \"mxu_s\": " + json_number(k.mxu_s) +
         ", \"vpu_s\": " + json_number(k.vpu_s) + ", \"dma_s\": " + json_number(k.dma_s) +
         ", \"overhead_s\": " + json_number(k.overhead_s) + ", \"roofline_s\": " +
         json_number(k.roofline_s) + ", \"flops\": " + json_number(k.flops) +
         ", \"mxu_utilization\": " + json_number(k.mxu_utilization) +
         ", \"hbm_bytes\": " + std::to_string(k.hbm_bytes) +
         ", \"vmem_bytes\": " + std::to_string(k.vmem_bytes) +
         ", \"steps\": " + std::to_string(k.steps);
    if (k.kind == kernel_kind::dma || k.in_place)
      o += std::string(", \"in_place\": ") + (k.in_place ? "true" : "false");
    if (k.kind == kernel_kind::matmul)
      o += ", \"matmul\": {\"batch\": " + std::to_string(k.mm.batch) + ", \"m\": " +
           std::to_string(k.mm.m) + ", \"k\": " + std::to_string(k.mm.k) + ", \"n\": " +
           std::to_string(k.mm.n) + ", \"mxu_passes\": " + std::to_string(k.mm.mxu_passes) +
           ", \"mxu_rate\": " + std::to_string(k.mm.mxu_rate) +
           ", \"bm\": " + std::to_string(k.blocks.bm) + ", \"bk\": " + std::to_string(k.blocks.bk) +
           ", \"bn\": " + std::to_string(k.blocks.bn) + "}";
    o += ", \"ops\": [";
    for (std::size_t j = 0; j < k.ops.size(); ++j) o += (j ? ", " : "") + json_string(k.ops[j]);
    o += "]}";
    o += i + 1 < c.kernels.size() ? ",\n" : "\n";
  }
  o += "  ],\n  \"ops\": [\n";
  bool first = true;
  for (std::size_t gi = 0; gi < s.groups.size(); ++gi)
    for (auto id : s.groups[gi].nodes) {
      const auto& n = s.graph.nodes[id];
      const auto& k = c.kernels[gi];
      if (!first) o += ",\n";
      first = false;
      o += "    {\"name\": " + json_string(n.name) +
           ", \"opcode\": " + json_string(hlo::to_string(n.inst->opcode)) +
           ", \"shape\": " + json_string(hlo::to_short_string(n.inst->shape)) +
           ", \"kernel\": " + std::to_string(gi) + ", \"unit\": " +
           json_string(k.kind == kernel_kind::layout        ? "none"
                       : n.inst->opcode == hlo::opcode::dot ? "MXU"
                       : is_row_copy(n.inst->opcode)        ? "DMA"
                                                            : "VPU") +
           ", \"fused\": " + (k.ops.size() > 1 ? "true" : "false") +
           ", \"kernel_time_s\": " + json_number(k.time_s) +
           ", \"bound\": " + json_string(k.bound) + "}";
    }
  o += "\n  ]\n}\n";
  return o;
}

}  // namespace fusedsl::tpu
