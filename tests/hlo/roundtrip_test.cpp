// parse(print(m)) == m over many randomly generated modules covering every opcode.
#include <doctest/doctest.h>

#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "random_module.hpp"

using namespace fusedsl::hlo;

TEST_CASE("parse(print(m)) == m and printing is a fixed point, for 400 random modules") {
  std::size_t instructions = 0;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    CAPTURE(seed);
    module m = testing::random_module_generator(seed).generate();
    const std::string text = to_text(m);
    module back = parse_module(text);
    REQUIRE(back == m);
    REQUIRE(to_text(back) == text);
    instructions += m.entry_computation().instructions.size();
  }
  CHECK(instructions > 400 * 20);
}

TEST_CASE("the random modules use every opcode of the IR") {
  std::vector<bool> seen(std::size(all_opcodes), false);
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    module m = testing::random_module_generator(seed).generate();
    for (const computation& c : m.computations)
      for (const instruction& in : c.instructions) seen[static_cast<std::size_t>(in.opcode)] = true;
  }
  for (opcode op : all_opcodes) {
    CAPTURE(to_string(op));
    CHECK(seen[static_cast<std::size_t>(op)]);
  }
}
