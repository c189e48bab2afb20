// failtest: f32 + bf16 without a cast (fusedsl never promotes silently).
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 8, 64>();
constexpr auto b = fd::input<"b", fd::bf16, 8, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = a + b;
#else
constexpr auto y = a + fd::cast<float>(b);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 4);
#endif
