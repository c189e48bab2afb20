// failtest: matmul whose inner dimensions differ ([128,64] x [32,128]).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 128, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto w = fd::param<"w", float, 32, 128>();
#else
constexpr auto w = fd::param<"w", float, 64, 128>();
#endif
constexpr auto y = fd::matmul(x, w);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 3);
#endif
// Flattening and compiling a program whose check failed adds no further error.
constexpr auto compiled = fd::compile(y);
static_assert(compiled.kernel_count() >= 0);
