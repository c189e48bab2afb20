#!/usr/bin/env python3
"""Runs every HLO and StableHLO file the examples wrote on real XLA (jax/jaxlib, XLA:CPU).

  run_written_modules.py --case CASE_DIR DIR [DIR ...]

CASE_DIR holds input_<k>.npy and expected_<k>.npy for the seed transformer (tests/export's
seed_transformer.unfused case: random inputs and the reference backend's outputs); the examples'
modules have the same entry parameters (hlo::export_bindings of the same program), so each one is
compiled, run on those inputs and compared with the reference (run_hlo.py's tolerances; 8 SPMD
partitions for a sharded module; for a module of our kLoop fusions, XLA must run them as given).
A file whose name says kinput holds the plan's kInput/kOutput fusions, which XLA:CPU refuses by
design (docs/hlo-export.md): XLA must parse it and convert it to StableHLO, keeping its kinds.
Any other failure, or a folder without modules, fails the test. Exit codes as run_hlo.py's.
"""
import argparse
import glob
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_here, "..", "interop"))
sys.path.insert(0, os.path.join(_here, "..", "export"))
import run_hlo  # noqa: E402  (exits 77 itself without jax, 1 under CI=true)
from check_plan_forms import read_plan_form  # noqa: E402


def check_kinput(path):
    ok, kinds = read_plan_form(path)
    if ok and not kinds["kInput"]:
        print(f"FAIL {path}: named kinput but holds no kInput fusion")
        return False
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True)
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    key = lambda p: int(p.rsplit("_", 1)[1].split(".")[0])
    inputs = sorted(glob.glob(os.path.join(args.case, "input_*.npy")), key=key)
    expected = sorted(glob.glob(os.path.join(args.case, "expected_*.npy")), key=key)
    if not inputs or not expected:
        print(f"FAIL: no input_<k>.npy / expected_<k>.npy in {args.case}")
        return 1
    files = []
    for d in args.dirs:
        found = sorted(glob.glob(os.path.join(d, "*.hlo")) + glob.glob(os.path.join(d, "*.mlir")))
        if not found:
            print(f"FAIL: no .hlo or .mlir file in {d}")
            return 1
        files += found
    failed = 0
    for f in files:
        name = os.path.basename(f)
        try:
            if "kinput" in name:
                ok = check_kinput(f)
            else:
                text = open(f).read()
                parts = run_hlo.DEVICE_COUNT if run_hlo.is_sharded(text) else 1
                keep = f.endswith(".hlo") and 'op_name="fusedsl group' in text and \
                    bool(run_hlo.entry_fusions(text))
                ok = run_hlo.run_case(f, f, inputs, expected, parts, keep_fusions=keep)
        except Exception as e:  # noqa: BLE001 - XLA's error for this file, then the others
            ok = False
            print(f"FAIL {f}: {type(e).__name__}: {str(e)[:2000]}")
        failed += not ok
    print(f"{len(files) - failed}/{len(files)} written modules passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
