#pragma once
// A mixture-of-experts feed-forward layer (Shazeer et al., 2017; GShard; Switch; Mixtral's top-2
// routing) written with the public expression API: a softmax router, top-2 gates renormalised
// over the two experts a token picks, and SwiGLU experts whose weights are stacked [E, D, F] and
// [E, F, D] (a batched matmul reads them; the executor packs each expert's slice once, at bind).
//
//   moe_top2_gates<E>(x)            [T, E]: softmax(x . router.w), kept at each token's two
//                                   largest values (fd::top_k_mask: equal values by the lower
//                                   expert index, as jax.lax.top_k) and renormalised; 0 elsewhere
//   moe_dense<E, F>(x, gates)       every expert on every token, weighted by the gates: E x T
//                                   rows of expert GEMMs
//   moe_routed<E, F, C>(x, gates)   each expert on the tokens routed to it only, at most C of them
//                                   (its capacity, static as in GShard and Switch: tokens past it
//                                   are dropped, in token order): E x C rows of expert GEMMs
//
// With C = T no token is dropped and moe_routed computes moe_dense's function. The routing is
// index arithmetic on iota: a token's slot in an expert's buffer is the number of earlier tokens
// routed there (a [T, T] x [T, E] product of 0/1 values, exact), the buffer's rows are gathered
// from x, and each token gathers its experts' results back; no one-hot matmul over the model
// width.
//
// Params: "router.w" [D, E], "experts.gate" and "experts.up" [E, D, F], "experts.down" [E, F, D].
#include <cstdint>

#include "fusedsl/expr/nn.hpp"
#include "fusedsl/expr/sort.hpp"

namespace fusedsl::models {

template <std::int64_t E, expression X>
constexpr auto moe_top2_gates(X) {
  static_assert(X::shape.rank == 2, "moe: x must be [tokens, d_model]");
  static_assert(E >= 2, "moe: top-2 routing needs two experts or more");
  constexpr std::int64_t D = X::shape[1];
  constexpr auto p = softmax(matmul(X{}, param<"router.w", float, D, E>()));
  constexpr auto kept = where(top_k_mask<2, 1>(p), p, lit<0.0>);
  return kept / sum<1, true>(kept);
}

namespace detail {
// SwiGLU expert e on row r of x[e] (x [E, rows, D], or [rows, D] for every expert): [E, rows, D]
template <std::int64_t E, std::int64_t F, expression X>
constexpr auto moe_experts(X) {
  constexpr std::int64_t D = X::shape[X::shape.rank - 1];
  constexpr auto gate = matmul(X{}, param<"experts.gate", float, E, D, F>());
  constexpr auto up = matmul(X{}, param<"experts.up", float, E, D, F>());
  return matmul(silu(gate) * up, param<"experts.down", float, E, F, D>());
}
}  // namespace detail

template <std::int64_t E, std::int64_t F, expression X, expression G>
constexpr auto moe_dense(X, G) {
  constexpr std::int64_t T = X::shape[0];
  constexpr auto out = detail::moe_experts<E, F>(X{});  // [E, T, D]
  return sum<0>(out * reshape<E, T, 1>(transpose(G{})));
}

template <std::int64_t E, std::int64_t F, std::int64_t C, expression X, expression G>
constexpr auto moe_routed(X, G) {
  constexpr std::int64_t T = X::shape[0], D = X::shape[1];
  static_assert(C >= 1 && C <= T, "moe: the capacity must be in [1, tokens]");
  constexpr auto chosen = cast<float>(G{} > lit<0.0>);  // [T, E], 0 or 1
  // slot[t, e]: how many tokens before t chose e
  constexpr auto earlier =
      cast<float>(iota<std::int32_t, 1, T, T>() < iota<std::int32_t, 0, T, T>());
  constexpr auto slot = matmul(earlier, chosen);
  constexpr auto routed = where(slot < lit<double(C)>, chosen, lit<0.0>);  // within capacity
  // token[e, c]: the token in slot c of expert e (0 for an empty slot; its result is not read)
  constexpr auto in_slot = where(eq(reshape<E, 1, T>(transpose(slot)), iota<float, 1, E, C, T>()),
                                 reshape<E, 1, T>(transpose(routed)), lit<0.0>);
  constexpr auto token = cast<std::int32_t>(sum<2>(in_slot * iota<float, 2, E, C, T>()));
  constexpr auto out = detail::moe_experts<E, F>(gather(X{}, token));  // [E, C, D]
  // each token's row of each expert's result, weighted by its gate where it was routed
  constexpr auto row =
      cast<std::int32_t>(iota<float, 1, T, E>() * lit<double(C)> + min(slot, lit<double(C - 1)>));
  constexpr auto back = gather(reshape<E * C, D>(out), row);  // [T, E, D]
  return sum<1>(back * reshape<T, E, 1>(G{} * routed));
}

}  // namespace fusedsl::models
