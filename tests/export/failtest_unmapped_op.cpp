// failtest: exporting a graph that holds an op the HLO mapping does not cover is a compile error
// naming the op. Every fusedsl op has a mapping today, so the ko build checks against a mapping
// without erf (as a newly added op_kind without a mapping would be).
#include "fusedsl/compile.hpp"
#include "fusedsl/export/export.hpp"
namespace fd = fusedsl;

struct mapping_without_erf {
  static constexpr bool has(fd::graph::op_kind k) {
#ifdef FUSEDSL_FAILTEST
    if (k == fd::graph::op_kind::erf) return false;
#endif
    return fd::hlo::hlo_mapping::has(k);
  }
};

constexpr auto x = fd::input<"x", float, 4, 8>();
constexpr auto p = fd::compile(fd::erf(x) + x);
static_assert(fd::hlo::check_exportable<decltype(p), mapping_without_erf>());
