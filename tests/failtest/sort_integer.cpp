// failtest: sorting i32 values (the order is defined for floating-point tensors).
#include "fusedsl/expr/sort.hpp"
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

#ifdef FUSEDSL_FAILTEST
constexpr auto a = fd::input<"a", std::int32_t, 4, 8>();
#else
constexpr auto a = fd::input<"a", float, 4, 8>();
#endif
constexpr auto s = fd::argsort<0>(a);
static_assert(decltype(s)::type == fd::dtype::i32);
