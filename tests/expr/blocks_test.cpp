// Transformer blocks (post-LN and pre-LN) and stacks of blocks with per-layer params, against the
// hand-written formulas of nn_reference.hpp.
#include "nn_reference.hpp"

namespace {

constexpr int L = 8, D = 16, H = 4, F = 32;
constexpr auto x = fd::input<"x", float, L, D>();

nnref::mat as_mat(const fd::tensor_ref& t) {
  const auto v = test::values(t);
  return nnref::mat(v.begin(), v.end());
}

}  // namespace

TEST_CASE("a post-LN block is LN2(h + ffn(h)) with h = LN1(x + attn(x))") {
  constexpr auto blk = fd::nn::transformer_block<fd::nn::post_ln, H, F>;
  auto xv = test::random_tensor<float, L, D>(1);
  fd::reference::evaluator ev{fd::flatten(blk(x))};
  nnref::weights w(ev.required(), 11);
  w.bind(ev);
  ev.bind("x", xv);
  auto y = ev.run();
  test::check_close(y[0], nnref::block(as_mat(xv), L, D, H, H, F, false, false, w, ""), 1e-4, 1e-4);
}

TEST_CASE(
    "a pre-LN block with causal grouped-query attention is h + ffn(LN2(h)) with h = x + "
    "attn(LN1(x))") {
  constexpr auto blk = fd::nn::transformer_block<fd::nn::pre_ln, H, F, 2, true>;
  auto xv = test::random_tensor<float, L, D>(2);
  fd::reference::evaluator ev{fd::flatten(blk(x))};
  nnref::weights w(ev.required(), 12);
  w.bind(ev);
  ev.bind("x", xv);
  auto y = ev.run();
  test::check_close(y[0], nnref::block(as_mat(xv), L, D, H, 2, F, true, true, w, ""), 1e-4, 1e-4);
}

TEST_CASE("a stack of 2 blocks applies layer 0 then layer 1, each with its own params") {
  constexpr auto blk = fd::nn::transformer_block<fd::nn::pre_ln, H, F, H, true>;
  constexpr auto& g = fd::flatten(fd::nn::stack<"layers", 2>(blk, x));
  auto xv = test::random_tensor<float, L, D>(3);
  fd::reference::evaluator ev{g};
  // 16 params per layer, and the input.
  CHECK(ev.required().size() == 1 + 2 * 16);
  nnref::weights w(ev.required(), 13);
  w.bind(ev);
  ev.bind("x", xv);
  auto y = ev.run();
  const auto h0 = nnref::block(as_mat(xv), L, D, H, H, F, true, true, w, "layers.0.");
  const auto want = nnref::block(h0, L, D, H, H, F, true, true, w, "layers.1.");
  test::check_close(y[0], want, 1e-4, 1e-4);

  // Swapping the two layers' weights changes the result: each iteration reads its own params.
  for (auto& [name, t] : w.t)
    if (name.rfind("layers.0.", 0) == 0)
      ev.bind("layers.1." + name.substr(9), t.ref());
    else
      ev.bind("layers.0." + name.substr(9), t.ref());
  auto swapped = ev.run();
  const auto h1 = nnref::block(as_mat(xv), L, D, H, H, F, true, true, w, "layers.1.");
  test::check_close(swapped[0], nnref::block(h1, L, D, H, H, F, true, true, w, "layers.0."), 1e-4,
                    1e-4);
}

TEST_CASE("a stack of a user block reads per-layer params and shared inputs") {
  // h + gelu(h @ w + b) * scale: "scale" is an input inside the body, shared by every layer.
  constexpr auto body = fd::nn::block([](auto h) {
    return h + fd::gelu(fd::nn::linear<"fc", D>(h)) * fd::input<"scale", float, D>();
  });
  constexpr auto& g = fd::flatten(fd::nn::stack<"mlp", 3>(body, x));
  auto xv = test::random_tensor<float, L, D>(4);
  auto sv = test::random_tensor<float, D>(5);
  fd::reference::evaluator ev{g};
  std::vector<std::string> names;
  for (const auto& s : ev.required()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"x", "mlp.0.fc.w", "mlp.0.fc.b", "scale", "mlp.1.fc.w",
                                          "mlp.1.fc.b", "mlp.2.fc.w", "mlp.2.fc.b"});
  nnref::weights w(ev.required(), 14);
  w.bind(ev);
  ev.bind("x", xv).bind("scale", sv);
  auto y = ev.run();
  nnref::mat h = as_mat(xv);
  for (int l = 0; l < 3; ++l) {
    const auto z = nnref::linear(h, L, D, D, w, "mlp." + std::to_string(l) + ".fc");
    for (int i = 0; i < L * D; ++i)
      h[std::size_t(i)] +=
          0.5 * z[std::size_t(i)] * (1 + std::erf(z[std::size_t(i)] / std::sqrt(2.0))) * sv[i % D];
  }
  test::check_close(y[0], h, 1e-4, 1e-4);
}

TEST_CASE("nn::emit_linear and emit_layernorm name and lay out their params as the style says") {
  namespace g = fd::graph;
  g::builder b;
  const int x_in = b.input("x", fd::dtype::f32, fd::make_dims(3, 5));
  auto param = [&](std::string_view name) -> const g::node* {
    for (const g::node& n : b.nodes)
      if (n.op == g::op_kind::param && n.name.view() == name) return &n;
    return nullptr;
  };
  // fusedsl's names, [In, Out]
  const int y1 = fd::nn::emit_linear(b, x_in, "a", 7);
  REQUIRE(param("a.w") != nullptr);
  CHECK(param("a.w")->shape == fd::make_dims(5, 7));
  CHECK(param("a.b")->shape == fd::make_dims(7));
  CHECK(b.at(y1).op == g::op_kind::add);
  CHECK_FALSE(b.at(b.at(y1).in[0]).trans_b);
  // torch.nn.Linear: "weight" [Out, In], read transposed
  const int y2 = fd::nn::emit_linear(b, x_in, "t", 7, true, -1, fd::nn::torch_linear_layers);
  REQUIRE(param("t.weight") != nullptr);
  CHECK(param("t.weight")->shape == fd::make_dims(7, 5));
  CHECK(param("t.bias")->shape == fd::make_dims(7));
  CHECK(b.at(b.at(y2).in[0]).trans_b);
  CHECK(b.at(y2).shape == fd::make_dims(3, 7));
  // GPT-2's Conv1D: "weight" [In, Out]; no bias asked for, none made
  const int y3 = fd::nn::emit_linear(b, x_in, "c", 7, false, -1, fd::nn::conv1d_layers);
  REQUIRE(param("c.weight") != nullptr);
  CHECK(param("c.weight")->shape == fd::make_dims(5, 7));
  CHECK(param("c.bias") == nullptr);
  CHECK(b.at(y3).op == g::op_kind::matmul);
  // a LayerNorm's gamma and beta as "weight" and "bias", in bf16 widened to the input's f32
  const int n = fd::nn::emit_layernorm(b, x_in, "ln", 1e-5, int(fd::dtype::bf16),
                                       fd::nn::torch_linear_layers);
  REQUIRE(param("ln.weight") != nullptr);
  CHECK(param("ln.weight")->type == fd::dtype::bf16);
  CHECK(param("ln.bias")->shape == fd::make_dims(5));
  CHECK(b.at(n).op == g::op_kind::layernorm);
  CHECK(b.at(n).type == fd::dtype::f32);
}
