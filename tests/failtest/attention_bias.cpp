// failtest: an attention bias whose last axis is not the keys' length (nor 1).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto bias = fd::input<"bias", float, 4, 16, 15>();
#else
constexpr auto bias = fd::input<"bias", float, 4, 16, 16>();
#endif
constexpr fd::nn::attention_options biased{.heads = 4, .bias = true};
constexpr auto y = fd::nn::attention<"attn", biased>(x, bias);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() > 0);
#endif
