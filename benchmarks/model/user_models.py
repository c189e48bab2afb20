#!/usr/bin/env python3
"""Transformer variants written as users write them (benchmarks/model/user_models.hpp), fusedsl's
CPU executor against PyTorch eager and torch.compile on one thread, in one run.

  user_models.py --build BUILD --out FILE.json [--models M ...] [--rounds R] [--round-seconds S]
  user_models.py --build BUILD --check-only [--models M ...]

Per model: `user_model_<m> --describe` gives the bindings and the plan (kernels by kind, copy
kernels, GEMMs packing B per call, kernels computed from constants or parameters only); seeded
weights are written as .npy (inputs normal(0, 1); a linear weight [.., in, out] normal(0, 1/in);
norms' gains 1 + normal(0, 0.05); biases, betas and embeddings normal(0, 0.05); T5's bias table
normal(0, 0.5)); the same function in PyTorch (below) runs in float64 as the reference, and
fusedsl's output and PyTorch's float32 output must each be within TOLERANCE of it (max |diff| over
max |reference|) before anything is timed. Then interleaved rounds: in round r each peer (fusedsl
in its own process, PyTorch eager and torch.compile in this one, all pinned to CPU 1, one thread)
runs K calls after one untimed call, the order rotated by r; K is set from a warm-up so that a
round takes about --round-seconds. A peer's figure is the median over rounds of its mean call
time; fusedsl's is also given as a fraction of the FMA-chain peak of CPU 1, measured at the start
and at the end of the run (the better one), with FLOPS's matmul FLOPs (2 per multiply-add;
causal attention not halved). Needs torch and numpy (benchmarks/record.py's --torch-python).
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

MODELS = ["gptj_interleaved", "gptj_halves", "t5_decoder", "moe_dense", "moe_top2",
          "moe_top2_routed", "alibi_block", "vit_block"]
TOLERANCE = 1e-4


def attention_flops(lq, lk, d):
    return 2 * 2 * lq * lk * d


# Matmul FLOPs of one call, per model.
FLOPS = {
    "gptj_interleaved": 2 * 128 * 512 * (4 * 512 + 2 * 2048) + attention_flops(128, 128, 512),
    "t5_decoder": 2 * 128 * 512 * (6 * 512 + 2 * 2048) + 2 * 96 * 512 * 2 * 512 +
    attention_flops(128, 128, 512) + attention_flops(128, 96, 512),
    "moe_dense": 2 * 128 * 512 * 8 + 8 * 3 * 2 * 128 * 512 * 1024,
    "alibi_block": 2 * 128 * 512 * (4 * 512 + 2 * 2048) + attention_flops(128, 128, 512),
    "vit_block": 2 * 64 * 192 * 384 + 2 * 65 * 384 * (4 * 384 + 2 * 1536) +
    attention_flops(65, 65, 384),
}
FLOPS["gptj_halves"] = FLOPS["gptj_interleaved"]
FLOPS["moe_top2"] = FLOPS["moe_dense"]
# the router, the slots' [T, T] x [T, E] count and 8 experts on 40 rows each
FLOPS["moe_top2_routed"] = 2 * 128 * 512 * 8 + 2 * 128 * 128 * 8 + 8 * 3 * 2 * 40 * 512 * 1024
CPU = 1  # one core for every peer; CPU 0 carries the system


# ---- the functions, in PyTorch (w: name -> tensor; one dtype) ----

def layernorm(x, w, p, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), w[p + ".gamma"], w[p + ".beta"], eps)


def rmsnorm(x, g, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g


def attention(w, p, xq, xkv, heads, scale=None, causal=False, bias=None):
    """nn::attention: linears with biases, [in, out] weights, heads split from the last axis."""
    lq, lk, d = xq.shape[0], xkv.shape[0], w[p + ".q.w"].shape[1]
    dh = d // heads
    q = (xq @ w[p + ".q.w"] + w[p + ".q.b"]).view(lq, heads, dh).transpose(0, 1)
    k = (xkv @ w[p + ".k.w"] + w[p + ".k.b"]).view(lk, heads, dh).transpose(0, 1)
    v = (xkv @ w[p + ".v.w"] + w[p + ".v.b"]).view(lk, heads, dh).transpose(0, 1)
    s = q @ k.transpose(-1, -2) * (1 / math.sqrt(dh) if scale is None else scale)
    if bias is not None:
        s = s + bias
    if causal:
        keep = torch.ones(lq, lk, dtype=torch.bool).tril(lk - lq)
        s = s.masked_fill(~keep, float("-inf"))
    o = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(lq, d)
    return o @ w[p + ".o.w"] + w[p + ".o.b"]


def ffn(w, x, act):
    return act(x @ w["ffn.fc1.w"] + w["ffn.fc1.b"]) @ w["ffn.fc2.w"] + w["ffn.fc2.b"]


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def gptj(w, interleaved):
    x = w["x"]
    L, D, H, R = x.shape[0], x.shape[1], 8, 32
    dh = D // H
    h = layernorm(x, w, "ln")
    i = torch.arange(R // 2, dtype=x.dtype)
    ang = torch.arange(L, dtype=x.dtype)[:, None] * torch.exp(i * (-2 * math.log(10000.0) / R))
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]  # [L, 1, R/2]

    def rotate(t):
        t = t.view(L, H, dh)
        rot, rest = t[..., :R], t[..., R:]
        if interleaved:  # GPT-J's rotate_every_two
            a, b = rot[..., 0::2], rot[..., 1::2]
            rot = torch.stack((a * c - b * s, b * c + a * s), -1).flatten(-2)
        else:
            a, b = rot[..., :R // 2], rot[..., R // 2:]
            rot = torch.cat((a * c - b * s, b * c + a * s), -1)
        return torch.cat((rot, rest), -1).transpose(0, 1)

    q, k = rotate(h @ w["attn.q.w"]), rotate(h @ w["attn.k.w"])
    v = (h @ w["attn.v.w"]).view(L, H, dh).transpose(0, 1)
    sc = (q @ k.transpose(-1, -2)) * 0.125
    sc = sc.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    o = (torch.softmax(sc, -1) @ v).transpose(0, 1).reshape(L, D) @ w["attn.o.w"]
    return x + o + ffn(w, h, gelu_tanh)


def t5_buckets(L, dtype):
    """T5's unidirectional relative-position buckets (32, max distance 128) of query i, key j."""
    pos = torch.arange(L)
    n = (pos[:, None] - pos[None, :]).clamp(min=0)
    nf = n.clamp(min=1).to(dtype)
    large = (16 + (torch.log(nf / 16) / math.log(8.0) * 16).to(torch.int64)).clamp(max=31)
    return torch.where(n < 16, n, large)


def t5(w):
    x, enc = w["x"], w["enc"]
    bias = w["rel_bias"][t5_buckets(x.shape[0], x.dtype)].permute(2, 0, 1)  # [H, L, L]
    h1 = x + attention(w, "self", rmsnorm(x, w["ln1"]), rmsnorm(x, w["ln1"]), 8, 1.0, True, bias)
    n2 = rmsnorm(h1, w["ln2"])
    h2 = h1 + attention(w, "cross", n2, enc, 8, 1.0)
    return h2 + torch.relu(rmsnorm(h2, w["ln3"]) @ w["ffn.wi.w"]) @ w["ffn.wo.w"]


def top2_gates(w, x):
    """models::moe_top2_gates: softmax router, kept at each token's two largest, renormalised."""
    gate = torch.softmax(x @ w["router.w"], -1)  # [T, E]
    top = torch.topk(gate, 2, dim=1)
    kept = torch.zeros_like(gate).scatter(1, top.indices, top.values)
    return kept / kept.sum(1, keepdim=True)


def experts(w, x):
    """SwiGLU expert e on x[e] (or on x for every expert): [E, rows, D]."""
    g = torch.matmul(x, w["experts.gate"])
    return (F.silu(g) * torch.matmul(x, w["experts.up"])) @ w["experts.down"]


def moe(w, top2):
    x = w["x"]
    gates = top2_gates(w, x) if top2 else torch.softmax(x @ w["router.w"], -1)
    return (experts(w, x) * gates.t()[:, :, None]).sum(0)


def moe_routed(w, capacity):
    """models::moe_routed: each expert on at most `capacity` of the tokens routed to it, in token
    order (a token's slot: how many earlier tokens chose the expert), static shapes throughout."""
    x = w["x"]
    T, E = x.shape[0], w["router.w"].shape[1]
    gates = top2_gates(w, x)
    chosen = (gates > 0).to(x.dtype)
    slot = torch.cumsum(chosen, 0) - chosen  # [T, E]
    routed = torch.where(slot < capacity, chosen, 0.0)
    in_slot = (slot.t()[:, None, :] == torch.arange(capacity, dtype=x.dtype)[None, :, None])
    token = (in_slot * routed.t()[:, None, :] * torch.arange(T, dtype=x.dtype)).sum(2)
    out = experts(w, x[token.long()])  # [E, capacity, D]
    row = (torch.arange(E)[None, :] * capacity + slot.clamp(max=capacity - 1).long())  # [T, E]
    back = out.reshape(E * capacity, -1)[row]  # [T, E, D]
    return (back * (gates * routed)[:, :, None]).sum(1)


def alibi(w):
    x = w["x"]
    L, H = x.shape[0], 8
    slope = torch.exp((torch.arange(H, dtype=x.dtype) + 1) * (-8 * math.log(2.0) / H))
    bias = slope[:, None, None] * torch.arange(L, dtype=x.dtype)[None, None, :]  # [H, 1, L]
    h = x + attention(w, "attn", layernorm(x, w, "ln1"), layernorm(x, w, "ln1"), H, None, True,
                      bias)
    return h + ffn(w, layernorm(h, w, "ln2"), gelu_tanh)


def vit(w):
    img = w["image"]
    C, G, P = 3, 8, 8
    patches = img.reshape(C, G, P, G, P).permute(1, 3, 0, 2, 4).reshape(G * G, C * P * P)
    t = torch.cat((w["cls"], patches @ w["patch.w"] + w["patch.b"]), 0) + w["pos"]
    n1 = layernorm(t, w, "ln1")
    h = t + attention(w, "attn", n1, n1, 6)
    y = h + ffn(w, layernorm(h, w, "ln2"), F.gelu)
    return layernorm(y, w, "norm")[0:1]


FUNCTIONS = {"gptj_interleaved": lambda w: gptj(w, True), "gptj_halves": lambda w: gptj(w, False),
             "t5_decoder": t5, "moe_dense": lambda w: moe(w, False),
             "moe_top2": lambda w: moe(w, True), "moe_top2_routed": lambda w: moe_routed(w, 40),
             "alibi_block": alibi, "vit_block": vit}


# ---- weights, peers, rounds ----

def make_weights(bindings, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for b in bindings:
        name, shape = b["name"], tuple(b["shape"])
        leaf = name.rsplit(".", 1)[-1]
        if b["kind"] == "input":
            v = rng.normal(0, 1, shape)
        elif name == "rel_bias":
            v = rng.normal(0, 0.5, shape)
        elif len(shape) >= 2 and name not in ("cls", "pos"):
            v = rng.normal(0, 1 / math.sqrt(shape[-2]), shape)
        elif leaf == "gamma" or name.startswith("ln"):
            v = 1 + rng.normal(0, 0.05, shape)
        else:
            v = rng.normal(0, 0.05, shape)
        out[name] = v.astype(np.float32)
    return out


def peer_reply(proc):
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"user_models: the fusedsl peer ended: {proc.stderr.read()}")
        if line.startswith("@@user "):
            return json.loads(line[len("@@user "):])


def fma_peak(binary):
    out = subprocess.run(["taskset", "-c", str(CPU), binary, "--fma-peak"], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.split("@@user ", 1)[1])["fma_peak_flops"]


def describe(binary):
    out = subprocess.run([binary, "--describe"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.split("@@user ", 1)[1])


class FusedslPeer:
    def __init__(self, binary, weight_dir, output):
        self.proc = subprocess.Popen(["taskset", "-c", str(CPU), binary, "--weights", weight_dir,
                                      "--output", output], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready = peer_reply(self.proc)

    def round(self, calls):
        self.proc.stdin.write(f"run {calls}\n")
        self.proc.stdin.flush()
        return statistics.fmean(peer_reply(self.proc)["times"])

    def close(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait()


class TorchPeer:
    def __init__(self, fn, weights, compiled):
        w = {k: torch.from_numpy(v) for k, v in weights.items()}
        f = (lambda: fn(w))
        self.fn = torch.compile(f) if compiled else f
        t0 = time.perf_counter()
        with torch.inference_mode():
            self.out = self.fn().numpy()
        self.setup_seconds = time.perf_counter() - t0

    def round(self, calls):
        with torch.inference_mode():
            self.fn()
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                self.fn()
                times.append(time.perf_counter() - t0)
        return statistics.fmean(times)


def error(a, ref):
    a = np.asarray(a, np.float64)
    if a.shape != ref.shape or not np.all(np.isfinite(a)):
        return float("inf")
    return float(np.max(np.abs(a - ref)) / max(np.max(np.abs(ref)), 1e-30))


def run_model(name, build, rounds, round_seconds, check_only, seed):
    binary = os.path.join(build, "benchmarks", "model", f"user_model_{name}")
    desc = describe(binary)
    weights = make_weights(desc["bindings"], seed)
    ref = FUNCTIONS[name]({k: torch.from_numpy(v.astype(np.float64)) for k, v in
                           weights.items()}).numpy()
    if name == "t5_decoder":  # the buckets must not depend on the precision of the log
        L = weights["x"].shape[0]
        if not torch.equal(t5_buckets(L, torch.float32), t5_buckets(L, torch.float64)):
            raise SystemExit("user_models: T5's buckets differ between float32 and float64")
    with tempfile.TemporaryDirectory() as tmp:
        for k, v in weights.items():
            np.save(os.path.join(tmp, k + ".npy"), v)
        fused = FusedslPeer(binary, tmp, os.path.join(tmp, "out.npy"))
        eager = TorchPeer(FUNCTIONS[name], weights, False)
        result = {"plan": desc["plan"], "isa": desc["isa"], "flops": FLOPS[name],
                  "constant_kernels_computed_once": desc["constant_kernels_computed_once"],
                  "parameter_kernels_computed_at_bind":
                      desc["parameter_kernels_computed_at_bind"],
                  "interpreted_groups": fused.ready["interpreted_groups"],
                  "error": {"fusedsl": error(np.load(os.path.join(tmp, "out.npy")), ref),
                            "torch_eager": error(eager.out, ref)}}
        bad = [p for p, e in result["error"].items() if not e <= TOLERANCE]
        if bad:
            fused.close()
            raise SystemExit(f"user_models: {name}: {', '.join(bad)} differ from the float64 "
                             f"reference: {result['error']}")
        if check_only:
            fused.close()
            return result
        compiled = TorchPeer(FUNCTIONS[name], weights, True)
        result["error"]["torch_compile"] = error(compiled.out, ref)
        result["torch_compile_setup_seconds"] = compiled.setup_seconds
        peers = {"fusedsl": fused, "torch_eager": eager, "torch_compile": compiled}
        calls = {}
        for key, p in peers.items():  # warm-up: K for a round of about round_seconds
            t = p.round(2)
            calls[key] = max(2, int(round_seconds / max(t, 1e-6)))
        times = {key: [] for key in peers}
        order = list(peers)
        for r in range(rounds):
            for key in order[r % len(order):] + order[:r % len(order)]:
                times[key].append(peers[key].round(calls[key]))
        fused.close()
    result["calls_per_round"] = calls
    result["seconds"] = {k: {"median": statistics.median(v), "rounds": v} for k, v in times.items()}
    med = {k: v["median"] for k, v in result["seconds"].items()}
    result["speedup_vs_torch_eager"] = med["torch_eager"] / med["fusedsl"]
    result["speedup_vs_torch_compile"] = med["torch_compile"] / med["fusedsl"]
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", required=True)
    p.add_argument("--out")
    p.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--round-seconds", type=float, default=0.5)
    p.add_argument("--check-only", action="store_true")
    p.add_argument("--seed", type=int, default=5)
    a = p.parse_args(argv)
    if not a.check_only and not a.out:
        p.error("--out is needed unless --check-only")
    os.sched_setaffinity(0, {CPU})
    torch.set_num_threads(1)
    peak = os.path.join(a.build, "benchmarks", "model", f"user_model_{a.models[0]}")
    peaks = [] if a.check_only else [fma_peak(peak)]
    results = {}
    for m in a.models:
        results[m] = run_model(m, a.build, a.rounds, a.round_seconds, a.check_only, a.seed)
        r = results[m]
        line = f"{m}: error {r['error']}, {r['plan']['kernels']} kernels"
        if "seconds" in r:
            line += (f", fusedsl {r['seconds']['fusedsl']['median'] * 1e3:.3f} ms, "
                     f"{r['speedup_vs_torch_eager']:.2f}x eager, "
                     f"{r['speedup_vs_torch_compile']:.2f}x torch.compile")
        print(line, flush=True)
    if not a.check_only:
        peaks.append(fma_peak(peak))
        for r in results.values():
            r["peak_fraction"] = r["flops"] / r["seconds"]["fusedsl"]["median"] / max(peaks)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"torch": torch.__version__, "fma_peak_flops": peaks, "python": platform.python_version(),
                       "threads": 1, "rounds": a.rounds, "round_seconds": a.round_seconds,
                       "tolerance": TOLERANCE, "models": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
