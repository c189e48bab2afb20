// failtest: matmul with a rank-1 operand (fusedsl asks for an explicit reshape to [1,K] or [K,1]).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 4, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto v = fd::param<"v", float, 64>();
#else
constexpr auto v = fd::reshape<64, 1>(fd::param<"v", float, 64>());
#endif
constexpr auto y = fd::matmul(x, v);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 4);
#endif
