// failtest: permute<0, 0, 2> repeats axis 0, so it is not a permutation of the three axes.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 2, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::permute<0, 0, 2>(a);
#else
constexpr auto y = fd::permute<1, 0, 2>(a);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 2);
#endif
