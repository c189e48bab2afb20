// failtest: a uint8 quantization whose zero point is int8.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 4, 8>();
constexpr auto s = fd::input<"s", float, 4, 1>();
#ifdef FUSEDSL_FAILTEST
constexpr auto z = fd::input<"z", std::int8_t, 4, 1>();
#else
constexpr auto z = fd::input<"z", std::uint8_t, 4, 1>();
#endif
constexpr auto q = fd::quantize<std::uint8_t>(x, s, z);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(q).size() > 0);
#endif
