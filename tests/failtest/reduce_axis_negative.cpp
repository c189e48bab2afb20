// failtest: mean over axis -3 of a rank-2 tensor (negative axes count from the end, down to -rank).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::mean<-3>(a);
#else
constexpr auto y = fd::mean<-2>(a);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 2);
#endif
