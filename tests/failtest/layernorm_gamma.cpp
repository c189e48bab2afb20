// failtest: layernorm of [16,128] with a gamma of size 64 (it must be the last axis' size, 128).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 128>();
constexpr auto beta = fd::param<"ln.beta", float, 128>();
#ifdef FUSEDSL_FAILTEST
constexpr auto gamma = fd::param<"ln.gamma", float, 64>();
#else
constexpr auto gamma = fd::param<"ln.gamma", float, 128>();
#endif
constexpr auto y = fd::layernorm(x, gamma, beta);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 4);
#endif
