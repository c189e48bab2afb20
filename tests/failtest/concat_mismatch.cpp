// failtest: concat along axis 0 of [8,64] and [4,32] (they differ outside the axis).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto b = fd::input<"b", float, 4, 32>();
#else
constexpr auto b = fd::input<"b", float, 4, 64>();
#endif
constexpr auto y = fd::concat<0>(a, b);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 3);
#endif
