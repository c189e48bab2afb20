#!/usr/bin/env python3
"""Checks that XLA reads the fused exports that mirror fusedsl's plan (kLoop/kInput/kOutput fusions).

  check_plan_forms.py DIR      every DIR/*.hlo: parsed by XLA's HLO parser
                               (jaxlib._hlo.hlo_module_from_text) and converted to StableHLO
                               (jax.extend.mlir.hlo_to_stablehlo), where each fusion must survive
                               as an mhlo.fusion of its kind.

XLA's CPU backend does not compile kInput/kOutput fusions handed to it, so these modules are not
run here; their numbers are checked through the `call` form of the same computations, and the
form XLA:CPU runs as given (group_calls::xla_cpu, kLoop parts of each group) is run by
export_xla_cpu (docs/hlo-export.md, "What XLA:CPU compiles of a fusion").
Exit 0: all read; 1: XLA rejected one; 77: jax is not importable (CTest: skipped).
"""
import glob
import os
import re
import sys

try:
    from jaxlib import _hlo
    import jax.extend.mlir as jex_mlir
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir
except Exception as e:  # noqa: BLE001 - any import failure means "cannot run", reported as skipped
    print(f"SKIP: cannot import jax/jaxlib ({type(e).__name__}: {e}); run scripts/setup-venv")
    sys.exit(1 if os.environ.get("CI") == "true" else 77)  # under CI every test must run


def read_plan_form(path):
    """(ok, fusion counts by kind): XLA parses the module and its StableHLO keeps every fusion as
    an mhlo.fusion of its kind; prints PASS or FAIL with the counts or XLA's error."""
    text = open(path).read()
    want = {k: len(re.findall(r"kind=" + k + r"\b", text)) for k in ("kLoop", "kInput", "kOutput")}
    try:
        module = _hlo.hlo_module_from_text(text)
        bytecode = jex_mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
        mlir = str(ir.Module.parse(bytecode, context=jax_mlir.make_ir_context()))
        got = {k: mlir.count("fusion_kind " + k) for k in want}
        ok = got == want
        print(f"{'PASS' if ok else 'FAIL'} {os.path.basename(path)}: fusions "
              + ", ".join(f"{k} {want[k]}" for k in want) + " parsed; StableHLO holds "
              + ", ".join(f"{k} {got[k]}" for k in got))
        return ok, want
    except Exception as e:  # noqa: BLE001 - report XLA's error and go on
        print(f"FAIL {os.path.basename(path)}: {type(e).__name__}: {e}")
        return False, want


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], "*.hlo")))
    if not files:
        print(f"no .hlo files under {sys.argv[1]}")
        return 1
    failed = sum(not read_plan_form(f)[0] for f in files)
    print(f"{len(files) - failed}/{len(files)} plan-form modules read by XLA")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
