"""The race's models, their weights and a float64 NumPy reference of the function they compute.

The function is fusedsl's (include/fusedsl/expr/nn.hpp, emit_transformer_block), layer after layer:
  post-LN: h = LN1(x + attn(x));   y = LN2(h + ffn(h))
  pre-LN:  h = x + attn(LN1(x));   y = h + ffn(LN2(h))
  attn(x) = merge_heads(softmax(mask(q k^T / sqrt(d_head))) v) Wo + bo, q = x Wq + bq (k, v alike)
  ffn(x)  = gelu_tanh(x W1 + b1) W2 + b2
  LN(x)   = gamma (x - mean) / sqrt(var + 1e-5) + beta, biased variance, over d_model
with causal masking (query i sees keys 0..i) where the model says so, and no final layernorm.
Linear weights are [in, out] and named "layers.<i>.attn.q.w", "layers.<i>.ffn.fc1.b", ...
"""
import math
import os

# NumPy is imported by the functions that need it, so that the report (report.py, race.py
# report) runs on the standard library alone.

# name: seq, d_model, heads, ffn, layers, pre_ln, causal. benchmarks/race/race_models.hpp holds the
# same models as fusedsl types; the driver checks `race_<model> --describe` against this.
MODELS = {
    "seed": dict(seq=128, d=128, heads=4, ffn=512, layers=2, pre_ln=False, causal=False),
    "medium": dict(seq=512, d=512, heads=8, ffn=2048, layers=2, pre_ln=False, causal=False),
    "gpt2_seq128": dict(seq=128, d=768, heads=12, ffn=3072, layers=12, pre_ln=True, causal=True),
    "gpt2_seq1024": dict(seq=1024, d=768, heads=12, ffn=3072, layers=12, pre_ln=True,
                         causal=True),
    "quick_post_ln": dict(seq=32, d=64, heads=4, ffn=128, layers=2, pre_ln=False, causal=False),
    "quick_pre_ln": dict(seq=48, d=64, heads=4, ffn=256, layers=3, pre_ln=True, causal=True),
}

TITLES = {
    "seed": "seed: 2 post-LN layers, d 128, 4 heads, FFN 512, seq 128",
    "medium": "medium: 2 post-LN layers, d 512, 8 heads, FFN 2048, seq 512",
    "gpt2_seq128": "GPT-2 small stack: 12 pre-LN causal layers, d 768, 12 heads, FFN 3072, seq 128",
    "gpt2_seq1024": "GPT-2 small stack, seq 1024",
    "quick_post_ln": "quick: 2 post-LN layers, d 64, 4 heads, FFN 128, seq 32",
    "quick_pre_ln": "quick: 3 pre-LN causal layers, d 64, 4 heads, FFN 256, seq 48",
}

LAYERNORM_EPS = 1e-5
WEIGHT_STD = 0.05


def flops(cfg):
    """Matmul FLOPs of one call, 2 per multiply-add: the four projections, Q K^T and P V (causal
    masking not halved) and the FFN's two GEMMs (fusedsl::models::transformer::flops())."""
    l, d, f = cfg["seq"], cfg["d"], cfg["ffn"]
    return cfg["layers"] * (2 * l * d * d * 4 + 2 * l * l * d * 2 + 2 * l * d * f * 2)


def binding_names(cfg):
    """(name, shape) of every binding, "x" first."""
    d, f = cfg["d"], cfg["ffn"]
    out = [("x", (cfg["seq"], d))]
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
    initialisation); biases and betas normal(0, 0.05), gammas 1 + normal(0, 0.05). Activations of
    unit scale make the output check sensitive: GELU-erf and GELU-tanh differ most near |x| ~ 2.
    Returns {name: array}."""
    import numpy as np

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in binding_names(cfg):
        if name == "x":
            a = rng.standard_normal(shape)
        elif len(shape) == 2:
            a = rng.standard_normal(shape) / math.sqrt(shape[0])
        else:
            a = (1.0 if name.endswith(".gamma") else 0.0) + WEIGHT_STD * rng.standard_normal(shape)
        w[name] = a.astype(np.float32)
        np.save(os.path.join(directory, name + ".npy"), w[name])
    return w


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


def reference(cfg, w, dtype="float64", gelu=gelu_tanh, causal=None, pre_ln=None):
    """The model on w["x"] in `dtype`. `gelu`, `causal` and `pre_ln` can be changed to build a
    wrong model on purpose (the driver's check must refuse it)."""
    import numpy as np

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
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        if causal:
            s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = (s @ v).transpose(1, 0, 2).reshape(seq, d)
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


# A peer's output must satisfy max |y - y_fusedsl| <= TOLERANCE * max |y_fusedsl|, with every
# element finite. With make_weights' scaling, an f32 NumPy run of these models is 3e-7 to 1e-6 of
# the output's scale off a float64 one; a wrong function is off by more: GELU-erf for GELU-tanh by
# 1.4e-4 to 2.1e-4, a flipped causal mask or norm placement by 0.5 or more (`race.py run --quick`
# checks that each is refused).
TOLERANCE = 2e-5


def relative_error(y, want):
    """max |y - want| / max |want|; inf when y has a NaN or inf or the shapes differ."""
    import numpy as np

    y = np.asarray(y, np.float64)
    want = np.asarray(want, np.float64)
    if y.shape != want.shape or not np.isfinite(y).all():
        return math.inf
    scale = float(np.abs(want).max())
    return float(np.abs(y - want).max()) / scale if scale > 0 else math.inf
