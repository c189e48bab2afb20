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
