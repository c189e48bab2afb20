#pragma once
// Deprecated path, kept for one release: models/ holds the model definitions, their runtimes live
// in fusedsl/runtime/ and the model-directory reader in fusedsl/io/.
// Include "fusedsl/io/sentence_model.hpp".
#pragma message("fusedsl/models/sentence_model.hpp is deprecated: " \
                "include fusedsl/io/sentence_model.hpp")
#include "fusedsl/io/sentence_model.hpp"
