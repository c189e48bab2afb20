#pragma once
// Deprecated path, kept for one release: models/ holds the model definitions, their runtimes live
// in fusedsl/runtime/ and the model-directory reader in fusedsl/io/.
// Include "fusedsl/runtime/sentence_embedder.hpp".
#pragma message("fusedsl/models/sentence_embedder.hpp is deprecated: " \
                "include fusedsl/runtime/sentence_embedder.hpp")
#include "fusedsl/runtime/sentence_embedder.hpp"
