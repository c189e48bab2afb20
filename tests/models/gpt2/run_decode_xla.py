#!/usr/bin/env python3
"""Runs the small reference GPT-2's decode step on XLA:CPU as fusedsl exported it, chained.

  run_decode_xla.py DIR     DIR: what the gpt2_decode_hlo_cases test wrote (DIR/tiny/...)

Each program's module (the embedding, each layer, the head; DIR/tiny/<k>_<program>/module.hlo)
is compiled by XLA (tests/interop/run_hlo.py's loader) and run on its parameters' values, except
the hidden state, which is the previous module's XLA output: the whole step runs on XLA. Checks:
  - every output within 1e-4 (absolute, + 1e-4 relative) of fusedsl's CPU executor's, and the
    updated caches changed at row pos only;
  - the logits within 1e-3 of transformers' for that step, and the argmax its greedy token.
Exit 0 all passed, 1 a mismatch or an XLA error, 77 jax not importable (1 under CI=true).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "interop"))
import run_hlo  # noqa: E402  (exits 77 when jax is missing)
import numpy as np  # noqa: E402


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tiny = os.path.join(sys.argv[1], "tiny")
    programs = sorted((d for d in os.listdir(tiny) if d[0].isdigit()), key=lambda d: int(d.split("_")[0]))
    ok = True
    hidden = None
    outs = []
    for p in programs:
        d = os.path.join(tiny, p)
        names = open(os.path.join(d, "parameters.txt")).read().split()
        inputs = [np.load(os.path.join(d, f"{n}.npy")) for n in range(len(names))]
        for n, name in enumerate(names):
            if name in ("x", "h"):
                inputs[n] = hidden  # the previous module's XLA output
        exe, devices, types = run_hlo.compile_module(os.path.join(d, "module.hlo"), 1)
        outs = run_hlo.run(exe, devices, types, inputs)
        k = 0
        while os.path.exists(os.path.join(d, f"out{k}.npy")):
            want = np.load(os.path.join(d, f"out{k}.npy"))
            got = outs[k]
            if want.dtype.kind == "i":
                good = np.array_equal(got, want)
                err = "equal" if good else f"{got} != {want}"
            else:
                diff = np.abs(got.astype(np.float64) - want)
                good = bool(np.all(np.isfinite(got)) and np.all(diff <= 1e-4 + 1e-4 * np.abs(want)))
                err = f"max abs err {diff.max():.3g}"
            print(f"{'PASS' if good else 'FAIL'} {p} output {k} {list(want.shape)}: {err}")
            ok &= good
            k += 1
        if p.endswith("_embed"):
            hidden = outs[0]
        elif "_layer" in p:
            hidden = outs[2]
            # The caches: row pos written, every other row as it was.
            pos = int(np.load(os.path.join(d, f"{names.index('pos')}.npy")))
            for which, name in ((0, "attn.k_cache"), (1, "attn.v_cache")):
                before = np.load(os.path.join(d, f"{names.index(name)}.npy"))
                changed = np.any(outs[which] != before, axis=(0, 2))
                good = bool(changed[pos]) and int(changed.sum()) == 1
                print(f"{'PASS' if good else 'FAIL'} {p} {name}: rows changed "
                      f"{np.nonzero(changed)[0].tolist()} (pos {pos})")
                ok &= good
    logits, token = outs[0], outs[1]
    ref = np.load(os.path.join(tiny, "reference", "logits.npy"))
    ref_token = np.load(os.path.join(tiny, "reference", "token.npy"))
    diff = float(np.abs(logits.astype(np.float64) - ref).max())
    good = bool(np.isfinite(diff) and diff <= 1e-3)
    print(f"{'PASS' if good else 'FAIL'} XLA's logits against transformers': max abs err {diff:.3g} (<= 1e-3)")
    ok &= good
    good = bool(np.array_equal(token, ref_token))
    print(f"{'PASS' if good else 'FAIL'} XLA's argmax {token.tolist()} against transformers' greedy token "
          f"{ref_token.tolist()}")
    ok &= good
    print("decode step on XLA:CPU: " + ("all passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
