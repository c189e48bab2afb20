// models/bert.hpp on a small BERT (2 layers, 32 wide, 4 heads, FFN 64, vocabulary 50): the CPU
// executor's generated kernels against the unfused reference backend, the checkpoint's names and
// shapes, what the key-padding mask does, and the plan (every group a generated kernel).
#include "fusedsl/models/bert.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/backend/reference/evaluate.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;
namespace models = fusedsl::models;

namespace {

using small = models::bert_config<2, 32, 4, 64, 1e-12, float, 50, 16, 2>;
constexpr std::int64_t B = 3, L = 8;
constexpr auto batch_program = fd::compile(
    models::bert_sentence_embeddings<small>(models::bert_ids<B, L>(), models::bert_mask<B, L>()));
constexpr auto one_program = fd::compile(
    models::bert_sentence_embeddings<small>(models::bert_ids<L>(), models::bert_mask<L>()));

struct weights {
  std::vector<std::string> names;
  std::vector<fd::dynamic_tensor> tensors;
};

// Random weights for every param of the program (LayerNorm gammas near 1).
weights random_weights(const std::vector<fd::graph::binding_info>& infos) {
  weights w;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.2f);
  for (const auto& b : infos) {
    if (b.kind != fd::graph::op_kind::param) continue;
    w.names.push_back(b.name);
    w.tensors.emplace_back(b.type, b.shape);
    const bool gamma = b.name.ends_with("LayerNorm.weight");
    for (std::int64_t i = 0; i < b.shape.size(); ++i)
      w.tensors.back().data<float>()[i] = (gamma ? 1.0f : 0.0f) + nd(rng);
  }
  return w;
}

// Sentences of 8, 5 and 2 tokens (ids 1..49), padded with 0.
struct batch_inputs {
  std::vector<std::int32_t> ids = std::vector<std::int32_t>(B * L, 0);
  std::vector<unsigned char> mask = std::vector<unsigned char>(B * L, 0);
  batch_inputs() {
    const int lengths[B] = {8, 5, 2};
    for (int r = 0; r < B; ++r)
      for (int t = 0; t < lengths[r]; ++t) {
        ids[std::size_t(r * L + t)] = 1 + (7 * r + 3 * t) % 49;
        mask[std::size_t(r * L + t)] = 1;
      }
  }
};

template <class Program>
std::vector<float> run_cpu(const Program& p, const weights& w, std::int32_t* ids,
                           unsigned char* mask, fd::dims in, fd::dims out_shape, int threads = 1) {
  fd::cpu::executor ex{p, fd::cpu::threads{threads}};
  for (std::size_t i = 0; i < w.names.size(); ++i)
    ex.bind(w.names[i], const_cast<fd::dynamic_tensor&>(w.tensors[i]).ref());
  models::bind_input(ex, "input_ids", fd::tensor_ref{ids, fd::dtype::i32, in});
  models::bind_input(ex, "attention_mask", fd::tensor_ref{mask, fd::dtype::boolean, in});
  std::vector<float> out(std::size_t(out_shape.size()));
  ex.bind_output(0, fd::tensor_ref{out.data(), fd::dtype::f32, out_shape});
  ex.run();
  CHECK(ex.stats().interpreted_groups == 0);
  return out;
}

}  // namespace

TEST_CASE("the BERT encoder declares the checkpoint's names and shapes ([out, in] weights)") {
  fd::cpu::executor ex{batch_program};
  std::vector<std::string> params;
  for (const auto& b : ex.bindings()) {
    if (b.kind != fd::graph::op_kind::param) continue;
    params.push_back(b.name + " " + fd::to_string(b.shape));
  }
  CHECK(params.size() == 5 + 2 * 16);
  const auto has = [&](const std::string& s) {
    return std::find(params.begin(), params.end(), s) != params.end();
  };
  CHECK(has("embeddings.word_embeddings.weight [50,32]"));
  CHECK(has("embeddings.position_embeddings.weight [16,32]"));
  CHECK(has("embeddings.token_type_embeddings.weight [2,32]"));
  CHECK(has("embeddings.LayerNorm.weight [32]"));
  CHECK(has("embeddings.LayerNorm.bias [32]"));
  for (int l = 0; l < 2; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value",
                          "attention.output.dense"}) {
      CHECK(has(p + n + ".weight [32,32]"));
      CHECK(has(p + n + ".bias [32]"));
    }
    CHECK(has(p + "intermediate.dense.weight [64,32]"));
    CHECK(has(p + "intermediate.dense.bias [64]"));
    CHECK(has(p + "output.dense.weight [32,64]"));
    CHECK(has(p + "output.dense.bias [32]"));
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      CHECK(has(p + n + ".weight [32]"));
      CHECK(has(p + n + ".bias [32]"));
    }
  }
}

TEST_CASE("every group of the encoder is a generated kernel: one attention kernel per layer") {
  int attention = 0, interpreted = 0;
  const auto& lp = fd::cpu::executor<decltype(batch_program)>::kernels_plan();
  for (int gi = 0; gi < batch_program.fusion.n_groups; ++gi) {
    attention +=
        batch_program.fusion.groups[std::size_t(gi)].kind == fd::plan::group_kind::attention;
    interpreted += lp.desc[std::size_t(gi)].refused();
  }
  CHECK(attention == 1);  // the layers are one repeated body
  CHECK(interpreted == 0);
  const auto& lp1 = fd::cpu::executor<decltype(one_program)>::kernels_plan();
  for (int gi = 0; gi < one_program.fusion.n_groups; ++gi)
    CHECK_FALSE(lp1.desc[std::size_t(gi)].refused());
  const std::string plan =
      fd::plan::print_plan(batch_program.graph, batch_program.fusion, batch_program.memory);
  CHECK(plan.find("generated attention kernel") != std::string::npos);
}

TEST_CASE("the generated kernels compute what the unfused reference backend does") {
  fd::cpu::executor probe{batch_program};
  const weights w = random_weights(probe.bindings());
  batch_inputs in;
  fd::reference::evaluator ev{batch_program.graph};
  for (std::size_t i = 0; i < w.names.size(); ++i)
    ev.bind(w.names[i], const_cast<fd::dynamic_tensor&>(w.tensors[i]).ref());
  ev.bind("input_ids", fd::tensor_ref{in.ids.data(), fd::dtype::i32, fd::make_dims(B, L)});
  ev.bind("attention_mask",
          fd::tensor_ref{in.mask.data(), fd::dtype::boolean, fd::make_dims(B, L)});
  const std::vector<fd::dynamic_tensor> ref = ev.run();
  const std::vector<float> want(ref[0].data<float>(), ref[0].data<float>() + B * 32);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const std::vector<float> got = run_cpu(batch_program, w, in.ids.data(), in.mask.data(),
                                           fd::make_dims(B, L), fd::make_dims(B, 32), threads);
    CHECK(ft::compare(got, want, ft::abs_tol(2e-6)));
  }
  for (int r = 0; r < B; ++r) {  // unit vectors
    double n = 0;
    for (int c = 0; c < 32; ++c)
      n += double(want[std::size_t(r * 32 + c)]) * want[std::size_t(r * 32 + c)];
    CHECK(std::sqrt(n) == doctest::Approx(1.0).epsilon(1e-6));
  }
}

TEST_CASE("padding changes nothing: a sentence embeds alike in any row and any length") {
  fd::cpu::executor probe{batch_program};
  const weights w = random_weights(probe.bindings());
  batch_inputs in;
  const std::vector<float> batch = run_cpu(batch_program, w, in.ids.data(), in.mask.data(),
                                           fd::make_dims(B, L), fd::make_dims(B, 32));
  for (int r = 0; r < B; ++r) {
    CAPTURE(r);
    // The row alone, as one sequence, with other ids in its padding (the mask hides them).
    std::vector<std::int32_t> ids(in.ids.begin() + r * L, in.ids.begin() + (r + 1) * L);
    std::vector<unsigned char> mask(in.mask.begin() + r * L, in.mask.begin() + (r + 1) * L);
    for (int t = 0; t < L; ++t)
      if (!mask[std::size_t(t)]) ids[std::size_t(t)] = 42;
    const std::vector<float> one =
        run_cpu(one_program, w, ids.data(), mask.data(), fd::make_dims(L), fd::make_dims(32));
    const std::vector<float> row(batch.begin() + r * 32, batch.begin() + (r + 1) * 32);
    CHECK(ft::compare(one, row, ft::abs_tol(2e-6)));
  }
  SUBCASE("a row with no token gives zeros, not NaN") {
    std::vector<std::int32_t> ids(L, 3);
    std::vector<unsigned char> mask(L, 0);
    const std::vector<float> zero =
        run_cpu(one_program, w, ids.data(), mask.data(), fd::make_dims(L), fd::make_dims(32));
    CHECK(ft::compare(zero, std::vector<float>(32, 0.0f), ft::exact()));
  }
}
