// failtest: attention with 5 heads over d_model 128 (5 does not divide 128).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 128>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::nn::attention<"attn", 5>(x);
#else
constexpr auto y = fd::nn::attention<"attn", 4>(x);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() > 0);
#endif
// Flattening and compiling a program whose check failed adds no further error.
constexpr auto compiled = fd::compile(y);
static_assert(compiled.kernel_count() >= 0);
