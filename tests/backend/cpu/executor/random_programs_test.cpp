// Property test: random programs (random_programs.hpp) of elementwise, broadcast, reduce, layout
// and gather ops over odd shapes, with NaN and +-inf among the inputs, run by the generated
// kernels and compared with the reference backend element by element (NaN where the reference
// has NaN, the same infinities, finite values within 1e-4 relative); each must run with no group
// in the interpreter, so the interpreter cannot pass it. FUSEDSL_RANDOM_FIRST and
// FUSEDSL_RANDOM_COUNT (set by CMake) choose this translation unit's seeds.
#include <cmath>
#include <limits>
#include <random>

#include "check.hpp"
#include "random_programs.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;

namespace {

// Normal values with NaN, +inf and -inf at about 2% of the positions each.
template <class Exec>
ft::bound_program bind_with_edges(Exec& ex, unsigned seed) {
  ft::bound_program b;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const auto infos = ex.bindings();
  b.storage.reserve(infos.size());
  b.names.reserve(infos.size());
  for (const auto& info : infos) {
    b.storage.emplace_back(info.type, info.shape);
    float* d = b.storage.back().data<float>();
    for (std::int64_t i = 0; i < info.shape.size(); ++i) {
      const unsigned u = rng() % 50;
      d[i] = u == 0 ? std::numeric_limits<float>::quiet_NaN()
           : u == 1 ? std::numeric_limits<float>::infinity()
           : u == 2 ? -std::numeric_limits<float>::infinity()
                    : nd(rng);
    }
    ex.bind(info.name, b.storage.back().ref());
    b.names.push_back(info.name);
    b.refs.push_back({b.names.back(), b.storage.back().ref()});
  }
  return b;
}

template <unsigned Seed>
void check_seed() {
  using P = decltype(fd::compile(ft::random_program_t<Seed, 0>{}, ft::random_program_t<Seed, 1>{}));
  fd::cpu::executor<P> ex{P{}};
  auto b = bind_with_edges(ex, Seed);
  INFO("seed " << Seed << "\n" << fd::graph::to_text(fd::graph::graph_view(P::graph)));
  CHECK(ft::compare_with_reference(ex, b, ft::rel_tol(1e-4), ft::nans::expected));
  CHECK(ex.stats().interpreted_groups == 0);
}

template <unsigned First, unsigned... I>
void check_seeds(std::integer_sequence<unsigned, I...>) {
  (check_seed<First + I>(), ...);
}

}  // namespace

TEST_CASE("random elementwise, broadcast, reduce and layout programs match the reference") {
  check_seeds<FUSEDSL_RANDOM_FIRST>(std::make_integer_sequence<unsigned, FUSEDSL_RANDOM_COUNT>{});
}
