// Linear layers with int8 weights (nn::linear's weight dtype std::int8_t): the values read by the
// GEMM as int8 (int8 panels for a few rows, f32 panels widened once at bind for more), the
// per-channel scale in its epilogue, quantized at load from a floating checkpoint.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <vector>

#include "check.hpp"
#include "fusedsl/core/quantize.hpp"
#include "fusedsl/io/checkpoint.hpp"
#include "fusedsl/io/safetensors_writer.hpp"

namespace fd = fusedsl;

namespace {

std::vector<float> normal_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// A linear layer in torch's layout ([Out, In] weights) with int8 weights.
template <fd::fixed_string Prefix, std::int64_t Out>
struct torch_int8_linear {
  template <class X>
  static constexpr fd::dims result_shape() {
    fd::dims s = X::shape;
    s[s.rank - 1] = Out;
    return s;
  }
  static constexpr int emit(fd::graph::builder& b, int x) {
    return fd::nn::emit_linear(b, x, Prefix.view(), Out, true, int(fd::dtype::i8),
                               fd::nn::torch_linear_layers);
  }
};

// A linear layer, gelu, a second linear layer in torch's layout, and a third without bias.
template <std::int64_t M>
constexpr auto int8_mlp() {
  constexpr auto x = fd::input<"x", float, M, 40>();
  constexpr auto h = fd::gelu(fd::nn::linear<"fc1", 72, true, std::int8_t>(x));
  constexpr auto y = fd::expr::composite_t<torch_int8_linear<"fc2", 33>, decltype(h)>{};
  return fd::compile(y + fd::nn::linear<"skip", 33, false, std::int8_t>(x));
}

template <std::int64_t M>
void check_int8_mlp(unsigned seed) {
  constexpr auto p = int8_mlp<M>();
  fd::cpu::executor ex(p);
  CHECK(ex.bindings().size() == 9);  // x, 3 weights, 3 scales, 2 biases
  auto b = fd::test::bind_random(ex, seed);
  // Random int8 values span [-128, 127] and the scales N(0, 0.1), so the sums of |terms| reach
  // ~1e3 and the f32 sums (the scale applied after the sum here, to each term in the reference)
  // differ by ~1e-4 absolute.
  CHECK(fd::test::compare_with_reference(ex, b, fd::test::allclose(1e-3, 1e-5)));
  // Every group is a generated kernel and none widens the weights: the three GEMMs (gelu and the
  // sum in their epilogues) and fc2's scales [33, 1] read as [33] (a parameter group: reshaped
  // once, when bound).
  CHECK(ex.stats().interpreted_groups == 0);
  CHECK(ex.stats().parameter_groups == 1);
  CHECK(ex.stats().fast_groups == 4);
  // The weights' panels: int8 for a tile's rows or fewer, f32 (widened once) for more.
  const std::size_t elems = 40 * 72 + 72 * 33 + 40 * 33;
  const std::size_t packed = ex.footprint().packed_weights;
  if (M == 1) CHECK(packed < 2 * elems);
  if (M > 16) CHECK(packed >= 4 * elems);
}

}  // namespace

TEST_CASE("int8 linear layers: values read by the GEMM, scales in its epilogue, as the reference") {
  check_int8_mlp<1>(31);
  check_int8_mlp<3>(32);
  check_int8_mlp<13>(33);
  check_int8_mlp<65>(34);
}

TEST_CASE("an int8 weight of a floating checkpoint is quantized per channel when bound") {
  constexpr auto p = int8_mlp<5>();
  fd::cpu::executor ex(p), want(p);
  // A checkpoint in f32 (the scales absent), and the same values quantized here for `want`.
  std::vector<std::vector<float>> data;
  std::vector<fd::io::safetensors_entry> entries;
  std::vector<fd::dynamic_tensor> held;
  held.reserve(16);
  unsigned seed = 40;
  std::vector<float> x;
  for (const auto& s : ex.bindings()) {
    if (s.name.ends_with("_scale")) continue;
    data.push_back(normal_floats(std::size_t(s.shape.size()), seed++));
    const std::vector<float>& v = data.back();
    if (s.kind == fd::graph::op_kind::input) {
      x = v;
      continue;
    }
    std::vector<std::int64_t> shape;
    for (int a = 0; a < s.shape.rank; ++a) shape.push_back(s.shape[a]);
    entries.push_back(
        {s.name, fd::io::safetensors_dtype::f32, shape, std::as_bytes(std::span<const float>(v))});
    if (s.type != fd::dtype::i8) {
      want.bind(s.name, fd::tensor_ref{const_cast<float*>(v.data()), s.type, s.shape});
      continue;
    }
    // fc2 is [Out, In] (channels along axis 0); fc1 and skip are [In, Out].
    const int axis = s.name == "fc2.weight" ? 0 : 1;
    const fd::s8_weight q = fd::quantize_s8_per_channel(v, s.shape[0], s.shape[1], axis);
    held.emplace_back(fd::dtype::i8, s.shape);
    std::memcpy(held.back().raw(), q.values.data(), q.values.size());
    want.bind(s.name, held.back().ref());
    held.emplace_back(fd::dtype::f32,
                      axis == 0 ? fd::make_dims(s.shape[0], 1) : fd::make_dims(1, s.shape[1]));
    std::memcpy(held.back().raw(), q.scales.data(), q.scales.size() * sizeof(float));
    want.bind(s.name + "_scale", held.back().ref());
  }
  const auto path = std::filesystem::temp_directory_path() / "fusedsl_int8_weights.safetensors";
  fd::io::write_safetensors(path, entries);
  const auto file = fd::io::safetensors_file::open(path);
  const fd::io::checkpoint_binding bound = fd::io::bind_checkpoint(ex, file);
  CHECK(bound.converted.size() == 3);  // the three weights, "... (F32 -> i8 per channel)"
  CHECK(bound.bound.size() == 8);      // and their scales
  fd::tensor<float, 5, 40> xv;
  for (int i = 0; i < 200; ++i) xv[i] = x[std::size_t(i)];
  fd::tensor<float, 5, 33> got, expected;
  ex.bind("x", xv);
  want.bind("x", xv);
  ex.bind_output(0, got);
  want.bind_output(0, expected);
  ex.run();
  want.run();
  CHECK(std::memcmp(got.data(), expected.data(), sizeof(float) * 5 * 33) == 0);

  // A checkpoint that holds a quantized weight's scales but not its I8 values is refused.
  std::vector<float> stray(72, 1.0f);
  entries.push_back({"fc1.w_scale",
                     fd::io::safetensors_dtype::f32,
                     {1, 72},
                     std::as_bytes(std::span<const float>(stray))});
  fd::io::write_safetensors(path, entries);
  const auto file2 = fd::io::safetensors_file::open(path);
  fd::cpu::executor other(p);
  CHECK_THROWS_WITH_AS(fd::io::bind_checkpoint(other, file2),
                       doctest::Contains("'fc1.w_scale' is in the checkpoint"),
                       fd::io::checkpoint_error);
  std::filesystem::remove(path);
}
