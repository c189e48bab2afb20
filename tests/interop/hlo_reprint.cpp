// Reads HLO text with our parser and writes it back with our printer (the interop tests run the
// original and the reprinted module in XLA and require bitwise-equal outputs).
// Usage: fusedsl_hlo_reprint <in.hlo> <out.hlo>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "fusedsl/hlo/parser.hpp"
#include "fusedsl/hlo/printer.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " <in.hlo> <out.hlo>\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << argv[1] << ": cannot open\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const fusedsl::hlo::module m = fusedsl::hlo::parse_module(text.str());
    const std::filesystem::path out = argv[2];
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    std::ofstream(out) << fusedsl::hlo::to_text(m);
  } catch (const std::exception& e) {
    std::cerr << argv[1] << ":" << e.what() << "\n";
    return 1;
  }
  return 0;
}
