// io::bind_checkpoint on small checkpoints written by the safetensors writer: a whole program
// bound in one call (views into the file where the dtype matches, converted copies where it does
// not), and one error naming every tensor at fault.
#include "fusedsl/io/checkpoint.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "fusedsl/backend/cpu/executor.hpp"
#include "fusedsl/fusedsl.hpp"
#include "fusedsl/io/safetensors_writer.hpp"
#include "fusedsl/models/bert.hpp"

namespace fd = fusedsl;
namespace ft = fusedsl::test;
namespace io = fusedsl::io;

namespace {

// y = x @ w^T + b with w [3, 4] stored [out, in], read through matmul<false, true>.
constexpr auto x = fd::input<"x", float, 2, 4>();
constexpr auto w = fd::param<"dense.weight", float, 3, 4>();
constexpr auto b = fd::param<"dense.bias", float, 3>();
constexpr auto y = fd::matmul<false, true>(x, w) + b;
constexpr auto program = fd::compile(y);

// The same with bf16 weights.
constexpr auto wb = fd::param<"dense.weight", fd::bf16, 3, 4>();
constexpr auto bb = fd::param<"dense.bias", fd::bf16, 3>();
constexpr auto yb = fd::matmul<false, true>(x, fd::cast<float>(wb)) + fd::cast<float>(bb);
constexpr auto program_bf16 = fd::compile(yb);

const std::vector<float> weight = {1, 2, 3, 4, -1, 0.5f, 0.25f, 2, 0, 1, 0, -3};
const std::vector<float> bias = {0.5f, -1, 2};
const std::vector<float> input = {1, 0, -1, 2, 0.5f, 0.5f, 1, -2};

std::vector<float> expected() {
  std::vector<float> r(6);
  for (int i = 0; i < 2; ++i)
    for (int o = 0; o < 3; ++o) {
      float s = bias[std::size_t(o)];
      for (int k = 0; k < 4; ++k)
        s += input[std::size_t(i * 4 + k)] * weight[std::size_t(o * 4 + k)];
      r[std::size_t(i * 3 + o)] = s;
    }
  return r;
}

template <class T>
std::vector<T> narrowed(const std::vector<float>& v) {
  std::vector<T> r;
  for (float f : v) r.push_back(T(f));
  return r;
}

// A checkpoint in memory: the file's bytes, parsed (the string outlives the file object).
struct memory_checkpoint {
  std::string bytes;
  io::safetensors_file file;
  explicit memory_checkpoint(const std::vector<io::safetensors_entry>& entries)
      : bytes(io::serialize_safetensors(entries)),
        file(io::safetensors_file::parse(
            std::as_bytes(std::span<const char>(bytes.data(), bytes.size())),
            "model.safetensors")) {}
};

template <class Program>
std::vector<float> run_bound(fd::cpu::executor<Program>& ex) {
  std::vector<float> in = input, out(6);
  ex.bind("x", fd::tensor_ref{in.data(), fd::dtype::f32, fd::make_dims(2, 4)});
  ex.bind_output(0, fd::tensor_ref{out.data(), fd::dtype::f32, fd::make_dims(2, 3)});
  ex.run();
  return out;
}

std::string error_of(const std::vector<io::safetensors_entry>& entries,
                     io::checkpoint_options o = {}) {
  const memory_checkpoint c(entries);
  fd::cpu::executor ex{program};
  try {
    io::bind_checkpoint(ex, c.file, o);
  } catch (const io::checkpoint_error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("bind_checkpoint binds every parameter by name, as views into the file") {
  const memory_checkpoint c({io::make_safetensors_entry<float>("dense.weight", weight, {3, 4}),
                             io::make_safetensors_entry<float>("dense.bias", bias, {3})});
  fd::cpu::executor ex{program};
  const io::checkpoint_binding bound = io::bind_checkpoint(ex, c.file);
  CHECK(bound.bound.size() == 2);
  CHECK(bound.converted.empty());
  CHECK(bound.ignored.empty());
  CHECK(bound.storage.empty());  // nothing copied: the executor reads the file's bytes
  CHECK(ft::compare(run_bound(ex), expected(), ft::rel_tol(1e-6)));
}

TEST_CASE("f16 and bf16 tensors convert to an f32 program; f32 tensors to a bf16 one") {
  const std::vector<fd::f16> wh = narrowed<fd::f16>(weight), bh = narrowed<fd::f16>(bias);
  const std::vector<fd::bf16> wbf = narrowed<fd::bf16>(weight), bbf = narrowed<fd::bf16>(bias);
  SUBCASE("f16 into f32") {
    const memory_checkpoint c({io::make_safetensors_entry<fd::f16>("dense.weight", wh, {3, 4}),
                               io::make_safetensors_entry<fd::f16>("dense.bias", bh, {3})});
    fd::cpu::executor ex{program};
    const io::checkpoint_binding bound = io::bind_checkpoint(ex, c.file);
    CHECK(bound.converted ==
          std::vector<std::string>{"dense.weight (F16 -> f32)", "dense.bias (F16 -> f32)"});
    CHECK(bound.storage.size() == 2);
    CHECK(
        ft::compare(run_bound(ex), expected(), ft::rel_tol(1e-6)));  // the values are exact in f16
  }
  SUBCASE("bf16 into f32") {
    const memory_checkpoint c({io::make_safetensors_entry<fd::bf16>("dense.weight", wbf, {3, 4}),
                               io::make_safetensors_entry<fd::bf16>("dense.bias", bbf, {3})});
    fd::cpu::executor ex{program};
    const io::checkpoint_binding bound = io::bind_checkpoint(ex, c.file);
    CHECK(bound.converted.size() == 2);
    CHECK(ft::compare(run_bound(ex), expected(), ft::rel_tol(1e-6)));
  }
  SUBCASE("f32 into bf16, and bf16 bound as it is") {
    const memory_checkpoint c({io::make_safetensors_entry<float>("dense.weight", weight, {3, 4}),
                               io::make_safetensors_entry<fd::bf16>("dense.bias", bbf, {3})});
    fd::cpu::executor ex{program_bf16};
    const io::checkpoint_binding bound = io::bind_checkpoint(ex, c.file);
    CHECK(bound.converted == std::vector<std::string>{"dense.weight (F32 -> bf16)"});
    CHECK(bound.storage.size() == 1);
    CHECK(ft::compare(run_bound(ex), expected(), ft::rel_tol(1e-6)));
  }
}

TEST_CASE("a tensor the rename drops is listed as ignored; renamed tensors bind") {
  const std::vector<std::int64_t> position_ids = {0, 1, 2};
  const memory_checkpoint c(
      {io::make_safetensors_entry<float>("bert.dense.weight", weight, {3, 4}),
       io::make_safetensors_entry<float>("bert.dense.bias", bias, {3}),
       io::make_safetensors_entry<std::int64_t>("bert.embeddings.position_ids", position_ids, {3}),
       io::make_safetensors_entry<float>("pooler.dense.bias", bias, {3})});
  fd::cpu::executor ex{program};
  const io::checkpoint_binding bound = io::bind_checkpoint(
      ex, c.file, {.rename = fd::models::bert_checkpoint_name, .convert = true});
  CHECK(bound.ignored ==
        std::vector<std::string>{"bert.embeddings.position_ids", "pooler.dense.bias"});
  CHECK(ft::compare(run_bound(ex), expected(), ft::rel_tol(1e-6)));
}

TEST_CASE("every problem is named in one error, with both shapes, and nothing is bound") {
  const std::vector<float> wrong(12, 1.0f), extra(5, 0.0f);
  const std::vector<std::int32_t> ints = {1, 2, 3};
  SUBCASE("missing") {
    const std::string e =
        error_of({io::make_safetensors_entry<float>("dense.weight", weight, {3, 4})});
    CHECK(contains(e, "model.safetensors does not fit the program (1 problem)"));
    CHECK(contains(e, "missing: 'dense.bias' f32[3]"));
  }
  SUBCASE("unexpected") {
    const std::string e =
        error_of({io::make_safetensors_entry<float>("dense.weight", weight, {3, 4}),
                  io::make_safetensors_entry<float>("dense.bias", bias, {3}),
                  io::make_safetensors_entry<float>("head.bias", extra, {5})});
    CHECK(contains(e, "unexpected: 'head.bias' F32[5]"));
  }
  SUBCASE("mis-shaped: both shapes") {
    const std::string e =
        error_of({io::make_safetensors_entry<float>("dense.weight", wrong, {4, 3}),
                  io::make_safetensors_entry<float>("dense.bias", bias, {3})});
    CHECK(contains(
        e,
        "mismatched: 'dense.weight': the program declares f32[3,4], the checkpoint has F32[4,3]"));
  }
  SUBCASE("mis-typed: integers do not convert") {
    const std::string e =
        error_of({io::make_safetensors_entry<float>("dense.weight", weight, {3, 4}),
                  io::make_safetensors_entry<std::int32_t>("dense.bias", ints, {3})});
    CHECK(
        contains(e,
                 "mismatched: 'dense.bias': the program declares f32[3], the checkpoint has I32[3] "
                 "(only F32, F16 and BF16 convert: to a floating dtype, or to an i8 weight with "
                 "its _scale parameter)"));
  }
  SUBCASE("mis-typed: conversion turned off") {
    const std::vector<fd::f16> bh = narrowed<fd::f16>(bias);
    const std::string e =
        error_of({io::make_safetensors_entry<float>("dense.weight", weight, {3, 4}),
                  io::make_safetensors_entry<fd::f16>("dense.bias", bh, {3})},
                 {.rename = {}, .convert = false});
    CHECK(
        contains(e, "the program declares f32[3], the checkpoint has F16[3] (conversion is off)"));
  }
  SUBCASE("two tensors for one parameter") {
    const std::string e =
        error_of({io::make_safetensors_entry<float>("bert.dense.bias", bias, {3}),
                  io::make_safetensors_entry<float>("dense.bias", bias, {3}),
                  io::make_safetensors_entry<float>("dense.weight", weight, {3, 4})},
                 {.rename = fd::models::bert_checkpoint_name, .convert = true});
    CHECK(contains(e, "'dense.bias' is given twice: by 'bert.dense.bias' and by 'dense.bias'"));
  }
  SUBCASE("all of them at once, ignored tensors listed") {
    const std::string e =
        error_of({io::make_safetensors_entry<float>("dense.weight", wrong, {2, 6}),
                  io::make_safetensors_entry<float>("head.bias", extra, {5}),
                  io::make_safetensors_entry<float>("pooler.dense.bias", bias, {3})},
                 {.rename = fd::models::bert_checkpoint_name, .convert = true});
    CHECK(contains(e, "(3 problems)"));
    CHECK(contains(e, "missing: 'dense.bias' f32[3]"));
    CHECK(contains(e, "unexpected: 'head.bias' F32[5]"));
    CHECK(contains(
        e,
        "mismatched: 'dense.weight': the program declares f32[3,4], the checkpoint has F32[2,6]"));
    CHECK(contains(e, "(ignored, as the program does not use them: 'pooler.dense.bias')"));
  }
  SUBCASE("nothing is bound when the check fails") {
    const memory_checkpoint c({io::make_safetensors_entry<float>("dense.weight", weight, {3, 4})});
    std::vector<std::string> bound;
    const std::vector<io::checkpoint_param> params = {
        {"dense.weight", fd::dtype::f32, fd::make_dims(3, 4)},
        {"dense.bias", fd::dtype::f32, fd::make_dims(3)}};
    CHECK_THROWS_AS(
        io::bind_checkpoint(params, c.file,
                            [&](const std::string& n, fd::tensor_ref) { bound.push_back(n); }),
        io::checkpoint_error);
    CHECK(bound.empty());
  }
}

TEST_CASE("bert_checkpoint_name maps other BERT checkpoints' names to BertModel's") {
  using fd::models::bert_checkpoint_name;
  CHECK(bert_checkpoint_name("encoder.layer.0.attention.self.query.weight") ==
        "encoder.layer.0.attention.self.query.weight");
  CHECK(bert_checkpoint_name("bert.encoder.layer.3.output.dense.bias") ==
        "encoder.layer.3.output.dense.bias");
  CHECK(bert_checkpoint_name("0.auto_model.embeddings.word_embeddings.weight") ==
        "embeddings.word_embeddings.weight");
  CHECK(bert_checkpoint_name("bert.embeddings.LayerNorm.gamma") == "embeddings.LayerNorm.weight");
  CHECK(bert_checkpoint_name("encoder.layer.1.attention.output.LayerNorm.beta") ==
        "encoder.layer.1.attention.output.LayerNorm.bias");
  CHECK_FALSE(bert_checkpoint_name("pooler.dense.weight").has_value());
  CHECK_FALSE(bert_checkpoint_name("embeddings.position_ids").has_value());
  CHECK_FALSE(bert_checkpoint_name("cls.predictions.bias").has_value());
}
