#!/usr/bin/env python3
"""A Python peer of the race: one model run by PyTorch eager, torch.compile, ONNX Runtime or XLA:CPU
(jax.jit), on the weights the driver wrote, serving the driver's timing requests.

  peer.py --peer P --model M --weights DIR --output FILE.npy --threads N [--onnx FILE]
  peer.py --export-onnx FILE --model M --weights DIR

The driver (race.py) starts each peer in its own process, pinned with taskset, with the thread
variables of its thread count in the environment (OMP_NUM_THREADS, MKL_NUM_THREADS, XLA_FLAGS,
PJRT_NPROC); this script makes the in-process settings (torch.set_num_threads and
set_num_interop_threads, ONNX Runtime's SessionOptions). It computes the model once, writes the
output, replies `ready`, then answers `run K W` (W untimed calls, K timed ones) and `quit` on
stdin. Replies are single lines on stdout starting with "@@race " and holding JSON; times are
wall-clock seconds per call (time.perf_counter_ns), the call's result ready (jax:
block_until_ready; the others return host arrays).

Every peer computes fusedsl's function (models.py's docstring) with the same weights. The Python
models fuse Q, K and V into one [d, 3d] linear (the layout of torch.nn.MultiheadAttention and of
GPT-2's checkpoints): the same function, one GEMM instead of three. The LLaMA block is written as
Hugging Face's LlamaDecoderLayer is (separate q/k/v and gate/up projections without biases,
RMSNorm, rotary embeddings with cos and sin computed once, key/value heads repeated for the query
heads); PyTorch's attention is scaled_dot_product_attention, XLA's jax.nn.dot_product_attention with
its grouped-query form. A model with bf16 weights runs
as each framework runs a bf16 model: PyTorch with the module and the input in torch.bfloat16
(oneDNN's bf16 kernels, on AMX where the CPU has it), XLA with every parameter and the input in
bfloat16; the output is widened to float32.
"""
import argparse
import json
import os
import sys
import time
import traceback

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import models  # noqa: E402

import numpy as np  # noqa: E402

PEERS = ("torch_eager", "torch_compile", "onnxruntime", "xla")


def reply(obj):
    sys.stdout.write("@@race " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def proc_status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


def layer_params(cfg, w, i):
    """The parameters of layer i with Q, K and V fused: qkv_w [d, 3d], qkv_b [3d], ..."""
    p = f"layers.{i}."
    return {
        "qkv_w": np.concatenate([w[p + f"attn.{n}.w"] for n in "qkv"], axis=1),
        "qkv_b": np.concatenate([w[p + f"attn.{n}.b"] for n in "qkv"]),
        "o_w": w[p + "attn.o.w"], "o_b": w[p + "attn.o.b"],
        "fc1_w": w[p + "ffn.fc1.w"], "fc1_b": w[p + "ffn.fc1.b"],
        "fc2_w": w[p + "ffn.fc2.w"], "fc2_b": w[p + "ffn.fc2.b"],
        "ln1_g": w[p + "ln1.gamma"], "ln1_b": w[p + "ln1.beta"],
        "ln2_g": w[p + "ln2.gamma"], "ln2_b": w[p + "ln2.beta"],
    }


# ---- PyTorch ----

def torch_module(cfg, w):
    if models.is_llama(cfg):
        return torch_llama(cfg, w)
    import torch
    from torch import nn
    import torch.nn.functional as F

    d, heads = cfg["d"], cfg["heads"]
    dh = d // heads

    def linear(weight, bias):  # w is [in, out]; nn.Linear keeps [out, in]
        m = nn.Linear(weight.shape[0], weight.shape[1])
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight.T)))
            m.bias.copy_(torch.from_numpy(bias))
        return m

    def layernorm(gamma, beta):
        m = nn.LayerNorm(d, eps=models.LAYERNORM_EPS)
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(gamma))
            m.bias.copy_(torch.from_numpy(beta))
        return m

    class Block(nn.Module):
        def __init__(self, p):
            super().__init__()
            self.qkv, self.o = linear(p["qkv_w"], p["qkv_b"]), linear(p["o_w"], p["o_b"])
            self.fc1, self.fc2 = linear(p["fc1_w"], p["fc1_b"]), linear(p["fc2_w"], p["fc2_b"])
            self.ln1 = layernorm(p["ln1_g"], p["ln1_b"])
            self.ln2 = layernorm(p["ln2_g"], p["ln2_b"])

        def attn(self, x):
            b, l, _ = x.shape
            q, k, v = (t.view(b, l, heads, dh).transpose(1, 2) for t in self.qkv(x).split(d, -1))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=cfg["causal"])
            return self.o(o.transpose(1, 2).reshape(b, l, d))

        def ffn(self, x):
            return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))

        def forward(self, x):
            if cfg["pre_ln"]:
                x = x + self.attn(self.ln1(x))
                return x + self.ffn(self.ln2(x))
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.ffn(x))

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Block(layer_params(cfg, w, i))
                                        for i in range(cfg["layers"]))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    return Stack().eval()


def torch_llama(cfg, w):
    """The LLaMA block (models.py) as Hugging Face's LlamaDecoderLayer computes it, on x [1, L, d]."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    d, heads, kv_heads = cfg["d"], cfg["heads"], cfg["kv_heads"]
    dh = d // heads

    def linear(weight):  # [in, out] -> nn.Linear's [out, in], no bias
        m = nn.Linear(weight.shape[0], weight.shape[1], bias=False)
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight.T)))
        return m

    def rmsnorm(weight):
        m = nn.RMSNorm(d, eps=models.RMSNORM_EPS)
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(weight))
        return m

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (linear(w[f"attn.{n}.w"]) for n in "qkvo")
            self.gate, self.up, self.down = (linear(w[f"ffn.{n}.w"]) for n in ("gate", "up", "down"))
            self.attn_norm, self.ffn_norm = rmsnorm(w["attn_norm"]), rmsnorm(w["ffn_norm"])
            # [L, dh]: each angle twice, for the two halves (Hugging Face's rotate_half form).
            self.register_buffer("cos", torch.from_numpy(np.concatenate([w["cos"]] * 2, -1)))
            self.register_buffer("sin", torch.from_numpy(np.concatenate([w["sin"]] * 2, -1)))

        def rope(self, t):  # [1, h, L, dh]
            t1, t2 = t[..., : dh // 2], t[..., dh // 2:]
            return t * self.cos + torch.cat((-t2, t1), -1) * self.sin

        def forward(self, x):
            b, l, _ = x.shape
            n = self.attn_norm(x)
            q = self.rope(self.q(n).view(b, l, heads, dh).transpose(1, 2))
            k = self.rope(self.k(n).view(b, l, kv_heads, dh).transpose(1, 2))
            v = self.v(n).view(b, l, kv_heads, dh).transpose(1, 2)
            k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=cfg["causal"])
            h = x + self.o(o.transpose(1, 2).reshape(b, l, d))
            n = self.ffn_norm(h)
            return h + self.down(F.silu(self.gate(n)) * self.up(n))

    return Block().eval()


def torch_threads(threads):
    import torch
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    return {"torch.set_num_threads": threads, "torch.set_num_interop_threads": 1,
            "torch.get_num_threads()": torch.get_num_threads(),
            "torch.get_num_interop_threads()": torch.get_num_interop_threads()}


def setup_torch(cfg, w, threads, compiled):
    import torch
    settings = torch_threads(threads)
    module = torch_module(cfg, w)
    x = torch.from_numpy(w["x"]).reshape(1, cfg["seq"], cfg["d"])
    info = {"torch": torch.__version__, "mkl": torch.backends.mkl.is_available(),
            "mkldnn": torch.backends.mkldnn.is_available(), "threads": settings,
            "parallel_info": torch.__config__.parallel_info().splitlines()[:8]}
    if models.is_bf16(cfg):
        module, x = module.to(torch.bfloat16), x.to(torch.bfloat16)
        info["dtype"] = "torch.bfloat16 (module and input)"
        info["mkldnn_bf16_supported"] = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    fn = module
    if compiled:
        import torch._inductor.config as inductor_config
        # Inductor's setting for inference on the CPU: weights are constants, folded and prepacked.
        inductor_config.freezing = True
        fn = torch.compile(module)
        info["torch.compile"] = {"backend": "inductor", "mode": "default", "freezing": True}

    def call():
        with torch.inference_mode():
            return fn(x)

    t0 = time.perf_counter()
    y = call()
    info["first_call_seconds"] = time.perf_counter() - t0
    return call, lambda: call().float().numpy().reshape(cfg["seq"], cfg["d"]), info


def export_onnx(cfg, w, path):
    """torch.onnx.export of the PyTorch model (the TorchDynamo exporter; the TorchScript one if
    that fails). Returns how it was exported."""
    import torch
    module = torch_module(cfg, w)
    x = torch.from_numpy(w["x"]).reshape(1, cfg["seq"], cfg["d"])
    errors = []
    for dynamo in (True, False):
        try:
            with torch.no_grad():
                torch.onnx.export(module, (x,), path, input_names=["x"], output_names=["y"],
                                  dynamo=dynamo, external_data=False)
            import onnx
            m = onnx.load(path)
            return {"exporter": "dynamo" if dynamo else "torchscript",
                    "opset": max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
                    "nodes": len(m.graph.node), "torch": torch.__version__,
                    "onnx": onnx.__version__,
                    "errors_before": errors}
        except Exception as e:  # noqa: BLE001 - recorded, then the other exporter is tried
            errors.append(f"dynamo={dynamo}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
    raise RuntimeError("torch.onnx.export failed: " + "; ".join(errors))


# ---- ONNX Runtime ----

def setup_onnxruntime(cfg, w, threads, onnx_path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    feed = {"x": w["x"].reshape(1, cfg["seq"], cfg["d"])}
    info = {"onnxruntime": ort.__version__, "providers": sess.get_providers(),
            "threads": {"intra_op_num_threads": threads, "inter_op_num_threads": 1,
                        "execution_mode": "ORT_SEQUENTIAL",
                        "graph_optimization_level": "ORT_ENABLE_ALL"}}

    def call():
        return sess.run(None, feed)[0]

    return call, lambda: call().reshape(cfg["seq"], cfg["d"]), info


# ---- XLA:CPU through jax.jit ----

def xla_llama(cfg, w):
    """forward(params, x) of the LLaMA block in jax.numpy, and its params."""
    import jax
    import jax.numpy as jnp

    d, heads, kv_heads, seq = cfg["d"], cfg["heads"], cfg["kv_heads"], cfg["seq"]
    dh = d // heads

    def rms(x, g):
        return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), -1, keepdims=True) +
                                 models.RMSNORM_EPS) * g

    def rope(t, cos, sin):  # [1, L, h, dh]; cos, sin [L, dh / 2]
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        t1, t2 = t[..., : dh // 2], t[..., dh // 2:]
        return jnp.concatenate([t1 * c - t2 * s, t2 * c + t1 * s], -1)

    def forward(params, x):
        for p in params:
            n = rms(x, p["attn_norm"])
            q = rope((n @ p["q"]).reshape(1, seq, heads, dh), p["cos"], p["sin"])
            k = rope((n @ p["k"]).reshape(1, seq, kv_heads, dh), p["cos"], p["sin"])
            v = (n @ p["v"]).reshape(1, seq, kv_heads, dh)
            o = jax.nn.dot_product_attention(q, k, v, is_causal=cfg["causal"],
                                             implementation="xla")
            h = x + o.reshape(1, seq, d) @ p["o"]
            n = rms(h, p["ffn_norm"])
            x = h + (jax.nn.silu(n @ p["gate"]) * (n @ p["up"])) @ p["down"]
        return x

    names = {"q": "attn.q.w", "k": "attn.k.w", "v": "attn.v.w", "o": "attn.o.w",
             "gate": "ffn.gate.w", "up": "ffn.up.w", "down": "ffn.down.w",
             "attn_norm": "attn_norm", "ffn_norm": "ffn_norm", "cos": "cos", "sin": "sin"}
    return forward, [{k: w[n] for k, n in names.items()}]


def xla_transformer(cfg, w):
    """forward(params, x) of the transformer stack in jax.numpy, and its layers' params."""
    import jax
    import jax.numpy as jnp

    d, heads, seq = cfg["d"], cfg["heads"], cfg["seq"]
    dh = d // heads

    def ln(x, g, b):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean(jnp.square(x - mu), -1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + models.LAYERNORM_EPS) * g + b

    def attn(p, x):
        qkv = jnp.split(x @ p["qkv_w"] + p["qkv_b"], 3, -1)
        q, k, v = (t.reshape(1, seq, heads, dh) for t in qkv)
        o = jax.nn.dot_product_attention(q, k, v, is_causal=cfg["causal"], implementation="xla")
        return o.reshape(1, seq, d) @ p["o_w"] + p["o_b"]

    def ffn(p, x):
        return jax.nn.gelu(x @ p["fc1_w"] + p["fc1_b"], approximate=True) @ p["fc2_w"] + p["fc2_b"]

    def forward(params, x):
        for p in params:
            if cfg["pre_ln"]:
                x = x + attn(p, ln(x, p["ln1_g"], p["ln1_b"]))
                x = x + ffn(p, ln(x, p["ln2_g"], p["ln2_b"]))
            else:
                x = ln(x + attn(p, x), p["ln1_g"], p["ln1_b"])
                x = ln(x + ffn(p, x), p["ln2_g"], p["ln2_b"])
        return x

    return forward, [layer_params(cfg, w, i) for i in range(cfg["layers"])]


def setup_xla(cfg, w, threads):
    import jax
    import jax.numpy as jnp

    seq, d = cfg["seq"], cfg["d"]
    forward, layers = (xla_llama if models.is_llama(cfg) else xla_transformer)(cfg, w)
    device = jax.devices("cpu")[0]
    dtype = jnp.bfloat16 if models.is_bf16(cfg) else jnp.float32
    params = jax.device_put([{k: np.asarray(v, dtype) for k, v in p.items()} for p in layers],
                            device)
    x = jax.device_put(np.asarray(w["x"].reshape(1, seq, d), dtype), device)
    t0 = time.perf_counter()
    compiled = jax.jit(forward).lower(params, x).compile()
    compile_seconds = time.perf_counter() - t0
    ma = compiled.memory_analysis()
    mem = {k: int(getattr(ma, k)) for k in (
        "temp_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes",
        "alias_size_in_bytes", "generated_code_size_in_bytes") if hasattr(ma, k)}
    import jaxlib
    info = {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "device": str(device),
            "compile_seconds": compile_seconds, "memory_analysis": mem,
            "dtype": str(np.dtype(dtype)),
            "threads": {"XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
                        "PJRT_NPROC": os.environ.get("PJRT_NPROC", "")}}

    def call():
        return compiled(params, x).block_until_ready()

    return call, lambda: np.asarray(call(), np.float32).reshape(seq, d), info


def serve(args):
    rss_import = proc_status_bytes("VmRSS")
    cfg = models.MODELS[args.model]
    w = models.load_weights(cfg, args.weights)
    if args.peer in ("torch_eager", "torch_compile"):
        call, output, info = setup_torch(cfg, w, args.threads, args.peer == "torch_compile")
    elif args.peer == "onnxruntime":
        call, output, info = setup_onnxruntime(cfg, w, args.threads, args.onnx)
    else:
        call, output, info = setup_xla(cfg, w, args.threads)
    np.save(args.output, np.asarray(output(), np.float32))
    info["env"] = {k: os.environ.get(k, "") for k in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS", "PJRT_NPROC")}
    info["affinity"] = sorted(os.sched_getaffinity(0))
    reply({"ready": True, "config": info, "rss_after_import_bytes": rss_import,
           "rss_bytes": proc_status_bytes("VmRSS")})
    for line in sys.stdin:
        words = line.split()
        if words == ["quit"]:
            return 0
        if len(words) != 3 or words[0] != "run":
            raise ValueError(f"unknown request: {line.strip()!r}")
        calls, warm = int(words[1]), int(words[2])
        for _ in range(warm):
            call()
        times = []
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            call()
            times.append((time.perf_counter_ns() - t0) * 1e-9)
        reply({"times": times,
               "cpu_per_wall": (time.process_time() - c0) / (time.perf_counter() - w0)})
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", choices=PEERS)
    ap.add_argument("--model", choices=sorted(models.MODELS), required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--output")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--onnx", help="the exported model (onnxruntime)")
    ap.add_argument("--export-onnx", metavar="FILE", help="export the PyTorch model and exit")
    a = ap.parse_args()
    try:
        if a.export_onnx:
            cfg = models.MODELS[a.model]
            w = models.load_weights(cfg, a.weights)
            reply({"exported": export_onnx(cfg, w, a.export_onnx)})
            return 0
        if not a.peer or not a.output:
            ap.error("--peer and --output are needed (or --export-onnx)")
        return serve(a)
    except Exception as e:  # noqa: BLE001 - the driver puts the reason in the table's cell
        traceback.print_exc()
        text = str(e).strip()
        reply({"ready": False, "error": f"{type(e).__name__}: {text.splitlines()[0][:400]}"
               if text else type(e).__name__})
        return 1


if __name__ == "__main__":
    sys.exit(main())
