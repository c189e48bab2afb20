#pragma once
// Deprecated path, kept for one release: models/ holds the model definitions, their runtimes live
// in fusedsl/runtime/ and the model-directory reader in fusedsl/io/.
// Include "fusedsl/runtime/bert_bucket.hpp".
#pragma message("fusedsl/models/bert_bucket.hpp is deprecated: " \
                "include fusedsl/runtime/bert_bucket.hpp")
#include "fusedsl/runtime/bert_bucket.hpp"
