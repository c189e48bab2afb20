#pragma once
// Run-time errors. Every error names the thing at fault in the user's terms.
#include <stdexcept>
#include <string>

namespace fusedsl {

struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A binding (input or parameter) is missing, unknown, or of the wrong shape or dtype.
struct binding_error : error {
  using error::error;
};

}  // namespace fusedsl
