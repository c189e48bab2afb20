#pragma once
// Chrome trace-event JSON of a schedule (opens in Perfetto / chrome://tracing): one process,
// threads "DMA", "MXU" and "VPU", one complete ("X") event per DMA transfer and compute step.
#include <string>

#include "fusedsl/tpu/json.hpp"
#include "fusedsl/tpu/schedule.hpp"

namespace fusedsl::tpu {

inline std::string chrome_trace(const schedule& s) {
  std::string o = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  const char* names[] = {"DMA", "MXU", "VPU"};
  for (int t = 0; t < 3; ++t)
    o +=
        "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": " + std::to_string(t + 1) +
        ", \"args\": {\"name\": \"" + names[t] + "\"}},\n";
  o += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": " +
       json_string("TPU " + s.chip.name) + "}}";
  for (const auto& e : s.tl.events) {
    const auto& k = s.kernels[e.kernel];
    std::string label = k.name;
    if (e.on == unit::dma) label += e.outbound ? " out" : " in";
    o += ",\n{\"name\": " + json_string(label) + ", \"cat\": " +
         json_string(to_string(k.kind)) + ", \"ph\": \"X\", \"pid\": 1, \"tid\": " +
         std::to_string(int(e.on) + 1) + ", \"ts\": " + json_number(e.start_s * 1e6) +
         ", \"dur\": " + json_number((e.end_s - e.start_s) * 1e6) +
         ", \"args\": {\"kernel\": " + std::to_string(e.kernel) + ", \"step\": " +
         std::to_string(e.step);
    if (e.on == unit::dma) o += ", \"bytes\": " + std::to_string(e.bytes);
    if (k.kind == kernel_kind::matmul) {
      const auto& w = k.steps[e.step];
      o += ", \"tile\": [" + std::to_string(w.tile[0]) + ", " + std::to_string(w.tile[1]) + ", " +
           std::to_string(w.tile[2]) + ", " + std::to_string(w.tile[3]) + "]";
    }
    o += "}}";
  }
  o += "\n]}\n";
  return o;
}

}  // namespace fusedsl::tpu
