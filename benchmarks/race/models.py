"""The race's models, their weights and a float64 NumPy reference of the function they compute.

The function is fusedsl's (include/fusedsl/expr/nn.hpp, emit_transformer_block), layer after layer:
  post-LN: h = LN1(x + attn(x));   y = LN2(h + ffn(h))
  pre-LN:  h = x + attn(LN1(x));   y = h + ffn(LN2(h))
  attn(x) = merge_heads(softmax(mask(q k^T / sqrt(d_head))) v) Wo + bo, q = x Wq + bq (k, v alike)
  ffn(x)  = gelu_tanh(x W1 + b1) W2 + b2
  LN(x)   = gamma (x - mean) / sqrt(var + 1e-5) + beta, biased variance, over d_model
with causal masking (query i sees keys 0..i) where the model says so, and no final layernorm.
Linear weights are [in, out] and named "layers.<i>.attn.q.w", "layers.<i>.ffn.fc1.b", ...
The model with arch="llama" is one LLaMA-style block instead (fusedsl's models::llama_block,
include/fusedsl/models/llama.hpp): pre-RMSNorm, rotary embeddings on queries and keys (the two
halves of each head rotated by the angles whose cos and sin are inputs, as Hugging Face's LLaMA
does), grouped-query causal attention (query head h reads key/value head h // (heads / kv_heads)),
no biases, and a SwiGLU feed-forward:
  h = x + o(attention(rope(q(n1)), rope(k(n1)), v(n1)))      n1 = RMSNorm(x) * attn_norm
  y = h + down(silu(gate(n2)) * up(n2))                      n2 = RMSNorm(h) * ffn_norm
  RMSNorm(x) = x / sqrt(mean(x^2) + 1e-5) over d_model
A model with weights="bf16" has every linear's weight rounded to bfloat16 (the weight files hold
them as float32 values that are bf16 numbers); its peers compute in bf16 (fusedsl on AMX-BF16
tiles, PyTorch with the model in torch.bfloat16), so their outputs are held to BF16_TOLERANCE.
"""
import math
import os

# NumPy is imported by the functions that need it, so that the report (report.py, race.py
# report) runs on the standard library alone.

# name: seq, d_model, heads, ffn, layers, pre_ln, causal (and weights, "f32" when not given; arch,
# "transformer" when not given, or "llama" with kv_heads).
# benchmarks/race/race_models.hpp holds the same models as fusedsl types; the driver checks
# `race_<model> --describe` against this.
MODELS = {
    "seed": dict(seq=128, d=128, heads=4, ffn=512, layers=2, pre_ln=False, causal=False),
    "medium": dict(seq=512, d=512, heads=8, ffn=2048, layers=2, pre_ln=False, causal=False),
    "gpt2_seq128": dict(seq=128, d=768, heads=12, ffn=3072, layers=12, pre_ln=True, causal=True),
    "gpt2_seq1024": dict(seq=1024, d=768, heads=12, ffn=3072, layers=12, pre_ln=True,
                         causal=True),
    "seed_bf16": dict(seq=128, d=128, heads=4, ffn=512, layers=2, pre_ln=False, causal=False,
                      weights="bf16"),
    "medium_bf16": dict(seq=512, d=512, heads=8, ffn=2048, layers=2, pre_ln=False, causal=False,
                        weights="bf16"),
    "llama": dict(arch="llama", seq=256, d=512, heads=8, kv_heads=2, ffn=1376, layers=1,
                  pre_ln=True, causal=True),
    "quick_post_ln": dict(seq=32, d=64, heads=4, ffn=128, layers=2, pre_ln=False, causal=False),
    "quick_pre_ln": dict(seq=48, d=64, heads=4, ffn=256, layers=3, pre_ln=True, causal=True),
    "quick_llama": dict(arch="llama", seq=40, d=64, heads=4, kv_heads=2, ffn=96, layers=1,
                        pre_ln=True, causal=True),
}

TITLES = {
    "seed": "seed: 2 post-LN layers, d 128, 4 heads, FFN 512, seq 128",
    "medium": "medium: 2 post-LN layers, d 512, 8 heads, FFN 2048, seq 512",
    "gpt2_seq128": "GPT-2 small stack: 12 pre-LN causal layers, d 768, 12 heads, FFN 3072, seq 128",
    "gpt2_seq1024": "GPT-2 small stack, seq 1024",
    "seed_bf16": "seed with bf16 weights",
    "medium_bf16": "medium with bf16 weights",
    "llama": "LLaMA-style block: RMSNorm, RoPE, 8 heads of 64 with 2 kv heads, causal, SwiGLU "
             "1376, d 512, seq 256",
    "quick_post_ln": "quick: 2 post-LN layers, d 64, 4 heads, FFN 128, seq 32",
    "quick_pre_ln": "quick: 3 pre-LN causal layers, d 64, 4 heads, FFN 256, seq 48",
    "quick_llama": "quick: a LLaMA-style block, d 64, 4 heads of 16 with 2 kv heads, SwiGLU 96, "
                   "seq 40",
}

LAYERNORM_EPS = 1e-5
RMSNORM_EPS = 1e-5
ROPE_BASE = 10000.0
WEIGHT_STD = 0.05


def is_llama(cfg):
    return cfg.get("arch", "transformer") == "llama"


def flops(cfg):
    """Matmul FLOPs of one call, 2 per multiply-add: the four projections, Q K^T and P V (causal
    masking not halved) and the FFN's two GEMMs (fusedsl::models::transformer::flops()); for the
    LLaMA block, Q, K and V (K and V kv_heads wide), O, the scores and P V, and SwiGLU's three."""
    l, d, f = cfg["seq"], cfg["d"], cfg["ffn"]
    if is_llama(cfg):
        kv = cfg["kv_heads"] * (d // cfg["heads"])
        return cfg["layers"] * (2 * l * d * (d + 2 * kv) + 2 * 2 * l * l * d + 2 * l * d * d +
                                3 * 2 * l * d * f)
    return cfg["layers"] * (2 * l * d * d * 4 + 2 * l * l * d * 2 + 2 * l * d * f * 2)


def binding_names(cfg):
    """(name, shape) of every binding, "x" first."""
    d, f = cfg["d"], cfg["ffn"]
    out = [("x", (cfg["seq"], d))]
    if is_llama(cfg):
        dh = d // cfg["heads"]
        kv = cfg["kv_heads"] * dh
        out += [("cos", (cfg["seq"], dh // 2)), ("sin", (cfg["seq"], dh // 2)),
                ("attn_norm", (d,)), ("attn.q.w", (d, d)), ("attn.k.w", (d, kv)),
                ("attn.v.w", (d, kv)), ("attn.o.w", (d, d)), ("ffn_norm", (d,)),
                ("ffn.gate.w", (d, f)), ("ffn.up.w", (d, f)), ("ffn.down.w", (f, d))]
        return out
    for i in range(cfg["layers"]):
        p = f"layers.{i}."
        for proj in "qkvo":
            out += [(p + f"attn.{proj}.w", (d, d)), (p + f"attn.{proj}.b", (d,))]
        out += [(p + "ffn.fc1.w", (d, f)), (p + "ffn.fc1.b", (f,)),
                (p + "ffn.fc2.w", (f, d)), (p + "ffn.fc2.b", (d,))]
        for ln in ("ln1", "ln2"):
            out += [(p + f"{ln}.gamma", (d,)), (p + f"{ln}.beta", (d,))]
    return out


def make_weights(cfg, directory, seed):
    """Writes <directory>/<binding>.npy for every binding: x ~ normal(0, 1); a linear's weight
    [in, out] ~ normal(0, 1 / in), so that every linear's output has about unit scale (LeCun's
    initialisation); biases and betas normal(0, 0.05), gammas and RMSNorm weights 1 + normal(0,
    0.05); the LLaMA block's cos and sin those of the rotary angles p * ROPE_BASE^(-2i / head_dim)
    of positions p and frequencies i. Activations of unit scale make the output check sensitive:
    GELU-erf and GELU-tanh differ most near |x| ~ 2. Returns {name: array}."""
    import numpy as np

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in binding_names(cfg):
        if name in ("cos", "sin"):
            angles = rope_angles(shape[0], 2 * shape[1])
            a = np.cos(angles) if name == "cos" else np.sin(angles)
        elif name == "x":
            a = rng.standard_normal(shape)
        elif len(shape) == 2:
            a = rng.standard_normal(shape) / math.sqrt(shape[0])
        else:
            a = (1.0 if name.endswith((".gamma", "_norm")) else 0.0) + \
                WEIGHT_STD * rng.standard_normal(shape)
        w[name] = a.astype(np.float32)
        if len(shape) == 2 and name not in ("x", "cos", "sin") and is_bf16(cfg):
            w[name] = round_to_bf16(w[name])
        np.save(os.path.join(directory, name + ".npy"), w[name])
    return w


def rope_angles(seq, head_dim):
    """[seq, head_dim / 2] rotary angles: position p, frequency i -> p * ROPE_BASE^(-2i/head_dim)
    (Su et al., 2021), in float64."""
    import numpy as np

    inv = ROPE_BASE ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return np.arange(seq, dtype=np.float64)[:, None] * inv[None, :]


def is_bf16(cfg):
    return cfg.get("weights", "f32") == "bf16"


def round_to_bf16(a):
    """float32 array -> float32 array of the nearest bfloat16 numbers (ties to even; fusedsl::bf16's
    rounding, which is also torch's)."""
    import numpy as np

    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32)


def tolerance(cfg):
    """The output check's tolerance for a model (TOLERANCE, or BF16_TOLERANCE for bf16 weights)."""
    return BF16_TOLERANCE if is_bf16(cfg) else TOLERANCE


def load_weights(cfg, directory):
    import numpy as np
    return {name: np.load(os.path.join(directory, name + ".npy")) for name, _ in binding_names(cfg)}


def gelu_tanh(x):
    import numpy as np
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    import numpy as np
    erf = np.vectorize(math.erf, otypes=[x.dtype])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def attention_weights(q, k, causal):
    """softmax(q kᵀ / sqrt(head_dim)) per head, q and k [heads, seq, head_dim]; query i sees keys
    0..i where causal."""
    import numpy as np

    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    return s / s.sum(-1, keepdims=True)


def reference(cfg, w, dtype="float64", gelu=gelu_tanh, causal=None, pre_ln=None, **llama):
    """The model on w["x"] in `dtype`. `gelu`, `causal` and `pre_ln` (and reference_llama's
    keywords) can be changed to build a wrong model on purpose (the driver's check must refuse
    it)."""
    import numpy as np

    if is_llama(cfg):
        return reference_llama(cfg, w, dtype, causal=causal, **llama)
    causal = cfg["causal"] if causal is None else causal
    pre_ln = cfg["pre_ln"] if pre_ln is None else pre_ln
    seq, d, heads = cfg["seq"], cfg["d"], cfg["heads"]
    dh = d // heads
    p = {k: v.astype(dtype) for k, v in w.items()}

    def ln(x, prefix):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + LAYERNORM_EPS) * p[prefix + ".gamma"] + p[prefix + ".beta"]

    def linear(x, prefix):
        return x @ p[prefix + ".w"] + p[prefix + ".b"]

    def attn(x, prefix):
        q, k, v = (linear(x, f"{prefix}.{n}").reshape(seq, heads, dh).transpose(1, 0, 2)
                   for n in "qkv")
        o = (attention_weights(q, k, causal) @ v).transpose(1, 0, 2).reshape(seq, d)
        return linear(o, prefix + ".o")

    def ffn(x, prefix):
        return linear(gelu(linear(x, prefix + ".fc1")), prefix + ".fc2")

    x = p["x"]
    for i in range(cfg["layers"]):
        pre = f"layers.{i}."
        if pre_ln:
            x = x + attn(ln(x, pre + "ln1"), pre + "attn")
            x = x + ffn(ln(x, pre + "ln2"), pre + "ffn")
        else:
            x = ln(x + attn(x, pre + "attn"), pre + "ln1")
            x = ln(x + ffn(x, pre + "ffn"), pre + "ln2")
    return x


def reference_llama(cfg, w, dtype="float64", causal=None, rope_pairs=False, kv_cyclic=False):
    """The LLaMA block (the module docstring) on w["x"] in `dtype`. `causal`, `rope_pairs` (rotate
    interleaved pairs (x0, x1), (x2, x3), ... instead of the two halves, GPT-J's convention) and
    `kv_cyclic` (query head h reads key/value head h mod kv_heads) build a wrong model on purpose."""
    import numpy as np

    causal = cfg["causal"] if causal is None else causal
    seq, d, heads, kv_heads = cfg["seq"], cfg["d"], cfg["heads"], cfg["kv_heads"]
    dh, half = d // heads, d // heads // 2
    p = {k: v.astype(dtype) for k, v in w.items()}

    def rms(x, name):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + RMSNORM_EPS) * p[name]

    def rope(t):  # [seq, h, dh]: the halves rotated
        c, s = p["cos"][:, None, :], p["sin"][:, None, :]
        if rope_pairs:
            t1, t2 = t[..., 0::2], t[..., 1::2]
            return np.stack([t1 * c - t2 * s, t2 * c + t1 * s], -1).reshape(t.shape)
        t1, t2 = t[..., :half], t[..., half:]
        return np.concatenate([t1 * c - t2 * s, t2 * c + t1 * s], -1)

    x = p["x"]
    n1 = rms(x, "attn_norm")
    q = rope((n1 @ p["attn.q.w"]).reshape(seq, heads, dh)).transpose(1, 0, 2)
    k = rope((n1 @ p["attn.k.w"]).reshape(seq, kv_heads, dh)).transpose(1, 0, 2)
    v = (n1 @ p["attn.v.w"]).reshape(seq, kv_heads, dh).transpose(1, 0, 2)
    if kv_cyclic:
        k, v = (np.tile(t, (heads // kv_heads, 1, 1)) for t in (k, v))
    else:
        k, v = (np.repeat(t, heads // kv_heads, axis=0) for t in (k, v))
    o = (attention_weights(q, k, causal) @ v).transpose(1, 0, 2).reshape(seq, d)
    h = x + o @ p["attn.o.w"]
    n2 = rms(h, "ffn_norm")
    gate = n2 @ p["ffn.gate.w"]
    return h + (gate / (1 + np.exp(-gate)) * (n2 @ p["ffn.up.w"])) @ p["ffn.down.w"]


# A peer's output must satisfy max |y - y_fusedsl| <= TOLERANCE * max |y_fusedsl|, with every
# element finite. With make_weights' scaling, an f32 NumPy run of these models is 3e-7 to 1e-6 of
# the output's scale off a float64 one; a wrong function is off by more: GELU-erf for GELU-tanh by
# 1.4e-4 to 2.1e-4, a flipped causal mask or norm placement by 0.5 or more (`race.py run --quick`
# checks that each is refused).
TOLERANCE = 2e-5
# bf16 peers round activations to bf16 (8 significant bits) at every product, and PyTorch in bf16
# rounds every intermediate: their outputs are within a few 2^-8 of the output's scale of the
# float64 model (on the same bf16 weights) and of each other; a wrong function is farther off.
BF16_TOLERANCE = 3e-2


def relative_error(y, want):
    """max |y - want| / max |want|; inf when y has a NaN or inf or the shapes differ."""
    import numpy as np

    y = np.asarray(y, np.float64)
    want = np.asarray(want, np.float64)
    if y.shape != want.shape or not np.isfinite(y).all():
        return math.inf
    scale = float(np.abs(want).max())
    return float(np.abs(y - want).max()) / scale if scale > 0 else math.inf
