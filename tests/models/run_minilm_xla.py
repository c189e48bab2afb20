#!/usr/bin/env python3
"""Runs the all-MiniLM-L6-v2 encoder on XLA:CPU as fusedsl exported it.

  run_minilm_xla.py DIR     DIR: what the models_minilm_hlo_cases test wrote

The module (DIR/module.hlo: embeddings, 6 layers, masked mean pooling, L2 normalisation) is
compiled by XLA (tests/interop/run_hlo.py's loader) and run on its parameters' values (the
checkpoint's tensors, 4 sentences' ids and mask). Checks: XLA's embeddings within 1e-4 of the
CPU executor's (DIR/out0.npy) and of sentence-transformers' (DIR/reference.npy), every cosine
with the latter >= 0.99999.
Exit 0 all passed, 1 a mismatch or an XLA error, 77 jax not importable (1 under CI=true).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import run_hlo  # noqa: E402  (exits 77 when jax is missing)
import numpy as np  # noqa: E402


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    d = sys.argv[1]
    names = open(os.path.join(d, "parameters.txt")).read().split()
    inputs = [np.load(os.path.join(d, f"{n}.npy")) for n in range(len(names))]
    exe, devices, types = run_hlo.compile_module(os.path.join(d, "module.hlo"), 1)
    got = run_hlo.run(exe, devices, types, inputs)[0].astype(np.float64)
    ok = bool(np.all(np.isfinite(got)))
    for label, file in (("the CPU executor's", "out0.npy"), ("sentence-transformers'", "reference.npy")):
        want = np.load(os.path.join(d, file)).astype(np.float64)
        diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        good = bool(np.isfinite(diff) and diff <= 1e-4)
        print(f"{'PASS' if good else 'FAIL'} XLA's embeddings {list(got.shape)} against {label}: "
              f"max abs err {diff:.3g} (<= 1e-4)")
        ok &= good
    ref = np.load(os.path.join(d, "reference.npy")).astype(np.float64)
    cos = np.sum(got * ref, axis=1) / np.sqrt(np.sum(got * got, axis=1) * np.sum(ref * ref, axis=1))
    good = bool(np.all(cos >= 0.99999))
    print(f"{'PASS' if good else 'FAIL'} cosine with sentence-transformers': smallest 1 - "
          f"{1 - float(cos.min()):.3g} (>= 0.99999)")
    ok &= good
    print("all-MiniLM-L6-v2 on XLA:CPU: " + ("all passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
