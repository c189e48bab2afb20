// linear, multi-head attention (causal, grouped and multi-query heads, batched) and feed-forward
// against hand-written formulas in double (nn_reference.hpp).
#include "nn_reference.hpp"

namespace {

constexpr int L = 8, D = 16, F = 24;

// Evaluate graph g with input "x" = xv and random weights; returns output 0 and the weights.
template <class G, class X>
std::pair<fd::dynamic_tensor, nnref::weights> run_with_weights(const G& g, X& xv,
                                                               unsigned seed = 5) {
  fd::reference::evaluator ev{g};
  nnref::weights w(ev.required(), seed);
  w.bind(ev);
  ev.bind("x", xv);
  auto outs = ev.run();
  return {std::move(outs.at(0)), std::move(w)};
}

nnref::mat as_mat(const fd::tensor_ref& t) {
  const auto v = test::values(t);
  return nnref::mat(v.begin(), v.end());
}

}  // namespace

TEST_CASE("linear is x @ w + b, with params <prefix>.w [in, out] and <prefix>.b [out]") {
  constexpr auto x = fd::input<"x", float, 2, L, D>();
  auto xv = test::random_tensor<float, 2, L, D>(1);
  auto [y, w] = run_with_weights(fd::flatten(fd::nn::linear<"proj", 5>(x)), xv);
  CHECK(y.shape() == fd::make_dims(2, L, 5));
  test::check_close(y, nnref::linear(as_mat(xv), 2 * L, D, 5, w, "proj"), 1e-5, 1e-5);

  auto [y2, w2] = run_with_weights(fd::flatten(fd::nn::linear<"proj", 5, false>(x)), xv);
  CHECK(w2.t.size() == 1);  // no bias param
  test::check_close(y2, nnref::linear(as_mat(xv), 2 * L, D, 5, w2, "proj", false), 1e-5, 1e-5);
}

TEST_CASE(
    "multi-head attention (4 heads) matches softmax(q k^T / sqrt(dh)) v, then the output "
    "projection") {
  constexpr auto x = fd::input<"x", float, L, D>();
  auto xv = test::random_tensor<float, L, D>(2);
  auto [y, w] = run_with_weights(fd::flatten(fd::nn::attention<"attn", 4>(x)), xv);
  test::check_close(y, nnref::attention(as_mat(xv), 1, L, D, 4, 4, false, w, "attn"), 1e-5, 1e-4);
}

TEST_CASE("causal attention: row i attends to keys 0..i only") {
  constexpr auto x = fd::input<"x", float, L, D>();
  auto xv = test::random_tensor<float, L, D>(3);
  auto [y, w] = run_with_weights(fd::flatten(fd::nn::attention<"attn", 4, 4, true>(x)), xv);
  const auto want = nnref::attention(as_mat(xv), 1, L, D, 4, 4, true, w, "attn");
  test::check_close(y, want, 1e-5, 1e-4);
  // Row 0 sees only itself: its output does not change when later rows change.
  auto xv2 = test::random_tensor<float, L, D>(3);  // the same values as xv
  for (int j = D; j < L * D; ++j) xv2[j] += 1.0f;
  auto [y2, w2] =
      run_with_weights(fd::flatten(fd::nn::attention<"attn", 4, 4, true>(x)), xv2);
  for (int j = 0; j < D; ++j) CHECK(y2.data<float>()[j] == y.data<float>()[j]);
}

TEST_CASE("grouped-query attention: 4 query heads share 2 key/value heads, causal") {
  constexpr auto x = fd::input<"x", float, L, D>();
  auto xv = test::random_tensor<float, L, D>(4);
  fd::reference::evaluator probe{fd::flatten(fd::nn::attention<"attn", 4, 2, true>(x))};
  for (const auto& s : probe.required())
    if (s.name == "attn.k.w")
      CHECK(s.shape == fd::make_dims(D, 2 * D / 4));  // kv projections are narrower
  auto [y, w] = run_with_weights(fd::flatten(fd::nn::attention<"attn", 4, 2, true>(x)), xv);
  test::check_close(y, nnref::attention(as_mat(xv), 1, L, D, 4, 2, true, w, "attn"), 1e-5, 1e-4);
}

TEST_CASE("multi-query attention: 4 query heads share one key/value head") {
  constexpr auto x = fd::input<"x", float, L, D>();
  auto xv = test::random_tensor<float, L, D>(5);
  auto [y, w] = run_with_weights(fd::flatten(fd::nn::attention<"attn", 4, 1>(x)), xv);
  test::check_close(y, nnref::attention(as_mat(xv), 1, L, D, 4, 1, false, w, "attn"), 1e-5, 1e-4);
}

TEST_CASE("batched attention [2, L, D] treats each sequence on its own") {
  constexpr auto x = fd::input<"x", float, 2, L, D>();
  auto xv = test::random_tensor<float, 2, L, D>(6);
  auto [y, w] = run_with_weights(fd::flatten(fd::nn::attention<"attn", 4, 2, true>(x)), xv);
  CHECK(y.shape() == fd::make_dims(2, L, D));
  test::check_close(y, nnref::attention(as_mat(xv), 2, L, D, 4, 2, true, w, "attn"), 1e-5, 1e-4);
}

// nn::attention_options: cross-attention over an encoder output of another length and width, an
// additive bias of several broadcast shapes, no scale, grouped heads, sliding windows.
TEST_CASE(
    "attention options: cross-attention, bias, scale, causal and sliding windows against the "
    "formula") {
  constexpr int Lk = 11, Dc = 12, B = 2;
  constexpr auto x = fd::input<"x", float, B, L, D>();
  constexpr auto enc = fd::input<"enc", float, B, Lk, Dc>();
  constexpr auto rel = fd::input<"rel", float, 4, L, Lk>();      // per head: a T5-style bias
  constexpr auto slopes = fd::input<"alibi", float, 4, 1, L>();  // ALiBi: per head, per key
  auto xv = test::random_tensor<float, B, L, D>(7);
  auto ev = test::random_tensor<float, B, Lk, Dc>(8);
  auto rv = test::random_tensor<float, 4, L, Lk>(9);
  auto av = test::random_tensor<float, 4, 1, L>(10);
  const auto run = [&](const auto& g, unsigned seed) {
    fd::reference::evaluator e{g};
    nnref::weights w(e.required(), seed);
    w.bind(e);
    e.bind("x", xv);
    for (const auto& spec : e.required()) {
      if (spec.name == "enc") e.bind("enc", ev);
      if (spec.name == "rel") e.bind("rel", rv);
      if (spec.name == "alibi") e.bind("alibi", av);
    }
    auto outs = e.run();
    return std::pair{std::move(outs.at(0)), std::move(w)};
  };
  const nnref::mat xm = as_mat(xv), em = as_mat(ev);
  const auto no_bias = [](int, int, int, int) { return 0.0; };
  SUBCASE("cross-attention, unscaled, a [heads, Lq, Lk] bias, grouped heads") {
    constexpr fd::nn::attention_options o{
        .heads = 4, .kv_heads = 2, .scale = 1.0, .context = true, .bias = true};
    auto [y, w] = run(fd::flatten(fd::nn::attention<"xa", o>(x, enc, rel)), 11);
    CHECK(y.shape() == fd::make_dims(B, L, D));
    const auto bias = [&](int, int h, int i, int j) { return double(rv[(h * L + i) * Lk + j]); };
    test::check_close(
        y, nnref::attention_with(xm, em, B, L, Lk, D, Dc, 4, 2, {.scale = 1.0}, bias, w, "xa"),
        1e-5, 1e-4);
  }
  SUBCASE("self-attention, causal, ALiBi-like [heads, 1, L] bias, a window of 3") {
    constexpr fd::nn::attention_options o{.heads = 4, .causal = true, .window = 3, .bias = true};
    auto [y, w] = run(fd::flatten(fd::nn::attention<"sa", o>(x, slopes)), 12);
    const auto bias = [&](int, int h, int, int j) { return double(av[h * L + j]); };
    test::check_close(y,
                      nnref::attention_with(xm, xm, B, L, L, D, D, 4, 4,
                                            {.causal = true, .window = 3}, bias, w, "sa"),
                      1e-5, 1e-4);
  }
  SUBCASE("a window on both sides without causal, multi-query heads, scale 0.5") {
    constexpr fd::nn::attention_options o{.heads = 4, .kv_heads = 1, .scale = 0.5, .window = 2};
    auto [y, w] = run(fd::flatten(fd::nn::attention<"sa", o>(x)), 13);
    test::check_close(y,
                      nnref::attention_with(xm, xm, B, L, L, D, D, 4, 1,
                                            {.scale = 0.5, .window = 2}, no_bias, w, "sa"),
                      1e-5, 1e-4);
  }
  SUBCASE("cross-attention with a causal mask aligns the last query with the last key") {
    constexpr fd::nn::attention_options o{.heads = 2, .causal = true, .context = true};
    auto [y, w] = run(fd::flatten(fd::nn::attention<"xa", o>(x, enc)), 14);
    test::check_close(
        y, nnref::attention_with(xm, em, B, L, Lk, D, Dc, 2, 2, {.causal = true}, no_bias, w, "xa"),
        1e-5, 1e-4);
  }
  SUBCASE("the options form without extras is attention<Prefix, Heads, KvHeads, Causal>") {
    constexpr fd::nn::attention_options o{.heads = 4, .kv_heads = 2, .causal = true};
    auto [y, w] = run(fd::flatten(fd::nn::attention<"attn", o>(x)), 15);
    auto [y2, w2] = run(fd::flatten(fd::nn::attention<"attn", 4, 2, true>(x)), 15);
    CHECK(test::values(y) == test::values(y2));
  }
}

TEST_CASE("feed-forward is fc2(act(fc1(x))) for each activation") {
  constexpr auto x = fd::input<"x", float, L, D>();
  auto xv = test::random_tensor<float, L, D>(7, -2, 2);
  const auto xm = as_mat(xv);
  namespace activation = fd::nn::activation;
  {
    auto [y, w] = run_with_weights(fd::flatten(fd::nn::feed_forward<"ffn", F>(x)), xv);
    test::check_close(y, nnref::ffn(xm, L, D, F, w, "ffn", nnref::gelu_tanh), 1e-5, 1e-4);
  }
  {
    auto [y, w] = run_with_weights(
        fd::flatten(fd::nn::feed_forward<"ffn", F, activation::relu>(x)), xv);
    test::check_close(y, nnref::ffn(xm, L, D, F, w, "ffn", [](double v) { return v > 0 ? v : 0; }),
                      1e-5, 1e-4);
  }
  {
    auto [y, w] = run_with_weights(
        fd::flatten(fd::nn::feed_forward<"ffn", F, activation::gelu>(x)), xv);
    auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
    test::check_close(y, nnref::ffn(xm, L, D, F, w, "ffn", gelu), 1e-5, 1e-4);
  }
  {
    auto [y, w] = run_with_weights(
        fd::flatten(fd::nn::feed_forward<"ffn", F, activation::silu>(x)), xv);
    auto silu = [](double v) { return v / (1 + std::exp(-v)); };
    test::check_close(y, nnref::ffn(xm, L, D, F, w, "ffn", silu), 1e-5, 1e-4);
  }
}
