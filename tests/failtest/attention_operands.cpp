// failtest: attention options that name a bias, called without one.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 64>();
constexpr auto bias = fd::input<"bias", float, 4, 16, 16>();
constexpr fd::nn::attention_options biased{.heads = 4, .bias = true};
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::nn::attention<"attn", biased>(x);
#else
constexpr auto y = fd::nn::attention<"attn", biased>(x, bias);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() > 0);
#endif
