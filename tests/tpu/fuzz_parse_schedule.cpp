// libFuzzer target: HLO text -> parse -> schedule on v5e -> execute on random inputs. Text the
// parser rejects must raise parse_error/ir_error; a module it accepts must schedule and run or
// raise tpu_error naming what is unsupported. Anything else (a crash, another exception, a
// sanitizer report, a hang) is a bug. Built and run for a bounded time by run_fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/tpu/execute.hpp"
#include "fusedsl/tpu/inputs.hpp"
#include "fusedsl/tpu/schedule.hpp"

namespace {

// Keeps each run small: modules with big arrays are scheduled but not executed.
bool small_enough(const fusedsl::hlo::module& m) {
  for (const auto& c : m.computations)
    for (const auto& in : c.instructions)
      if (in.shape.is_array() && in.shape.element_count() > (1 << 14)) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace hlo = fusedsl::hlo;
  namespace tpu = fusedsl::tpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  hlo::module m;
  try {
    m = hlo::parse_module(text);
  } catch (const hlo::parse_error&) {
    return 0;
  } catch (const hlo::ir_error&) {
    return 0;
  }
  try {
    const auto s = tpu::make_schedule(m, tpu::chip_by_name("v5e"));
    if (small_enough(m)) tpu::execute(s, tpu::random_inputs(m, 1));
  } catch (const tpu::tpu_error&) {
  } catch (const hlo::ir_error&) {
  }
  return 0;
}
