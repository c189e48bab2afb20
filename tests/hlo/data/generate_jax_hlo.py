#!/usr/bin/env python3
"""Writes the jax-emitted HLO test data in this folder (run once with the venv's python:
   .venv/bin/python tests/hlo/data/generate_jax_hlo.py). jax==0.10.2, CPU.
Each file is jax.jit(f).lower(*args).as_text(dialect="hlo") for a transformer-layer piece:
a block, a bf16 MLP, a softmax with a tuple result, a sharded MLP, an embedding lookup
(jnp.take and indexing: gather), a decode step's KV-cache update (lax.dynamic_update_slice with
the cache donated, then lax.dynamic_slice) and argmax (a variadic reduce)."""
import os
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import jax
import jax.numpy as jnp

jax.config.update("jax_platforms", "cpu")
here = os.path.dirname(os.path.abspath(__file__))


def layer_norm(x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def attention(x, wqkv, wo, heads):
    L, D = x.shape
    qkv = x @ wqkv
    q, k, v = jnp.split(qkv, 3, axis=-1)
    def split(t):
        return t.reshape(L, heads, D // heads).transpose(1, 0, 2)
    q, k, v = split(q), split(k), split(v)
    s = jnp.einsum("hld,hmd->hlm", q, k) / jnp.sqrt(D // heads).astype(x.dtype)
    mask = jnp.tril(jnp.ones((L, L), dtype=bool))
    s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("hlm,hmd->hld", p, v).transpose(1, 0, 2).reshape(L, D)
    return o @ wo


def transformer_block(x, wqkv, wo, w1, b1, w2, b2, g1, be1, g2, be2):
    h = layer_norm(x + attention(x, wqkv, wo, 4), g1, be1)
    f = jax.nn.gelu(h @ w1 + b1, approximate=False) @ w2 + b2
    return layer_norm(h + f, g2, be2)


def mlp_tanh_gelu_bf16(x, w1, w2):
    h = jnp.dot(x.astype(jnp.bfloat16), w1.astype(jnp.bfloat16), preferred_element_type=jnp.float32)
    return jnp.dot(jax.nn.gelu(h, approximate=True).astype(jnp.bfloat16), w2.astype(jnp.bfloat16),
                   preferred_element_type=jnp.float32)


def softmax_logistic(x):
    return jax.nn.softmax(x, axis=-1) + jax.nn.sigmoid(x), jnp.max(x, axis=0)


def sharded_mlp(a, w):
    """Megatron-style column split with a sharding constraint (jax writes custom-call Sharding)."""
    from jax.sharding import NamedSharding, PartitionSpec as P
    h = jnp.tanh(a @ w)
    h = jax.lax.with_sharding_constraint(h, NamedSharding(MESH, P(None, "x")))
    return h.sum(axis=1)


def embedding_layernorm(table, ids, pos_table, g, b):
    """Token embedding by jnp.take (2-d ids, clipped) plus a position row by indexing, then layernorm."""
    tok = jnp.take(table, ids, axis=0, mode="clip")
    pos = pos_table[jnp.arange(ids.shape[1])]
    return layer_norm(tok + pos[None], g, b)


def decode_cache(k_cache, k_new, pos):
    """One decode step: the new key row written at pos, then the last 4 rows up to pos read back."""
    k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, k_new, pos, axis=0)
    window = jax.lax.dynamic_slice_in_dim(k_cache, pos - 3, 4, axis=0)
    return k_cache, window


def argmax_logits(logits):
    return jnp.argmax(logits, axis=-1), jnp.argmax(logits, axis=0, keepdims=True)


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def i32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


L, D, F = 16, 32, 64
cases = {
    "jax_transformer_block": (transformer_block,
                              (f32(L, D), f32(D, 3 * D), f32(D, D), f32(D, F), f32(F), f32(F, D),
                               f32(D), f32(D), f32(D), f32(D), f32(D))),
    "jax_mlp_bf16": (mlp_tanh_gelu_bf16, (f32(8, 16), f32(16, 32), f32(32, 16))),
    "jax_softmax_tuple": (softmax_logistic, (f32(4, 8),)),
    "jax_embedding_take": (embedding_layernorm, (f32(50, D), i32(2, 8), f32(8, D), f32(D), f32(D))),
    "jax_argmax": (argmax_logits, (f32(4, 16),)),
}
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
MESH = Mesh(jax.devices()[:8], ("x",))
jitted = {name: jax.jit(fn) for name, (fn, _) in cases.items()}
cases["jax_decode_cache"] = (decode_cache, (f32(16, D), f32(1, D), i32()))
jitted["jax_decode_cache"] = jax.jit(decode_cache, donate_argnums=0)
cases["jax_sharded_mlp"] = (sharded_mlp, (f32(8, 16), f32(16, 32)))
jitted["jax_sharded_mlp"] = jax.jit(sharded_mlp, in_shardings=(NamedSharding(MESH, P()), NamedSharding(MESH, P(None, "x"))),
                                    out_shardings=NamedSharding(MESH, P()))
for name, (fn, args) in cases.items():
    text = jitted[name].lower(*args).as_text(dialect="hlo")
    with open(os.path.join(here, name + ".hlo"), "w") as f:
        f.write(text)
    print("wrote", name + ".hlo", len(text), "bytes")
