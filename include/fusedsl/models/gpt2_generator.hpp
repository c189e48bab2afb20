#pragma once
// Deprecated path, kept for one release: models/ holds the model definitions, their runtimes live
// in fusedsl/runtime/ and the model-directory reader in fusedsl/io/.
// Include "fusedsl/runtime/gpt2_generator.hpp".
#pragma message("fusedsl/models/gpt2_generator.hpp is deprecated: " \
                "include fusedsl/runtime/gpt2_generator.hpp")
#include "fusedsl/runtime/gpt2_generator.hpp"
