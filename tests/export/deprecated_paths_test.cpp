// The exporter's headers at their old paths (fusedsl/hlo/export.hpp, export_sharding.hpp,
// xla_cpu_fusion.hpp), kept for one release with a deprecation message: a program that includes
// them still builds and exports.
#include <doctest/doctest.h>

#include <string>

#include "fusedsl/fusedsl.hpp"
#include "fusedsl/hlo/export.hpp"
#include "fusedsl/hlo/export_sharding.hpp"
#include "fusedsl/hlo/xla_cpu_fusion.hpp"

namespace fd = fusedsl;

TEST_CASE("the old paths still export a program") {
  constexpr auto x = fd::input<"x", float, 2, 3>();
  constexpr auto w = fd::param<"w", float, 3, 4>();
  const auto program = fd::compile(fd::relu(fd::matmul(x, w)));
  const std::string text = fd::hlo::to_text(program);
  CHECK(text.find("ENTRY") != std::string::npos);
  CHECK(text.find("dot(") != std::string::npos);
  const fd::hlo::device_mesh mesh{{{"model", 2}}};
  CHECK(mesh.device_count() == 2);
}
