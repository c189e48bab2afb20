// failtest: an input with an empty name (names bind tensors at run time, so one is required).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

#ifdef FUSEDSL_FAILTEST
constexpr auto x = fd::input<"", float, 16, 64>();
#else
constexpr auto x = fd::input<"x", float, 16, 64>();
#endif
constexpr auto y = fd::relu(x);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 2);
#endif
