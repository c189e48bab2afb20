#pragma once
// Errors raised by the TPU-style backend: bad chip specs, modules it cannot schedule, bad inputs.
#include <stdexcept>
#include <string>

namespace fusedsl::tpu {

struct tpu_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace fusedsl::tpu
