// failtest: softmax over axis 3 of a rank-3 tensor.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto s = fd::input<"scores", float, 4, 16, 16>();
#ifdef FUSEDSL_FAILTEST
constexpr auto y = fd::softmax<3>(s);
#else
constexpr auto y = fd::softmax<2>(s);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() == 2);
#endif
