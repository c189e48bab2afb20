// failtest: reshape [8,64] (512 elements) to [8,32] (256 elements).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::reshape<8, 32>(a);
#else
constexpr auto y = fd::reshape<16, 32>(a);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 2);
#endif
