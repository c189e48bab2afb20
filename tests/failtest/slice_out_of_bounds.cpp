// failtest: slice [32, 80) of an axis of size 64.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::slice<1, 32, 80>(a);
#else
constexpr auto y = fd::slice<1, 32, 64>(a);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 2);
#endif
