// failtest: exp() of a boolean tensor (the result of a comparison).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
constexpr auto mask = a > fd::lit<0.0>;
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::exp(mask);
#else
constexpr auto y = fd::where(mask, fd::exp(a), a);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 5);
#endif
