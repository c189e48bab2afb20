// failtest: -ffinite-math-only (here through -ffast-math, the build's OPTIONS) is refused unless
// FUSEDSL_ALLOW_FINITE_MATH says the caller accepts wrong results for masks and non-finite inputs
// (core/config.hpp). The ok build defines it and must compile with the same options.
#ifndef FUSEDSL_FAILTEST
#define FUSEDSL_ALLOW_FINITE_MATH
#endif
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 8, 64>();
constexpr auto y = fd::softmax(x);
static_assert(fd::flatten(y).size() > 0);
