// failtest: quantize to a type that is not int8 or uint8.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 4, 8>();
constexpr auto s = fd::input<"s", float, 4, 1>();
#ifdef FUSEDSL_FAILTEST
constexpr auto q = fd::quantize<std::int32_t>(x, s);
#else
constexpr auto q = fd::quantize<std::int8_t>(x, s);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(q).size() > 0);
#endif
