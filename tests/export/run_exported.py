#!/usr/bin/env python3
"""Runs the modules fusedsl exported (write_interop_cases writes them and manifest.json) on real
XLA through jax 0.10.2 and compares with the reference backend's outputs.

  run_exported.py <dir> [--only CASE] [--json results.json]

For each run of the manifest: the HLO text is parsed by XLA (jaxlib._hlo.hlo_module_from_text),
converted to StableHLO (jax.extend.mlir.hlo_to_stablehlo), compiled on XLA's CPU backend (with
num_partitions=N and SPMD partitioning on N host devices for sharded runs) and run on the stored
inputs. Error = max |xla - reference| / max |reference| per output; a run passes when every
output's error is at most its rtol. Runs marked execute=false (fused with the plan's
kInput/kOutput kinds, which XLA's CPU backend does not compile) are parsed and converted only.
Prints one line per run, with XLA's get_compiled_memory_stats() temp bytes next to our arena.
Exit 0: all passed; 1: a failure; 77: jax 0.10.2 is not importable (the test is then skipped).
"""
import json
import os
import subprocess
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

WANT = "0.10.2"
try:
    import numpy as np
    import jax
    import jaxlib
    from jaxlib import _hlo
    import jax.extend.mlir as jex_mlir
    from jax._src.lib import xla_client as xc
    from jax._src import sharding_impls
    import ml_dtypes
except Exception as e:  # noqa: BLE001 - any import failure means "no usable jax here"
    print(f"SKIP: jax {WANT} is not importable ({e}); run scripts/setup-venv")
    sys.exit(77)
if jax.__version__ != WANT or jaxlib.__version__ != WANT:
    print(f"SKIP: found jax {jax.__version__} / jaxlib {jaxlib.__version__}, need {WANT}")
    sys.exit(77)

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "i32": np.int32, "pred": np.bool_}


def compile_module(text, partitions):
    module = _hlo.hlo_module_from_text(text)
    stablehlo = jex_mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    backend = jax.extend.backend.get_backend("cpu")
    devices = backend.devices()[:partitions]
    options = xc.CompileOptions()
    build = options.executable_build_options
    if partitions > 1:
        build.num_replicas = 1
        build.num_partitions = partitions
        build.use_spmd_partitioning = True
        build.device_assignment = xc.DeviceAssignment.create(np.arange(partitions).reshape(1, partitions))
    exe = backend.compile_and_load(stablehlo, xc.DeviceList(tuple(devices)), options)
    return exe, devices, stablehlo


def execute(exe, devices, args):
    if len(devices) == 1:
        outs = exe.execute([jax.device_put(a, devices[0]) for a in args])
        return [np.asarray(o) for o in outs]
    shardings = exe.get_parameter_shardings()
    arrays = []
    for a, s in zip(args, shardings):
        arrays.append(jax.device_put(a, sharding_impls.GSPMDSharding(tuple(devices), s)))
    results = exe.execute_sharded(arrays)
    out_shardings = exe.get_output_shardings()
    outs = []
    for i, per_device in enumerate(results.disassemble_into_single_device_arrays()):
        s = sharding_impls.GSPMDSharding(tuple(devices), out_shardings[i])
        # Reassemble the global value from its shards.
        indices = s.devices_indices_map(full_shape_of(s, per_device))
        full = np.zeros(full_shape_of(s, per_device), dtype=np.asarray(per_device[0]).dtype)
        for d, arr in zip(devices, per_device):
            full[indices[d]] = np.asarray(arr)
        outs.append(full)
    return outs


def full_shape_of(sharding, shards):
    # The global shape: each dimension's shard size times the number of tiles along it.
    shard = np.asarray(shards[0]).shape
    tiles = sharding._hlo_sharding.tile_assignment_dimensions() if not sharding._hlo_sharding.is_replicated() else []
    if not tiles:
        return shard
    return tuple(s * t for s, t in zip(shard, tiles))


def rel_error(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return float("inf")
    finite = np.isfinite(want)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(got[~finite], want[~finite]):
        if not np.array_equal(np.isnan(got), np.isnan(want)):
            return float("inf")
    scale = max(np.max(np.abs(want[finite]), initial=0.0), 1e-30)
    return float(np.max(np.abs(got[finite] - want[finite]), initial=0.0) / scale)


def run_one(directory, run):
    """One run, in this process; returns its result dict."""
    label = f"{run['case']}.{run['form']}"
    text = open(os.path.join(directory, run["hlo"])).read()
    if not run["execute"]:
        module = _hlo.hlo_module_from_text(text)
        jex_mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
        return {"run": label, "ok": True, "parsed_only": True}
    exe, devices, _ = compile_module(text, run["partitions"])
    args = [np.load(os.path.join(directory, f)).astype(DTYPES[t]) for f, t in zip(run["inputs"], run["input_types"])]
    outs = execute(exe, devices, args)
    want = [np.load(os.path.join(directory, f)) for f in run["expected"]]
    errors = [rel_error(o, w) for o, w in zip(outs, want)]
    if len(outs) != len(want):
        errors.append(float("inf"))
    worst = max(errors)
    return {"run": label, "ok": worst <= run["rtol"], "max_rel_error": worst, "rtol": run["rtol"],
            "outputs": len(outs), "partitions": run["partitions"],
            "xla_temp_bytes": exe.get_compiled_memory_stats().temp_size_in_bytes, "arena_bytes": run["arena_bytes"]}


def main():
    directory = sys.argv[1]
    if "--run-index" in sys.argv:
        # Child: XLA aborts the process on some internal check failures, so each run has its own.
        run = json.load(open(os.path.join(directory, "manifest.json")))["runs"][int(sys.argv[sys.argv.index("--run-index") + 1])]
        try:
            result = run_one(directory, run)
        except Exception as e:  # noqa: BLE001 - reported as the run's failure
            result = {"run": f"{run['case']}.{run['form']}", "ok": False, "error": f"{type(e).__name__}: {str(e)[:1500]}"}
        print("RESULT " + json.dumps(result))
        return 0
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    json_out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    runs = json.load(open(os.path.join(directory, "manifest.json")))["runs"]
    results = []
    for i, run in enumerate(runs):
        if only and run["case"] != only:
            continue
        label = f"{run['case']}.{run['form']}"
        p = subprocess.run([sys.executable, __file__, directory, "--run-index", str(i)], capture_output=True, text=True)
        lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        if lines:
            r = json.loads(lines[-1][len("RESULT "):])
        else:
            tail = [l for l in (p.stdout + p.stderr).splitlines() if not l.startswith("    @")][-3:]
            r = {"run": label, "ok": False, "error": f"XLA aborted (exit {p.returncode}): " + " | ".join(tail)}
        results.append(r)
        if r.get("parsed_only"):
            print(f"ok    {label}: parsed by XLA and converted to StableHLO (kInput/kOutput fusions: not compiled on CPU)")
        elif "error" in r:
            print(f"FAIL  {label}: {r['error']}")
        else:
            print(f"{'ok' if r['ok'] else 'FAIL':5} {label}: max rel error {r['max_rel_error']:.3g} (rtol {r['rtol']:g}, "
                  f"{r['outputs']} outputs, {r['partitions']} device(s)); XLA temp bytes {r['xla_temp_bytes']}, "
                  f"fusedsl arena bytes {r['arena_bytes']}")
        sys.stdout.flush()
    if json_out:
        json.dump(results, open(json_out, "w"), indent=1)
    passed = sum(1 for r in results if r["ok"])
    print(f"{passed} of {len(results)} runs passed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
