#!/usr/bin/env python3
"""Runs HLO text (or StableHLO MLIR text) on XLA's CPU backend and compares with expected outputs.

  run_hlo.py MODULE.hlo|MODULE.mlir [--inputs a.npy ...] [--expected e.npy ...] [--partitions N]
  run_hlo.py --cases DIR [--format hlo|mlir] [--sharded-only | --unsharded-only]
      each subfolder of DIR: module.hlo and/or module.mlir, input_<k>.npy, expected_<k>.npy, an
      optional file `partitions` holding N (SPMD over N host devices), an optional file
      `arena_bytes` (fusedsl's arena size, printed next to XLA's temp bytes) and an optional file
      `keep_fusions` (XLA must run module.hlo's fusions as given: every fusion of its compiled
      entry is one of ours, identical ones may be merged by its CSE, and no other instruction
      of the compiled entry computes).
  run_hlo.py --compare A.hlo B.hlo    run both on the same random inputs (uniform in [-1, 1];
                                     integers in [-4, 24), so indices go out of range too; 8
                                     partitions when sharded); outputs must be bitwise equal.
  run_hlo.py --compile-only DIR      compile every *.hlo and *.mlir in DIR (SPMD over 8 devices
                                     when the module has shardings); XLA must accept all.

HLO text goes through jaxlib._hlo.hlo_module_from_text (XLA's HLO parser) and
jax.extend.mlir.hlo_to_stablehlo, then Client.compile_and_load on the CPU client. With N > 1
partitions the module is compiled with num_partitions=N and use_spmd_partitioning=True on N of the
8 host devices (--xla_force_host_platform_device_count=8); inputs are split and outputs assembled
per the compiled parameter/output shardings. Prints XLA's get_compiled_memory_stats() temp bytes.

Comparison: like numpy.allclose, |got - want| <= atol + rtol * |want| with rtol/atol per output
type (f32: 1e-5 / 1e-6; bf16: 1e-2 / 1e-2; f16: 1e-3 / 1e-3; f64: 1e-12 / 1e-12); NaN must match
NaN and infinities must match exactly; integer and pred outputs must be equal.

Exit codes: 0 all passed, 1 a mismatch or an XLA error (or jax not importable under CI=true), 2 bad
usage, 77 jax not importable (the CTest registration maps 77 to "skipped").
"""
import argparse
import glob
import os
import re
import sys

DEVICE_COUNT = 8
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count={DEVICE_COUNT}").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

try:
    import numpy as np
    import jax
    import jax.extend as jex
    import jax.extend.mlir as jex_mlir
    from jax._src import sharding_impls
    from jaxlib import _hlo
except Exception as e:  # noqa: BLE001 - any import failure means "cannot run", reported as skipped
    print(f"SKIP: cannot import jax/jaxlib/numpy ({type(e).__name__}: {e}); run scripts/setup-venv")
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

TOLERANCES = {"float32": (1e-5, 1e-6), "bfloat16": (1e-2, 1e-2), "float16": (1e-3, 1e-3),
              "float64": (1e-12, 1e-12)}
HLO_TYPES = {"pred": np.bool_, "s8": np.int8, "u8": np.uint8, "s32": np.int32, "s64": np.int64,
             "f16": np.float16, "bf16": jax.numpy.bfloat16, "f32": np.float32, "f64": np.float64}
MLIR_TYPES = {"i1": np.bool_, "i8": np.int8, "ui8": np.uint8, "i32": np.int32, "i64": np.int64,
              "f16": np.float16, "bf16": jax.numpy.bfloat16, "f32": np.float32, "f64": np.float64}


def entry_parameter_types(text, is_mlir):
    """Element type of each entry parameter, in parameter order."""
    if is_mlir:
        m = re.search(r"func\.func\s+(?:public\s+)?@main\s*\((.*?)\)\s*(->|\{)", text, re.S)
        if not m:
            raise ValueError("no func.func @main in the MLIR text")
        return [MLIR_TYPES[t] for t in re.findall(r"tensor<(?:[0-9]+x)*([a-z0-9]+)>", m.group(1))]
    return [dtype for _, dtype, _ in entry_parameters(text)]


def entry_parameters(text):
    """(name, element type, shape) of each entry parameter of HLO text, in parameter order."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.lstrip().startswith("ENTRY"))
    params = {}
    for line in lines[start + 1:]:
        if line.strip() == "}":
            break
        p = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*([a-z0-9]+)\[([0-9,]*)\].*?\s+parameter\((\d+)\)",
                     line)
        if p:
            shape = tuple(int(d) for d in p.group(3).split(",") if d)
            params[int(p.group(4))] = (p.group(1), HLO_TYPES[p.group(2)], shape)
    return [params[i] for i in range(len(params))]


def compile_module(path, partitions):
    text = open(path).read()
    is_mlir = path.endswith(".mlir")
    client = jex.backend.get_backend("cpu")
    if is_mlir:
        program = text
    else:
        module = _hlo.hlo_module_from_text(text)
        program = jex_mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    options = jex.backend.get_compile_options(num_replicas=1, num_partitions=partitions)
    if partitions > 1:
        options.executable_build_options.use_spmd_partitioning = True
    devices = jax.devices("cpu")[:partitions]
    if len(devices) < partitions:
        raise RuntimeError(f"{partitions} partitions need {partitions} CPU devices, have {len(devices)}")
    exe = client.compile_and_load(program, devices, options)
    return exe, devices, entry_parameter_types(text, is_mlir)


def run(exe, devices, types, inputs):
    """Runs the executable; returns the (flattened) outputs as numpy arrays."""
    if len(inputs) != len(types):
        raise ValueError(f"module takes {len(types)} parameters, got {len(inputs)} inputs")
    inputs = [np.asarray(x).astype(t) for x, t in zip(inputs, types)]
    if len(devices) == 1:
        args = [jax.device_put(x, devices[0]) for x in inputs]
    else:
        args = []
        for x, sh in zip(inputs, exe.get_parameter_shardings()):
            s = sharding_impls.GSPMDSharding(tuple(devices), sh)
            args.append(jax.make_array_from_callback(x.shape, s, lambda idx, x=x: x[idx]))
    per_output = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    if len(devices) == 1:
        return [np.asarray(o[0]) for o in per_output]
    outs = []
    for shards, sh in zip(per_output, exe.get_output_shardings()):
        shape = global_shape(shards, sh, devices)
        full = np.zeros(shape, dtype=np.asarray(shards[0]).dtype)
        index = sharding_impls.GSPMDSharding(tuple(devices), sh).devices_indices_map(shape)
        for a in shards:
            full[index[next(iter(a.devices()))]] = np.asarray(a)
        outs.append(full)
    return outs


def global_shape(shards, op_sharding, devices):
    """The unsharded shape of an output: one shard's shape times the tile counts."""
    local = np.asarray(shards[0]).shape
    hs = sharding_impls.GSPMDSharding(tuple(devices), op_sharding)._hlo_sharding
    if hs.is_replicated() or hs.is_maximal():
        return local
    counts = hs.tile_assignment_dimensions()[:len(local)]
    return tuple(l * c for l, c in zip(local, counts))


def compare(name, got, want):
    """Returns (ok, max_abs_err, max_rel_err, message)."""
    if got.shape != want.shape:
        return False, float("inf"), float("inf"), f"{name}: shape {got.shape} != expected {want.shape}"
    kind = got.dtype.name
    if kind in ("bool", "int32", "int64"):
        bad = int(np.sum(got.astype(np.int64) != want.astype(np.int64)))
        return bad == 0, float(bad), float(bad), f"{name}: {bad} elements differ" if bad else ""
    rtol, atol = TOLERANCES.get(kind, (1e-5, 1e-6))
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    nan_ok = np.array_equal(np.isnan(g), np.isnan(w))
    inf_ok = np.array_equal(np.where(np.isinf(w), w, 0), np.where(np.isinf(w), g, 0))
    finite = np.isfinite(w) & np.isfinite(g)
    diff = np.abs(g[finite] - w[finite])
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(w[finite]), 1e-30)
    big = np.abs(w[finite]) >= 1e-3
    max_rel = float(rel[big].max()) if big.any() else 0.0
    close = bool(np.all(diff <= atol + rtol * np.abs(w[finite])))
    ok = nan_ok and inf_ok and close and bool(np.all(np.isfinite(g) == np.isfinite(w)))
    msg = "" if ok else (f"{name}: max abs err {max_abs:.3g}, max rel err {max_rel:.3g} (rtol {rtol}, atol {atol}); "
                         f"nan pattern {'ok' if nan_ok else 'differs'}, inf {'ok' if inf_ok else 'differs'}")
    return ok, max_abs, max_rel, msg


def entry_fusions(text):
    """The fusion instructions of a module's entry computation, by kind."""
    if "ENTRY" not in text:
        return {}
    entry = text[text.index("ENTRY"):]
    kinds = re.findall(r"\sfusion\([^\n]*?kind=(k\w+)", entry)
    return {k: kinds.count(k) for k in sorted(set(kinds))}


def fusions_kept(module_path, exe):
    """(ok, message): XLA ran the module's fusions as given. Every fusion of XLA's compiled entry
    must be one of ours (it keeps our op_name "fusedsl group ..."), there may be fewer (XLA's CSE
    merges identical ones), and nothing else in the entry may compute (only parameters, tuples,
    get-tuple-elements, bitcasts and copies)."""
    if not module_path.endswith(".hlo"):
        return True, ""
    given = entry_fusions(open(module_path).read())
    if not given:
        return True, ""
    text = exe.hlo_modules()[0].to_string()
    entry = text[text.index("ENTRY"):].splitlines()[1:]
    compiled, foreign = 0, []
    for line in entry:
        m = re.match(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S.*?\s([a-z][a-z0-9\-]*)\(", line)
        if not m:
            continue
        op = m.group(1)
        if op == "fusion" and 'op_name="fusedsl group' in line:
            compiled += 1
        elif op not in ("parameter", "tuple", "get-tuple-element", "bitcast", "copy"):
            foreign.append(line.strip()[:160])
    ok = not foreign and 0 < compiled <= sum(given.values())
    note = f" fusions={sum(given.values())}/compiled={compiled}"
    if foreign:
        note += " (XLA computes outside our fusions: " + "; ".join(foreign[:3]) + ")"
    return ok, note


def run_case(label, module_path, input_paths, expected_paths, partitions, arena_bytes=None, keep_fusions=False):
    exe, devices, types = compile_module(module_path, partitions)
    outs = run(exe, devices, types, [np.load(p) for p in input_paths])
    want = [np.load(p) for p in expected_paths]
    if len(outs) != len(want):
        print(f"FAIL {label}: {len(outs)} outputs, {len(want)} expected")
        return False
    temp = exe.get_compiled_memory_stats().temp_size_in_bytes
    ok_all, worst_abs, worst_rel, msgs = True, 0.0, 0.0, []
    for k, (g, w) in enumerate(zip(outs, want)):
        ok, a, r, m = compare(f"output {k}", g, w)
        ok_all &= ok
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        if m:
            msgs.append(m)
    kept, fusion_note = fusions_kept(module_path, exe)
    if keep_fusions and not kept:
        ok_all = False
        msgs.append("XLA did not run the module's fusions as given")
    status = "PASS" if ok_all else "FAIL"
    print(f"{status} {label}: outputs={len(outs)} partitions={partitions} max_abs_err={worst_abs:.3g} "
          f"max_rel_err={worst_rel:.3g} xla_temp_bytes={temp}" +
          (f" fusedsl_arena_bytes={arena_bytes}" if arena_bytes is not None else "") + fusion_note +
          ("".join("\n  " + m for m in msgs)))
    return ok_all


def case_files(d, fmt):
    module = os.path.join(d, "module." + fmt)
    key = lambda p: int(re.search(r"_(\d+)\.npy$", p).group(1))
    ins = sorted(glob.glob(os.path.join(d, "input_*.npy")), key=key)
    exp = sorted(glob.glob(os.path.join(d, "expected_*.npy")), key=key)
    parts_file = os.path.join(d, "partitions")
    parts = int(open(parts_file).read()) if os.path.exists(parts_file) else 1
    arena_file = os.path.join(d, "arena_bytes")
    arena = int(open(arena_file).read()) if os.path.exists(arena_file) else None
    keep = os.path.exists(os.path.join(d, "keep_fusions"))
    return module, ins, exp, parts, arena, keep


def is_sharded(text):
    return "devices=" in text or "maximal device" in text


def compare_modules(a, b, seed=0):
    """Runs two modules on the same random inputs (SPMD over 8 devices when they have shardings);
    their outputs must be bitwise equal."""
    parts = DEVICE_COUNT if is_sharded(open(a).read()) else 1
    ea, da, ta = compile_module(a, parts)
    eb, db, tb = compile_module(b, parts)
    if len(ta) != len(tb):
        print(f"FAIL {a} vs {b}: {len(ta)} vs {len(tb)} parameters")
        return False
    rng = np.random.default_rng(seed)
    text = open(a).read()
    inputs = []
    for i, t in enumerate(ta):
        m = re.search(r"=\s*[a-z0-9]+\[([0-9,]*)\][^\n]*?\sparameter\(" + str(i) + r"\)", text.split("ENTRY", 1)[1])
        dims = tuple(int(x) for x in m.group(1).split(",") if x)
        if np.issubdtype(np.dtype(t), np.integer):  # indices: some out of range (XLA clamps)
            inputs.append(rng.integers(-4, 24, size=dims).astype(t))
        else:
            inputs.append(rng.uniform(-1, 1, size=dims).astype(np.float32))
    oa, ob = run(ea, da, ta, inputs), run(eb, db, tb, inputs)
    ok = len(oa) == len(ob) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(oa, ob))
    print(f"{'PASS' if ok else 'FAIL'} {a} and {b}: outputs={len(oa)}, partitions={parts}, "
          f"{'bitwise equal' if ok else 'differ'}")
    return ok


def compile_all(d):
    files = sorted(glob.glob(os.path.join(d, "*.hlo")) + glob.glob(os.path.join(d, "*.mlir")))
    failed = 0
    for f in files:
        text = open(f).read()
        parts = DEVICE_COUNT if is_sharded(text) else 1
        try:
            compile_module(f, parts)
        except Exception as e:  # noqa: BLE001 - report XLA's error for this file and go on
            failed += 1
            print(f"FAIL {os.path.basename(f)}: {type(e).__name__}: {str(e)[:2000]}")
    print(f"{len(files) - failed}/{len(files)} modules accepted and compiled by XLA")
    return 1 if failed or not files else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("module", nargs="?")
    ap.add_argument("--inputs", nargs="*", default=[])
    ap.add_argument("--expected", nargs="*", default=[])
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--cases")
    ap.add_argument("--sharded-only", action="store_true")
    ap.add_argument("--unsharded-only", action="store_true")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--format", choices=["hlo", "mlir"], default="hlo",
                    help="with --cases: run each case's module.hlo (default) or module.mlir")
    ap.add_argument("--compile-only", metavar="DIR")
    args = ap.parse_args()
    print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else ''}".strip(", "))
    if args.compile_only:
        return compile_all(args.compile_only)
    if args.compare:
        return 0 if compare_modules(*args.compare) else 1
    if args.cases:
        dirs = sorted(d for d in glob.glob(os.path.join(args.cases, "*")) if os.path.isdir(d))
        if not dirs:
            print(f"no cases under {args.cases}")
            return 1
        failed = 0
        ran = 0
        for d in dirs:
            module, ins, exp, parts, arena, keep = case_files(d, args.format)
            if not os.path.exists(module):
                continue
            if (args.sharded_only and parts == 1) or (args.unsharded_only and parts > 1):
                continue
            ran += 1
            try:
                failed += not run_case(os.path.basename(d) + "." + args.format, module, ins, exp, parts, arena, keep)
            except Exception as e:  # noqa: BLE001 - report XLA's error for this case and go on
                failed += 1
                print(f"FAIL {os.path.basename(d)}: {type(e).__name__}: {e}")
        print(f"{ran - failed}/{ran} cases passed")
        return 1 if failed or not ran else 0
    if not args.module:
        ap.print_usage()
        return 2
    try:
        ok = run_case(os.path.basename(args.module), args.module, args.inputs, args.expected, args.partitions)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {args.module}: {type(e).__name__}: {e}")
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
