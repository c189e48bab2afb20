// failtest: matmul of an f32 activation by a bf16 weight without a cast.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 64>();
constexpr auto w = fd::param<"w", fd::bf16, 64, 32>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::matmul(x, w);
#else
constexpr auto y = fd::matmul(x, fd::cast<float>(w));
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 4);
#endif
