// failtest: a + b where the trailing axes (64 and 32) are neither equal nor 1.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto b = fd::param<"b", float, 32>();
#else
constexpr auto b = fd::param<"b", float, 64>();
#endif
constexpr auto y = a + b;
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 3);
#endif
// Flattening and compiling a program whose check failed adds no further error.
constexpr auto compiled = fd::compile(y);
static_assert(compiled.kernel_count() >= 0);
