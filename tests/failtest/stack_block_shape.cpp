// failtest: stack of a block that changes the shape ([16,128] -> [16,64]), so it cannot repeat.
#include "fusedsl/fusedsl.hpp"
namespace fd = fusedsl;

constexpr auto x = fd::input<"x", float, 16, 128>();
#ifdef FUSEDSL_FAILTEST
constexpr auto body = fd::nn::block([](auto h) { return fd::slice<1, 0, 64>(h); });
#else
constexpr auto body = fd::nn::block([](auto h) { return h + fd::gelu(h); });
#endif
constexpr auto y = fd::nn::stack<"layers", 3>(body, x);
#ifndef FUSEDSL_FAILTEST
static_assert(fd::flatten(y).n_regions == 2);
#endif
// Flattening and compiling a program whose check failed adds no further error.
constexpr auto compiled = fd::compile(y);
static_assert(compiled.kernel_count() >= 0);
