#pragma once
// The models benchmarks/race races, as fusedsl types. race.py holds the same list (MODELS) with
// the shapes spelled out for the Python peers; `race_<model> --describe` prints what the program
// binds, and the driver checks the two agree.
#include "fusedsl/models/transformer.hpp"

namespace fusedsl_race {

namespace fd = fusedsl;

// The seeds' section 11 model: 2 post-LN layers, d_model 128, 4 heads, FFN 512, seq 128.
using seed = fd::models::seed;
// 2 post-LN layers, d_model 512, 8 heads, FFN 2048, seq 512.
using medium = fd::models::medium;
// GPT-2 small's transformer stack (no embeddings, no final layernorm, no LM head): 12 pre-LN causal
// layers, d_model 768, 12 heads, FFN 3072, GELU-tanh; at seq 128 and seq 1024.
using gpt2_seq128 = fd::models::gpt2_small<12>;
using gpt2_seq1024 = fd::models::transformer<1024, 768, 12, 3072, 12, fd::nn::pre_ln, true>;
// Small shapes of both block kinds, for `scripts/bench --quick` (agreement only, no timing).
using quick_post_ln = fd::models::transformer<32, 64, 4, 128, 2>;
using quick_pre_ln = fd::models::transformer<48, 64, 4, 256, 3, fd::nn::pre_ln, true>;

}  // namespace fusedsl_race
