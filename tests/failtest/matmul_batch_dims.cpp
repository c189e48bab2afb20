// failtest: batched matmul whose batch dimensions (3 and 4) cannot be broadcast together.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 3, 16, 32>();
#ifdef FUSEDSL_FAILTEST
constexpr auto b = fd::input<"b", float, 4, 32, 8>();
#else
constexpr auto b = fd::input<"b", float, 1, 32, 8>();
#endif
constexpr auto y = fd::matmul(a, b);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 3);
#endif
