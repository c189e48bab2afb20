// failtest: the param "w" is declared twice in one graph with two shapes; the graph builder rejects
// it while flattening, in constant evaluation.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 64>();
constexpr auto w1 = fd::param<"w", float, 64, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto w2 = fd::param<"w", float, 64, 32>();
#else
constexpr auto w2 = fd::param<"w2", float, 64, 32>();
#endif
constexpr auto y = fd::matmul(fd::matmul(x, w1), w2);
constexpr const auto& g = fd::flatten(y);
static_assert(g.size() == 5);
