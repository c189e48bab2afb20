// failtest: update rows of 16 values scattered into a table whose rows hold 32.
#include "fusedsl/expr/scatter.hpp"
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto table = fd::param<"table", float, 10, 32>();
constexpr auto ids = fd::input<"ids", std::int32_t, 4>();
#ifdef FUSEDSL_FAILTEST
constexpr auto rows = fd::input<"rows", float, 4, 16>();
#else
constexpr auto rows = fd::input<"rows", float, 4, 32>();
#endif
constexpr auto y = fd::scatter_add(table, ids, rows);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() > 3);
#endif
