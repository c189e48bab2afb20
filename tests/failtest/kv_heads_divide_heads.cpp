// failtest: grouped-query attention with 8 heads and 3 key/value heads (3 does not divide 8).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 128>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::nn::attention<"attn", 8, 3>(x);
#else
constexpr auto y = fd::nn::attention<"attn", 8, 2>(x);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() > 0);
#endif
