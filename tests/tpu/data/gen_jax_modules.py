"""Generates the jax-exported test modules for tests/tpu (run once; outputs are committed).

Usage: python gen_jax_modules.py [outdir]   (needs jax==0.10.2, numpy)
       python gen_jax_modules.py --worked-example DIR   (docs/tpu.md's layer: writes
       DIR/module.hlo plus inputs and XLA's outputs, too large to commit)
Each case writes <case>/module.hlo (jax.jit(f).lower(...).as_text(dialect="hlo")),
<case>/module_opt.hlo (XLA CPU's optimised module, with fusion computations; the
FileNames/FunctionNames/FileLocations/StackFrames debug sections are dropped),
<case>/param<N>.npy (inputs, float32) and <case>/out<N>.npy (what XLA CPU computed).
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_platforms", "cpu")


def layer_norm(x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def transformer_layer(x, wqkv, wo, w1, b1, w2, b2, g1, be1, g2, be2, *, heads, dot_dtype):
    """Pre-LN causal self-attention + GELU MLP; matmuls take dot_dtype operands, f32 results."""
    seq, d = x.shape
    hd = d // heads

    def mm(a, w):
        return jnp.dot(a.astype(dot_dtype), w.astype(dot_dtype), preferred_element_type=jnp.float32)

    h = layer_norm(x, g1, be1)
    qkv = mm(h, wqkv)
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q = q.reshape(seq, heads, hd).transpose(1, 0, 2)
    k = k.reshape(seq, heads, hd).transpose(1, 0, 2)
    v = v.reshape(seq, heads, hd).transpose(1, 0, 2)
    s = jnp.einsum("hqd,hkd->hqk", q.astype(dot_dtype), k.astype(dot_dtype),
                   preferred_element_type=jnp.float32) / np.sqrt(hd).astype(np.float32)
    causal = jnp.arange(seq)[:, None] >= jnp.arange(seq)[None, :]
    s = jnp.where(causal[None], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("hqk,hkd->hqd", p.astype(dot_dtype), v.astype(dot_dtype),
                   preferred_element_type=jnp.float32)
    o = o.transpose(1, 0, 2).reshape(seq, d)
    x = x + mm(o, wo)
    h = layer_norm(x, g2, be2)
    h = jax.nn.gelu(mm(h, w1) + b1, approximate=True)
    return x + mm(h, w2) + b2


def matmul_bias_gelu(x, w, b):
    return jax.nn.gelu(x @ w + b, approximate=True)


def ops_zoo(x, y):
    """One of (nearly) every op the HLO parser reads, so the executor is checked against XLA."""
    lax = jax.lax
    ay = jnp.abs(y) + 1.0
    ints = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    rows = lax.broadcasted_iota(jnp.int32, x.shape, 0)
    both = jnp.logical_and(x > 0, jnp.logical_not(y > 0.5))
    unary = (jnp.abs(x), jnp.sign(x), jnp.exp(0.3 * x), jnp.expm1(0.3 * x), jnp.log(ay),
             jnp.log1p(jnp.abs(x)), jnp.sqrt(ay), lax.rsqrt(ay), jnp.tanh(x),
             jax.scipy.special.erf(x), jax.nn.sigmoid(x), jnp.floor(x), jnp.ceil(x),
             jnp.cos(x), jnp.sin(x), -x)
    binary = (x - y, x * y, x / ay, jnp.maximum(x, y), jnp.minimum(x, y), jnp.power(ay, 0.5 * x),
              lax.rem(x, ay), lax.clamp(-0.5, x, 0.5))
    logic = (jnp.where(both, x, y), jnp.where(jnp.logical_or(x > 1, y < -1), 1.0, 0.0),
             (lax.div(ints, 3) + lax.rem(rows, 2) * ints).astype(jnp.float32))
    red = (jnp.max(x, axis=0), jnp.min(x, axis=1), jnp.prod(0.1 * x + 1.0, axis=1), jnp.sum(x))
    cat = jnp.concatenate([x, y], axis=1)[:, ::3]
    shaped = (cat, x.T.reshape(-1, 4), x.astype(jnp.bfloat16).astype(jnp.float32))
    return unary + binary + logic + red + shaped


def strip_debug_sections(text):
    keep, skipping = [], False
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            skipping = True
            continue
        if skipping and line.strip() == "":
            skipping = False
            continue
        if not skipping:
            keep.append(line)
    return "\n".join(keep) + "\n"


def export(outdir, name, fn, args):
    path = os.path.join(outdir, name)
    os.makedirs(path, exist_ok=True)
    jitted = jax.jit(fn)
    lowered = jitted.lower(*args)
    with open(os.path.join(path, "module.hlo"), "w") as f:
        f.write(lowered.as_text(dialect="hlo"))
    with open(os.path.join(path, "module_opt.hlo"), "w") as f:
        f.write(strip_debug_sections(lowered.compile().as_text()))
    for i, a in enumerate(args):
        np.save(os.path.join(path, f"param{i}.npy"), np.asarray(a, dtype=np.float32))
    outs = jitted(*args)
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    for i, o in enumerate(outs):
        np.save(os.path.join(path, f"out{i}.npy"), np.asarray(o, dtype=np.float32))


def layer_args(key, seq, d, ff):
    ks = jax.random.split(key, 12)
    n = lambda k, shape, scale: (scale * jax.random.normal(k, shape)).astype(jnp.float32)
    return (
        n(ks[0], (seq, d), 1.0),
        n(ks[1], (d, 3 * d), d ** -0.5), n(ks[2], (d, d), d ** -0.5),
        n(ks[3], (d, ff), d ** -0.5), n(ks[4], (ff,), 0.1),
        n(ks[5], (ff, d), ff ** -0.5), n(ks[6], (d,), 0.1),
        1.0 + n(ks[7], (d,), 0.1), n(ks[8], (d,), 0.1),
        1.0 + n(ks[9], (d,), 0.1), n(ks[10], (d,), 0.1),
    )


def worked_example(outdir):
    """docs/tpu.md's worked example: a 1024-token, d_model 1024, 8-head, 4096-wide bf16 layer."""
    args = layer_args(jax.random.PRNGKey(2), 1024, 1024, 4096)
    export(outdir, "layer_1024_bf16",
           lambda *a: transformer_layer(*a, heads=8, dot_dtype=jnp.bfloat16), args)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worked-example":
        worked_example(sys.argv[2])
        return
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.normal(k1, (64, 96), jnp.float32)
    w = (jax.random.normal(k2, (96, 160), jnp.float32) * 96 ** -0.5).astype(jnp.float32)
    b = (0.1 * jax.random.normal(k3, (160,), jnp.float32)).astype(jnp.float32)
    export(outdir, "matmul_bias_gelu", matmul_bias_gelu, (x, w, b))
    kx, ky = jax.random.split(jax.random.PRNGKey(3))
    export(outdir, "ops_zoo", ops_zoo, (jax.random.normal(kx, (8, 24), jnp.float32),
                                       jax.random.normal(ky, (8, 24), jnp.float32)))
    args = layer_args(jax.random.PRNGKey(1), 16, 64, 128)
    export(outdir, "layer_f32", lambda *a: transformer_layer(*a, heads=2, dot_dtype=jnp.float32), args)
    export(outdir, "layer_bf16", lambda *a: transformer_layer(*a, heads=2, dot_dtype=jnp.bfloat16), args)


if __name__ == "__main__":
    main()
