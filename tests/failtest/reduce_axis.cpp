// failtest: sum over axis 2 of a rank-2 tensor (valid axes are -2..1).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::sum<2>(a);
#else
constexpr auto y = fd::sum<1, true>(a) + fd::mean<-2, true>(a);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 4);
#endif
