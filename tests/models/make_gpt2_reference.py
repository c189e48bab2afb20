#!/usr/bin/env python3
"""Reference data for fusedsl's GPT-2: Hugging Face transformers' GPT2LMHeadModel, built from a
config with seeded random weights (nothing is downloaded), saved the way save_pretrained saves
it, with its outputs under greedy decoding with its KV cache.

    make_gpt2_reference.py small [OUT]        the test suite's small model (default OUT:
                                              tests/models/data/gpt2_small_test), committed
    make_gpt2_reference.py gpt2-small OUT     GPT-2 small's shapes (12 layers, 768 wide, 12 heads,
                                              1024 positions, 50257 tokens), for benchmarks: the
                                              files of `small` but full_logits and batch.json, with
                                              a random prompt (--prompt-len, 32) and --steps (16)

Needs torch and transformers: scripts/setup-model-venv --reference, then
    .venv-models/bin/python tests/models/make_gpt2_reference.py small

`small` writes, in OUT:
  config.json, model.safetensors   GPT2LMHeadModel.save_pretrained's files
  model_legacy.safetensors         the same weights without the "transformer." prefix, with the
                                   attn.bias (uint8 lower triangle [1,1,n_positions,n_positions])
                                   and attn.masked_bias (float32 -1e4) buffers older checkpoints
                                   carry; transformers loads it to the same logits (checked)
  prompt_ids.npy         int64 [20]       the prompt: text encoded with tests/text/data/gpt2_512
  prefill_logits.npy     float32 [20, V]  logits of the prompt in one forward pass
  generated_ids.npy      int64 [64]       64 greedy tokens, one forward of one token per step with
                                          the KV cache
  step_logits.npy        float32 [64, V]  row k: the logits token k was chosen from (row 0: the
                                          prefill's last row; row k > 0: after feeding token k-1)
  full_logits.npy        float32 [84, V]  one forward of prompt + generated tokens, no cache
  batch.json             4 prompts of different lengths, each decoded alone, greedily (ids)
  reference.json         versions, seed, config, tensor names/shapes/dtypes, top-2 logit gaps
                         and the cross-checks' differences
"""
import argparse
import json
import math
import os
import platform
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SMALL_OUT = REPO / "tests" / "models" / "data" / "gpt2_small_test"
TOKENIZER_512 = REPO / "tests" / "text" / "data" / "gpt2_512"

SMALL = dict(vocab_size=512, n_positions=128, n_embd=64, n_layer=2, n_head=4, n_inner=None,
             activation_function="gelu_new", layer_norm_epsilon=1e-5, initializer_range=0.2,
             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
             eos_token_id=None, pad_token_id=None)
GPT2_SMALL = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                  n_inner=None, activation_function="gelu_new", layer_norm_epsilon=1e-5,
                  initializer_range=0.02, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                  bos_token_id=50256, eos_token_id=50256)

PROMPT_TEXT = ("It was the best of times, it was the worst of times, it was the age of wisdom, "
               "it was the age of foolishness")
BATCH_TEXTS = ["Hello, world!", "The quick brown fox jumps over the lazy dog.",
               "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
               "Call me Ishmael. Some years ago, never mind how long precisely, having little or "
               "no money in my purse"]
BATCH_LENGTHS = [5, 12, 23, 37]
BATCH_STEPS = 32
PROMPT_LEN, STEPS = 20, 64
# initializer_range 0.2 (transformers' default: 0.02) gives logits of about +-7, top-2 gaps of
# ~1e-2 at every greedy step (float32 against float64: ~1e-6), and greedy runs that do not settle
# on one repeated token at once.
MIN_GAP = 5e-3  # the smallest top-2 logit gap accepted at a greedy step
MIN_DISTINCT = 16  # the fewest distinct tokens accepted among the 64 generated


def build(config_kwargs, seed, attn="eager", dtype=torch.float32):
    """GPT2LMHeadModel with transformers' initialisation under torch.manual_seed(seed), then
    every bias ~ N(0, 0.03) and every LayerNorm weight ~ 1 + N(0, 0.1) (transformers starts them
    at 0 and 1, which would hide a bias or gain taken from the wrong tensor)."""
    torch.manual_seed(seed)
    config = GPT2Config(**config_kwargs)
    config._attn_implementation = attn
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.03)
            elif ".ln_" in name and name.endswith(".weight"):
                p.normal_(1.0, 0.1)
    model = model.to(dtype)
    model.eval()
    return model


def top2_gap(logits):
    top = torch.topk(logits.double(), 2, dim=-1).values
    return (top[..., 0] - top[..., 1])


@torch.no_grad()
def greedy(model, prompt, steps):
    """Prefill, then one token per step with the KV cache. Returns the ids, the logits each id was
    chosen from [steps, V], and the prefill's logits [len(prompt), V]."""
    out = model(torch.tensor([prompt]), use_cache=True)
    prefill = out.logits[0]
    cache = out.cache
    logits = [prefill[-1]]
    ids = [int(torch.argmax(prefill[-1]))]
    for _ in range(steps - 1):
        out = model(torch.tensor([[ids[-1]]]), cache=cache, use_cache=True)
        cache = out.cache
        logits.append(out.logits[0, -1])
        ids.append(int(torch.argmax(out.logits[0, -1])))
    return ids, torch.stack(logits), prefill


@torch.no_grad()
def teacher_forced(model, prompt, tokens):
    """The logits [len(tokens), V] that feeding `tokens` one at a time after the prompt gives."""
    out = model(torch.tensor([prompt]), use_cache=True)
    cache, rows = out.cache, [out.logits[0, -1]]
    for t in tokens[:-1]:
        out = model(torch.tensor([[t]]), cache=cache, use_cache=True)
        cache = out.cache
        rows.append(out.logits[0, -1])
    return torch.stack(rows)


def max_abs(a, b):
    return float((a.double() - b.double()).abs().max())


def encode_prompt(text, length):
    tok = GPT2Tokenizer.from_pretrained(str(TOKENIZER_512))
    ids = tok.encode(text, split_special_tokens=True)
    if len(ids) < length:
        raise SystemExit(f"the text gives {len(ids)} tokens, fewer than {length}")
    return ids[:length]


def tensor_list(path):
    out = {}
    with safe_open(str(path), framework="pt") as f:
        for k in f.keys():
            t = f.get_slice(k)
            out[k] = {"dtype": t.get_dtype(), "shape": list(t.get_shape())}
        meta = f.metadata()
    return out, meta


def legacy_state_dict(model, n_layer, n_positions):
    sd = {k[len("transformer."):]: v.clone().contiguous() for k, v in model.state_dict().items()
          if k.startswith("transformer.")}
    tril = torch.tril(torch.ones(n_positions, n_positions, dtype=torch.uint8))
    for i in range(n_layer):
        sd[f"h.{i}.attn.bias"] = tril.view(1, 1, n_positions, n_positions).clone()
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4, dtype=torch.float32)
    return sd


def versions():
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "machine": platform.machine()}


def small(out, seed_start):
    prompt = encode_prompt(PROMPT_TEXT, PROMPT_LEN)
    batch_prompts = [encode_prompt(t, n) for t, n in zip(BATCH_TEXTS, BATCH_LENGTHS)]
    # The first seed from seed_start whose greedy steps (the main run and the batch) all have a
    # top-2 logit gap of at least MIN_GAP, and whose main run has MIN_DISTINCT distinct tokens.
    for seed in range(seed_start, seed_start + 200):
        model = build(SMALL, seed)
        ids, step_logits, prefill = greedy(model, prompt, STEPS)
        gaps = top2_gap(step_logits)
        batch = [greedy(model, p, BATCH_STEPS) for p in batch_prompts]
        batch_gaps = [float(top2_gap(b[1]).min()) for b in batch]
        if (float(gaps.min()) >= MIN_GAP and min(batch_gaps) >= MIN_GAP and
                len(set(ids)) >= MIN_DISTINCT):
            break
    else:
        raise SystemExit(f"no seed in {seed_start}..{seed_start + 199} meets the rule")

    with torch.no_grad():
        seq = torch.tensor([prompt + ids])
        full = model(seq).logits[0]
        forced = teacher_forced(model, prompt, ids)
        generated = model.generate(torch.tensor([prompt]), max_new_tokens=STEPS, do_sample=False,
                                   use_cache=True)[0, PROMPT_LEN:].tolist()
        sdpa = build(SMALL, seed, attn="sdpa")
        sdpa_steps = teacher_forced(sdpa, prompt, ids)
        f64 = build(SMALL, seed, dtype=torch.float64)
        f64_steps = teacher_forced(f64, prompt, ids)
        f64_prefill = f64(torch.tensor([prompt])).logits[0]
    if generated != ids:
        raise SystemExit("model.generate's greedy ids differ from the step-by-step loop's")

    out.mkdir(parents=True, exist_ok=True)
    for stale in ["model.safetensors", "config.json", "generation_config.json"]:
        (out / stale).unlink(missing_ok=True)
    model.save_pretrained(str(out))
    (out / "generation_config.json").unlink(missing_ok=True)  # GenerationConfig defaults only
    legacy = legacy_state_dict(model, SMALL["n_layer"], SMALL["n_positions"])
    save_file(legacy, str(out / "model_legacy.safetensors"), metadata={"format": "pt"})
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text((out / "config.json").read_text())
        save_file(legacy, str(Path(tmp) / "model.safetensors"), metadata={"format": "pt"})
        reloaded = GPT2LMHeadModel.from_pretrained(tmp, attn_implementation="eager").eval()
        with torch.no_grad():
            legacy_diff = max_abs(reloaded(torch.tensor([prompt])).logits[0], prefill)
        saved = GPT2LMHeadModel.from_pretrained(str(out), attn_implementation="eager").eval()
        with torch.no_grad():
            saved_diff = max_abs(saved(torch.tensor([prompt])).logits[0], prefill)
    if legacy_diff != 0.0 or saved_diff != 0.0:
        raise SystemExit(f"reloaded models differ: legacy {legacy_diff}, saved {saved_diff}")

    np.save(out / "prompt_ids.npy", np.array(prompt, dtype=np.int64))
    np.save(out / "prefill_logits.npy", prefill.numpy().astype(np.float32))
    np.save(out / "generated_ids.npy", np.array(ids, dtype=np.int64))
    np.save(out / "step_logits.npy", step_logits.numpy().astype(np.float32))
    np.save(out / "full_logits.npy", full.numpy().astype(np.float32))
    (out / "batch.json").write_text(json.dumps({
        "steps": BATCH_STEPS,
        "texts": BATCH_TEXTS,
        "prompts": batch_prompts,
        "generated": [b[0] for b in batch],
        "min_top2_gap": batch_gaps,
    }, indent=1) + "\n")

    saved_tensors, saved_meta = tensor_list(out / "model.safetensors")
    legacy_tensors, legacy_meta = tensor_list(out / "model_legacy.safetensors")
    reference = {
        "made_by": "tests/models/make_gpt2_reference.py small",
        "versions": versions(),
        "seed": seed,
        "seed_rule": f"the first seed from {seed_start} whose greedy steps all have a top-2 logit "
                     f"gap >= {MIN_GAP} and whose {STEPS} generated tokens hold >= "
                     f"{MIN_DISTINCT} distinct ones",
        "config": SMALL,
        "weights": build.__doc__.replace("\n   ", "").strip(),
        "attn_implementation": "eager",
        "tokenizer": "tests/text/data/gpt2_512 (GPT-2's vocabulary cut to ids 0..511)",
        "prompt_text": PROMPT_TEXT,
        "prompt_ids": prompt,
        "generated_ids": ids,
        "min_top2_gap": {"steps": float(gaps.min()), "batch": min(batch_gaps)},
        "logit_range": [float(step_logits.min()), float(step_logits.max())],
        "cross_checks_max_abs_diff": {
            "step_logits_vs_full_forward_without_cache": max_abs(step_logits, full[PROMPT_LEN - 1:-1]),
            "step_logits_vs_teacher_forced_rerun": max_abs(step_logits, forced),
            "prefill_vs_full_forward": max_abs(prefill, full[:PROMPT_LEN]),
            "eager_vs_sdpa_step_logits": max_abs(step_logits, sdpa_steps),
            "float32_vs_float64_step_logits": max_abs(step_logits, f64_steps),
            "float32_vs_float64_prefill_logits": max_abs(prefill, f64_prefill),
            "model_generate_ids_equal": True,
            "legacy_file_reloaded_prefill": legacy_diff,
        },
        "files": {
            "model.safetensors": {"metadata": saved_meta, "tensors": saved_tensors},
            "model_legacy.safetensors": {"metadata": legacy_meta, "tensors": legacy_tensors},
        },
    }
    (out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"seed {seed}: min top-2 gap {float(gaps.min()):.4g} (steps), {min(batch_gaps):.4g} "
          f"(batch); wrote {total / 1e6:.2f} MB to {out}")


def gpt2_small(out, seed, prompt_len, steps, initializer_range):
    config = dict(GPT2_SMALL, initializer_range=initializer_range)
    model = build(config, seed)
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, GPT2_SMALL["vocab_size"], (prompt_len,), generator=g).tolist()
    ids, step_logits, prefill = greedy(model, prompt, steps)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    (out / "generation_config.json").unlink(missing_ok=True)
    np.save(out / "prompt_ids.npy", np.array(prompt, dtype=np.int64))
    np.save(out / "prefill_logits.npy", prefill.numpy().astype(np.float32))
    np.save(out / "generated_ids.npy", np.array(ids, dtype=np.int64))
    np.save(out / "step_logits.npy", step_logits.numpy().astype(np.float32))
    tensors, meta = tensor_list(out / "model.safetensors")
    (out / "reference.json").write_text(json.dumps({
        "made_by": "tests/models/make_gpt2_reference.py gpt2-small",
        "versions": versions(), "seed": seed, "config": config,
        "weights": build.__doc__.replace("\n   ", "").strip(),
        "attn_implementation": "eager", "prompt_ids": prompt, "generated_ids": ids,
        "min_top2_gap": float(top2_gap(step_logits).min()),
        "files": {"model.safetensors": {"metadata": meta, "tensors": tensors}},
    }, indent=1) + "\n")
    print(f"wrote GPT-2 small shapes ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M "
          f"parameters) with {prompt_len} prompt tokens and {steps} greedy steps to {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("small", help="the test suite's small model")
    s.add_argument("out", nargs="?", default=str(SMALL_OUT))
    s.add_argument("--seed", type=int, default=0, help="the first seed tried (default 0)")
    g = sub.add_parser("gpt2-small", help="GPT-2 small's shapes, random weights")
    g.add_argument("out")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--prompt-len", type=int, default=32)
    g.add_argument("--steps", type=int, default=16)
    g.add_argument("--initializer-range", type=float, default=0.02,
                   help="std of the random weights (default: GPT-2's 0.02)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.mode == "small":
        small(Path(args.out), args.seed)
    else:
        gpt2_small(Path(args.out), args.seed, args.prompt_len, args.steps,
                   args.initializer_range)
    return 0


if __name__ == "__main__":
    sys.exit(main())
