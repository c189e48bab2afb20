"""Generates the jax-exported test modules for tests/tpu (run once; outputs are committed).

Usage: python gen_jax_modules.py [outdir [case ...]]   (needs jax==0.10.2, numpy; with case
       names, only those cases are written)
       python gen_jax_modules.py --worked-example DIR   (docs/tpu.md's layer: writes
       DIR/module.hlo plus inputs and XLA's outputs, too large to commit)
Each case writes <case>/module.hlo (jax.jit(f).lower(...).as_text(dialect="hlo")),
<case>/module_opt.hlo (XLA CPU's optimised module, with fusion computations; the
FileNames/FunctionNames/FileLocations/StackFrames debug sections are dropped),
<case>/param<N>.npy (inputs: float32, or int32 for integer parameters) and <case>/out<N>.npy
(what XLA CPU computed: float32, or int32 for integer outputs).
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


def embedding_layernorm(table, ids, pos_table, g, b):
    """Token rows by jnp.take (2-d ids, clipped), position rows by indexing, layernorm; also the
    default jnp.take (NaN rows for out-of-range ids)."""
    tok = jnp.take(table, ids, axis=0, mode="clip")
    pos = pos_table[jnp.arange(ids.shape[1])]
    return layer_norm(tok + pos[None], g, b), jnp.take(table, ids[0], axis=0)


def decode_step(k_cache, k_new, q, pos):
    """One decode step: the new key row written at pos into the (donated) cache, the last 8 rows
    up to pos read back, softmax(q k^T) over them."""
    k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, k_new, pos, axis=0)
    window = jax.lax.dynamic_slice_in_dim(k_cache, pos - 7, 8, axis=0)
    return k_cache, jax.nn.softmax(q @ window.T, axis=-1)


def argmax_logits(logits):
    return (jnp.argmax(logits, axis=-1), jnp.argmax(logits, axis=0),
            jnp.argmax(logits.astype(jnp.bfloat16), axis=-1))


def rope(x, pos, inv_freq):
    """Rotary embedding: the two halves of each row rotated by cos/sin of position * frequency."""
    ang = pos.astype(jnp.float32)[:, None] * inv_freq[None, :]
    x1, x2 = jnp.split(x, 2, axis=-1)
    c, s = jnp.cos(ang), jnp.sin(ang)
    return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def gathers(x, rows, cols, idx, cube, start):
    """Other gathers jax emits: take_along_axis (batching dims), a point gather x[rows, cols]
    (index vectors of two), a column gather, and a 2-d dynamic slice."""
    return (jnp.take_along_axis(x, idx, axis=1, mode="clip"), x[rows, cols], x[:, cols],
            jax.lax.dynamic_slice(cube, (start, 1, start), (2, 3, 4)))


def int8_linear(x, w, scale, bias):
    """An int8 linear layer as XLA reads one: s8 operands, the products summed into s32, then
    rescaled in f32."""
    acc = jax.lax.dot(x, w, preferred_element_type=jnp.int32)
    return acc, acc.astype(jnp.float32) * scale + bias


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


def as_saved(a):
    a = np.asarray(a)
    return a.astype(np.int32 if np.issubdtype(a.dtype, np.integer) else np.float32)


def export(outdir, name, fn, args, donate=()):
    path = os.path.join(outdir, name)
    os.makedirs(path, exist_ok=True)
    jitted = jax.jit(fn, donate_argnums=donate)
    lowered = jitted.lower(*args)
    with open(os.path.join(path, "module.hlo"), "w") as f:
        f.write(lowered.as_text(dialect="hlo"))
    with open(os.path.join(path, "module_opt.hlo"), "w") as f:
        f.write(strip_debug_sections(lowered.compile().as_text()))
    for i, a in enumerate(args):
        np.save(os.path.join(path, f"param{i}.npy"), as_saved(a))
    outs = jitted(*[jnp.array(a) for a in args])  # copies: donated buffers are consumed
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    for i, o in enumerate(outs):
        np.save(os.path.join(path, f"out{i}.npy"), as_saved(o))


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


def indexing_cases():
    """The cases of gather, dynamic-slice, dynamic-update-slice, argmax and sin/cos."""
    k = jax.random.split(jax.random.PRNGKey(5), 12)
    n = lambda key, shape: jax.random.normal(key, shape, jnp.float32)
    ids = np.array([[3, 0, 49, 7, 60, -2, 12, 3], [1, 1, 2, 48, 5, 6, 70, 9]], np.int32)
    inf, nan = np.inf, np.nan
    logits = np.array([[1, 3, 3, 0, 3, -1, 2, 3, 0, 0, 1, 2, 3, 0, 1, 2],
                       [0, 5, nan, 7, nan, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 0],
                       [-inf] * 16,
                       [-inf, -0.0, inf, 4, inf, 0.0, -2, nan, 1, 2, 3, 4, 5, 6, 7, 8]], np.float32)
    return {
        "embedding_layernorm": (embedding_layernorm,
                                (n(k[0], (50, 32)), ids, n(k[1], (8, 32)), 1.0 + 0.1 * n(k[2], (32,)),
                                 0.1 * n(k[3], (32,))), ()),
        "decode_step": (decode_step, (n(k[4], (32, 16)), n(k[5], (1, 16)), n(k[6], (1, 16)), np.int32(11)), (0,)),
        "argmax_logits": (argmax_logits, (logits,), ()),
        "rope": (rope, (n(k[7], (16, 32)), np.arange(16, dtype=np.int32) * 3,
                        (1.0 / 10000 ** (np.arange(16) / 16)).astype(np.float32)), ()),
        "gathers": (gathers, (n(k[8], (6, 10)), np.array([0, 5, 9, 2], np.int32), np.array([1, 12, -3, 4], np.int32),
                              np.array([[0, 9], [3, 3], [11, -1], [5, 2], [8, 8], [1, 0]], np.int32),
                              n(k[9], (4, 5, 6)), np.int32(3)), ()),
    }


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worked-example":
        worked_example(sys.argv[2])
        return
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    only = set(sys.argv[2:])
    want = lambda name: not only or name in only
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.normal(k1, (64, 96), jnp.float32)
    w = (jax.random.normal(k2, (96, 160), jnp.float32) * 96 ** -0.5).astype(jnp.float32)
    b = (0.1 * jax.random.normal(k3, (160,), jnp.float32)).astype(jnp.float32)
    if want("matmul_bias_gelu"):
        export(outdir, "matmul_bias_gelu", matmul_bias_gelu, (x, w, b))
    kx, ky = jax.random.split(jax.random.PRNGKey(3))
    if want("ops_zoo"):
        export(outdir, "ops_zoo", ops_zoo, (jax.random.normal(kx, (8, 24), jnp.float32),
                                           jax.random.normal(ky, (8, 24), jnp.float32)))
    args = layer_args(jax.random.PRNGKey(1), 16, 64, 128)
    if want("layer_f32"):
        export(outdir, "layer_f32", lambda *a: transformer_layer(*a, heads=2, dot_dtype=jnp.float32), args)
    if want("layer_bf16"):
        export(outdir, "layer_bf16", lambda *a: transformer_layer(*a, heads=2, dot_dtype=jnp.bfloat16), args)
    for name, (fn, case_args, donate) in indexing_cases().items():
        if want(name):
            export(outdir, name, fn, case_args, donate)
    if want("int8_linear"):
        rng = np.random.default_rng(8)
        x = rng.integers(-128, 128, size=(40, 600), dtype=np.int8)
        w = rng.integers(-128, 128, size=(600, 72), dtype=np.int8)
        x[0, :] = -128  # -128 * -128 over all of k in output (0, 0)
        w[:, 0] = -128
        scale = (rng.random(72, dtype=np.float32) * 1e-3).astype(np.float32)
        bias = rng.standard_normal(72, dtype=np.float32)
        export(outdir, "int8_linear", int8_linear, (x, w, scale, bias))


if __name__ == "__main__":
    main()
