// failtest: where() whose predicate is a float tensor instead of a comparison's boolean result.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
constexpr auto b = fd::input<"b", float, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::where(a, a, b);
#else
constexpr auto y = fd::where(a > b, a, b);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 4);
#endif
