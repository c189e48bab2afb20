// failtest: the 9 largest of an axis of 8.
#include "fusedsl/expr/sort.hpp"
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto a = fd::input<"a", float, 4, 8>();
#ifdef FUSEDSL_FAILTEST
constexpr auto t = fd::top_k<9>(a);
#else
constexpr auto t = fd::top_k<8>(a);
#endif
#ifndef FUSEDSL_FAILTEST
static_assert(decltype(t.values)::shape == fd::make_dims(4, 8));
#endif
