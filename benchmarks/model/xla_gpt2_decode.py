#!/usr/bin/env python3
"""XLA:CPU (jax.jit) GPT-2 small decoding with a static KV cache, one thread: the peer of
gpt2_decode_bench's decode cases (same shapes, random weights, same contexts and dtypes).

    xla_gpt2_decode.py [--out FILE.json] [--steps N]

Needs jax (scripts/setup-venv). The step is written as a JAX user writes one for static shapes:
every layer's keys and values live in a cache of n_positions rows in the weights' dtype, donated
to the jitted step and written with dynamic_update_slice at the position, and the attention runs
over the whole capacity with the positions past the current one masked (XLA compiles one shape;
reading only the filled prefix would need a program per length). For each dtype (float32,
bfloat16) and context (128, 1023 tokens) the timed steps all run at the same position (the
context); the median of the steps is reported. The roofline is hf_gpt2_decode.py's: the bytes a
step must read (the weights once, the embedding table as the LM head, every layer's keys and
values at the cached positions) over the bandwidth of a numpy copy measured in the same run; the
bytes the masked attention reads past the context are not counted, so they show as a lower
fraction.
"""
import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1 "
                      "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("PJRT_NPROC", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from decode_roofline import D, F, V, copy_bandwidth, record, write_report  # noqa: E402
from decode_roofline import HEADS as H  # noqa: E402
from decode_roofline import LAYERS as L  # noqa: E402
from decode_roofline import POSITIONS as P  # noqa: E402


def random_params(dtype, seed=0):
    rng = np.random.default_rng(seed)

    def w(*shape):
        return jnp.asarray(rng.standard_normal(shape, dtype=np.float32) * 0.02, dtype=dtype)

    def zeros(*shape):
        return jnp.zeros(shape, dtype=dtype)

    def ones(*shape):
        return jnp.ones(shape, dtype=dtype)

    layers = [dict(ln1_g=ones(D), ln1_b=zeros(D), attn_w=w(D, 3 * D), attn_b=zeros(3 * D),
                   proj_w=w(D, D), proj_b=zeros(D), ln2_g=ones(D), ln2_b=zeros(D),
                   fc_w=w(D, F), fc_b=zeros(F), out_w=w(F, D), out_b=zeros(D))
              for _ in range(L)]
    return dict(wte=w(V, D), wpe=w(P, D), lnf_g=ones(D), lnf_b=zeros(D), layers=layers)


def layer_norm(x, g, b, eps=1e-5):
    xf = x.astype(jnp.float32)
    mu = xf.mean(-1, keepdims=True)
    var = ((xf - mu) ** 2).mean(-1, keepdims=True)
    return ((xf - mu) * jax.lax.rsqrt(var + eps)).astype(x.dtype) * g + b


def gelu_tanh(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def step(params, caches, token, pos):
    """One token at position pos: (logits [V], the caches with its keys and values written)."""
    x = params["wte"][token] + jax.lax.dynamic_index_in_dim(params["wpe"], pos, keepdims=False)
    new_caches = []
    visible = jnp.arange(P) <= pos
    for lp, (kc, vc) in zip(params["layers"], caches):
        h = layer_norm(x, lp["ln1_g"], lp["ln1_b"])
        qkv = h @ lp["attn_w"] + lp["attn_b"]
        q, k, v = jnp.split(qkv, 3)
        kc = jax.lax.dynamic_update_slice(kc, k[None, :], (pos, 0))
        vc = jax.lax.dynamic_update_slice(vc, v[None, :], (pos, 0))
        new_caches.append((kc, vc))
        dh = D // H
        s = jnp.einsum("hd,phd->hp", q.reshape(H, dh), kc.reshape(P, H, dh)) / np.sqrt(dh)
        s = jnp.where(visible[None, :], s.astype(jnp.float32), -jnp.inf)
        p = jax.nn.softmax(s, axis=-1).astype(x.dtype)
        a = jnp.einsum("hp,phd->hd", p, vc.reshape(P, H, dh)).reshape(D)
        x = x + a @ lp["proj_w"] + lp["proj_b"]
        h = layer_norm(x, lp["ln2_g"], lp["ln2_b"])
        x = x + gelu_tanh(h @ lp["fc_w"] + lp["fc_b"]) @ lp["out_w"] + lp["out_b"]
    x = layer_norm(x, params["lnf_g"], params["lnf_b"])
    return x @ params["wte"].T, new_caches


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    bandwidth = copy_bandwidth()
    jstep = jax.jit(step, donate_argnums=(1,))
    results = []
    for dtype_name, dtype in (("f32", jnp.float32), ("bf16", jnp.bfloat16)):
        params = random_params(dtype)
        size = jnp.zeros((), dtype).dtype.itemsize
        rng = np.random.default_rng(1)
        for ctx in (128, 1023):
            # A filled cache: random keys and values at the context's positions (their values do
            # not change the time; the step writes position ctx).
            caches = []
            for _ in range(L):
                kv = [np.zeros((P, D), np.float32) for _ in range(2)]
                for c in kv:
                    c[:ctx] = rng.standard_normal((ctx, D), dtype=np.float32)
                caches.append(tuple(jnp.asarray(c, dtype=dtype) for c in kv))
            token = jnp.int32(464)
            pos = jnp.int32(ctx)
            times = []
            for _ in range(args.steps + 3):
                t0 = time.perf_counter()
                logits, caches = jstep(params, caches, token, pos)
                logits.block_until_ready()
                times.append(time.perf_counter() - t0)
            if not bool(jnp.isfinite(logits.astype(jnp.float32)).all()):
                raise SystemExit(f"xla_gpt2_decode: non-finite logits at {dtype_name} ctx {ctx}")
            t = float(np.median(times[3:]))
            results.append(record(f"xla_decode/weights:{dtype_name}/ctx:{ctx}", t, size, ctx,
                                  bandwidth))
    jaxlib_version = getattr(jax.lib, "__version__", jax.__version__)
    write_report(args.out, {"jax": jax.__version__, "jaxlib": jaxlib_version,
                            "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
                            "attention": "the whole cache capacity, positions past the current "
                                         "one masked"},
                 bandwidth, args.steps, results)

if __name__ == "__main__":
    main()
