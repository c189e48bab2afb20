// failtest: cross-attention whose key/value sequence has another batch size than the queries.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 2, 16, 64>();
#ifdef FUSEDSL_FAILTEST
constexpr auto enc = fd::input<"enc", float, 3, 24, 48>();
#else
constexpr auto enc = fd::input<"enc", float, 2, 24, 48>();
#endif
constexpr fd::nn::attention_options cross{.heads = 4, .context = true};
constexpr auto y = fd::nn::attention<"xattn", cross>(x, enc);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).size() > 0);
#endif
