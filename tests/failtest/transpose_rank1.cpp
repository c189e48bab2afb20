// failtest: transpose() of a vector (it swaps the last two axes, so it needs rank 2 or more).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

#ifdef FUSEDSL_FAILTEST
constexpr auto v = fd::input<"v", float, 64>();
#else
constexpr auto v = fd::input<"v", float, 1, 64>();
#endif
constexpr auto y = fd::transpose(v);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 2);
#endif
