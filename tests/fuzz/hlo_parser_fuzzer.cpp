// libFuzzer target for the HLO text parser. Any input must either parse or throw parse_error
// (never crash, hang, leak or throw anything else); whatever parses and prints must read back
// as the same module (parse(print(m)) == m) and print as StableHLO without failing.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/hlo/printer.hpp"
#include "fusedsl/hlo/stablehlo.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fusedsl::hlo;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  module m;
  try {
    m = parse_module(text);
  } catch (const parse_error&) {
    return 0;
  }
  std::string printed;
  try {
    printed = to_text(m);
  } catch (const ir_error&) {
    return 0;  // parsed but not printable (e.g. a name XLA reserves, such as "__x")
  }
  const module back = parse_module(printed);  // must not throw: our own output
  if (!(back == m) || to_text(back) != printed) {
    std::fprintf(stderr, "round trip changed the module:\n%s\n", printed.c_str());
    std::abort();
  }
  (void)to_stablehlo(m);
  return 0;
}
