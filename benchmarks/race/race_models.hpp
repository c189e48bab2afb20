#pragma once
// The models benchmarks/race races, as fusedsl types. race.py holds the same list (MODELS) with
// the shapes spelled out for the Python peers; `race_<model> --describe` prints what the program
// binds, and the driver checks the two agree.
#include "fusedsl/models/bf16_weights.hpp"
#include "fusedsl/models/llama.hpp"
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
// The seed and medium models with bf16 weights (every linear's weight a bf16 param read through
// cast<float>; activations, biases and layernorms f32), run with cpu::amx_bf16{}.
using seed_bf16 = fd::models::seed_bf16_weights;
using medium_bf16 = fd::models::medium_bf16_weights;
// One LLaMA-style block (models/llama.hpp): RMSNorm, RoPE, grouped-query causal attention, SwiGLU;
// x and the rotary angles' cos and sin are inputs.
template <std::int64_t Seq, std::int64_t DModel, int Heads, int KvHeads, std::int64_t Hidden>
using llama_model = fd::models::llama_block_model<Seq, DModel, Heads, KvHeads, Hidden>;
// 8 heads of 64 with 2 kv heads, SwiGLU 1376, d_model 512, seq 256 (generated_bench's block).
using llama = llama_model<256, 512, 8, 2, 1376>;
// The models whose linear weights are bf16 (run with cpu::amx_bf16{}).
template <class Model>
inline constexpr bool bf16_weights = false;
template <>
inline constexpr bool bf16_weights<seed_bf16> = true;
template <>
inline constexpr bool bf16_weights<medium_bf16> = true;
// Small shapes of the three block kinds, for `scripts/bench --quick` (agreement only, no timing).
using quick_post_ln = fd::models::transformer<32, 64, 4, 128, 2>;
using quick_pre_ln = fd::models::transformer<48, 64, 4, 256, 3, fd::nn::pre_ln, true>;
using quick_llama = llama_model<40, 64, 4, 2, 96>;

}  // namespace fusedsl_race
