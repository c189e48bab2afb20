// failtest: a state read by a kernel that runs after the one writing its new value.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto cache = fd::state<"cache", float, 8, 4>();
constexpr auto row = fd::input<"row", float, 1, 4>();
constexpr auto pos = fd::input<"pos", std::int32_t>();
constexpr auto next = fd::dynamic_update_slice<0>(cache, row, pos);
#ifdef FUSEDSL_FAILTEST
// the old value, read by a kernel that needs a sum of the new one, so runs after the update
constexpr auto late = fd::sum<0>(cache + fd::sum<0>(fd::exp(next)));
#else
constexpr auto late = fd::sum<0>(fd::exp(next));
#endif
constexpr auto compiled = fd::compile(late, fd::update(cache, next));
static_assert(compiled.kernel_count() >= 2);
