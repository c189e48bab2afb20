#!/usr/bin/env python3
"""fusedsl-generate on the small reference GPT-2 (tests/models/data/gpt2_small_test, with the
tokenizer it was made with, tests/text/data/gpt2_512): greedy ids equal transformers' for the four
prompts of batch.json, sampling is reproducible from its seed and top-k 1 is greedy, and bad input
is a clear error.

    generate_tool_test.py FUSEDSL_GENERATE REPO
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

tool, repo = str(Path(sys.argv[1]).resolve()), Path(sys.argv[2]).resolve()
model = repo / "tests" / "models" / "data" / "gpt2_small_test"
tokenizer = repo / "tests" / "text" / "data" / "gpt2_512"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(directory, *args):
    return subprocess.run([tool, str(directory), *args], capture_output=True, text=True,
                          timeout=120)


with tempfile.TemporaryDirectory() as tmp:
    d = Path(tmp) / "tiny"
    d.mkdir()
    for src in (model / "config.json", model / "model.safetensors", tokenizer / "vocab.json",
                tokenizer / "merges.txt"):
        os.symlink(src, d / src.name)

    batch = json.loads((model / "batch.json").read_text())
    def last_ids(r):
        return [int(x) for x in r.stdout.rstrip("\n").split("\n")[-1].split()] if r.returncode == 0 else []

    for prompt, want in zip(batch["prompts"], batch["generated"]):
        r = run(d, "--prompt-ids", " ".join(map(str, prompt)), "--max-tokens", str(len(want)),
                "--print-ids")
        check(last_ids(r) == want,
              f"greedy ids after a prompt of {len(prompt)} ids match transformers' ({r.stderr.strip()})")
        check("tokens/s" in r.stderr, "the speed is reported on standard error")
    # "Hello," is the text of the first prompt's 5 ids.
    r = run(d, "--prompt", "Hello,", "--max-tokens", "32", "--print-ids")
    check(last_ids(r) == batch["generated"][0] and "(prompt 5)" in r.stderr,
          "a text prompt is tokenised into the same ids")

    text = batch["texts"][1]
    a = run(d, "--prompt", text, "--max-tokens", "24", "--temperature", "0.8", "--seed", "5",
            "--print-ids")
    b = run(d, "--prompt", text, "--max-tokens", "24", "--temperature", "0.8", "--seed", "5",
            "--print-ids")
    c = run(d, "--prompt", text, "--max-tokens", "24", "--temperature", "0.8", "--seed", "6",
            "--print-ids")
    check(a.returncode == 0 and a.stdout == b.stdout, "the same seed gives the same text")
    check(c.returncode == 0 and c.stdout != a.stdout, "another seed gives other text")
    k1 = run(d, "--prompt", text, "--max-tokens", "16", "--temperature", "1.5", "--top-k", "1",
             "--print-ids")
    g = run(d, "--prompt", text, "--max-tokens", "16", "--print-ids")
    check(k1.returncode == 0 and k1.stdout == g.stdout, "top-k 1 is greedy")

    # int8 weights, quantized when the checkpoint is loaded: greedy ids that follow transformers'
    # (f32) ones while the random test model's logits are far apart (measured: the first 23 of
    # 32; greedy decoding then follows its own tokens).
    INT8_PREFIX = 16
    want = batch["generated"][0]
    r = run(d, "--prompt", "Hello,", "--max-tokens", str(len(want)), "--weights", "int8",
            "--print-ids")
    got = last_ids(r)
    same = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), len(want))
    check(r.returncode == 0 and len(got) == len(want) and same >= INT8_PREFIX,
          f"int8 weights: {len(got)} ids, the first {same} of them transformers' ({r.stderr.strip()})")
    r = run(d, "--prompt", "x", "--weights", "int4")
    check(r.returncode == 2 and "--weights takes f32 or int8" in r.stderr,
          "an unknown weight format is a usage error")

    # The context ends generation: a prompt of 120 ids leaves 8 positions of n_positions 128, so
    # 9 tokens come out (the last one is chosen from the logits at position 127).
    r = run(d, "--prompt-ids", " ".join(["5"] * 120), "--max-tokens", "50", "--print-ids")
    check(len(last_ids(r)) == 9, f"generation stops when the context is full ({len(last_ids(r))})")

    r = run(d, "--prompt-ids", ",".join(["5"] * 200))
    check(r.returncode == 1 and "largest prefill bucket holds 128" in r.stderr,
          "a prompt longer than the context is an error naming the limit")
    r = run(d, "--prompt", "")
    check(r.returncode == 1 and "the prompt is empty" in r.stderr, "an empty prompt is an error")
    r = run(d, "--prompt-ids", "3 512")
    check(r.returncode == 1 and "prompt token 1 is 512, outside the vocabulary" in r.stderr,
          "an id outside the vocabulary is an error naming it")
    r = run(d, "--prompt", "x", "--top-k", "-1")
    check(r.returncode == 2 and "--top-k takes an integer >= 0" in r.stderr,
          "a bad option value is a usage error")

    other = Path(tmp) / "other"
    other.mkdir()
    config = json.loads((model / "config.json").read_text())
    config["n_layer"] = 3
    (other / "config.json").write_text(json.dumps(config))
    r = run(other, "--prompt", "x")
    check(r.returncode == 1 and "describes n_layer 3" in r.stderr and "gpt2 (small)" in r.stderr
          and "gpt2-medium" in r.stderr, "an uncompiled shape is an error listing the shapes")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
