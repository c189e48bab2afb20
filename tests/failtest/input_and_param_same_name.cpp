// failtest: one name, "h", used for an input and for a param of the same graph; bound by name at
// run time, it would be ambiguous. The graph builder rejects it while flattening.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"h", float, 16, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto b = fd::param<"h", float, 64>();
#else
constexpr auto b = fd::param<"bias", float, 64>();
#endif
constexpr auto y = x + b;
constexpr const auto& g = fd::flatten(y);
static_assert(g.size() == 3);
