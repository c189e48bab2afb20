#!/usr/bin/env python3
"""Runs the CPU benchmarks and compile-time measurements and keeps their raw output.

  benchmarks/record.py --build build/ci --out benchmarks/results/<date>-<machine> [STEP...]

Writes machine-readable files into --out and a manifest.json beside them: the machine (CPU model,
family and model, the vector instruction sets it has, vCPUs, memory, compiler, OS) and, per step,
the command, the files it wrote, its start and end (UTC) and the load average before and after
it. scripts/doc-tables reads these files to write the tables in docs/. Steps (default: all the
CPU benchmark steps, in this order; the compile-time steps run only when named):

  targets   benchmarks/cpu_targets.py --runs 3: the seed, GEMM and attention goals (cpu_targets/)
  gemm      cpu_gemm_bench (gemm.json)           attention  cpu_attention_bench (attention.json)
  gemm_s8   cpu_gemm_s8_bench, 9 repetitions of 0.2 s: the int8 GEMM beside the f32 one (gemm_s8.json)
  row       cpu_row_bench (row.json)             clock      cpu_clock_bench (clock.json)
  models    model_bench, 3 repetitions of 1 s (model_bench.json)
  generated generated_bench, 3 repetitions (generated.json)
  footprint footprint_bench: the GPT-2-shaped stack's memory (footprint.json)
  gpt2_decode  gpt2_decode_bench: GPT-2 small decode and prefill (gpt2_decode.json)
  profile   model_profile for the seed and the medium model (model_profile_<model>.json)
  profile_minilm  model_profile for all-MiniLM-L6-v2's encoder in the embedder's buckets of one
            sentence of 32 tokens and 8 sentences of 32 (model_profile_minilm_b1_l32.json,
            model_profile_minilm_b8_l32.json)
  profile_gpt2  model_profile for the GPT-2 small stacks at 128 and 1024 tokens, the race's
            models (model_profile_gpt2_seq128.json, model_profile_gpt2_seq1024.json)
  xla       benchmarks/model/xla_model_bench.py on both models (xla_<model>.json; needs the
            jax venv of scripts/setup-venv and the export_hlo example)
  compile_depth  benchmarks/compile_time/measure.sh (compile_depth.json; with nvcc rows when
                 nvcc is found)
  user_models    benchmarks/model/user_models.py: GPT-J, T5, mixture-of-experts, ALiBi and ViT
                 blocks as users write them, against PyTorch eager and torch.compile on one thread
                 (user_models.json; the user_models target built, and --torch-python)
  hf_gpt2_decode benchmarks/model/hf_gpt2_decode.py: transformers' GPT-2 small decode, the peer of
                 gpt2_decode (hf_gpt2_decode.json; needs torch and transformers: --torch-python,
                 default .venv-models/bin/python of scripts/setup-model-venv --reference)
  xla_gpt2_decode benchmarks/model/xla_gpt2_decode.py: XLA:CPU's (jax.jit) GPT-2 small decode
                 with a static cache, the other peer of gpt2_decode (xla_gpt2_decode.json; the
                 jax venv, --python)
  gpt2_small_hf  GPT-2 small with random weights (initializer range 0.06) against transformers:
                 tests/models/make_gpt2_reference.py gpt2-small (a 20-token prompt, 64 greedy
                 steps; --torch-python) into the build directory, then gpt2_small_check
                 (gpt2_small_hf.json)
  compile_tu     benchmarks/compile_time/tu_cost.py on the main translation units (compile_tu.json)
  compile_breakdown  benchmarks/compile_time/breakdown.py on BREAKDOWN_TUS: GCC's -ftime-report
                 phases and items, and the object's code by namespace (compile_breakdown.json)
  compile_vs_base  benchmarks/compile_time/compare_trees.sh: the units of COMPARE_TUS (or --tus)
                 compiled from --base (a checkout of an earlier commit) and from this tree,
                 alternating, three times (compile_vs_base.jsonl; the .cu unit when nvcc is
                 found); --new-modes: this tree's modes (compare_trees.sh's NEW_MODES, e.g.
                 ";-DFUSEDSL_SEPARATE_COMPILATION" for header-only and the compiled mode)
  test_suite     ctest --preset ci (test_suite.xml, JUnit; test_suite.json: wall time, load)

Build the binaries first (a Release build: the `ci` or `release` preset):
  cmake --build build/ci --target cpu_gemm_bench cpu_attention_bench cpu_row_bench \
      cpu_clock_bench model_bench generated_bench footprint_bench gpt2_decode_bench \
      gpt2_small_check model_profile export_hlo -j2
Steps append to an existing manifest.json (a step run again replaces its entry).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CPU_STEPS = ["targets", "gemm", "gemm_s8", "attention", "row", "clock", "models", "generated",
             "footprint", "gpt2_decode", "profile", "profile_minilm", "profile_gpt2", "xla"]
OTHER_STEPS = ["user_models", "hf_gpt2_decode", "xla_gpt2_decode", "gpt2_small_hf", "compile_depth", "compile_tu",
               "compile_breakdown", "compile_vs_base",
               "test_suite"]

# The translation units whose compile time and memory docs/compile-time.md reports: the examples
# a user starts from, the one-block LLaMA-style model with the executor, the tool, the heaviest test of each layer, the model benchmark, and the
# CUDA tests of the GEMM, attention and device executor (when nvcc is configured).
MAIN_TUS = ["examples/quickstart.cpp", "benchmarks/compile_time/llama_block_executor.cpp",
            "examples/transformer_demo.cpp", "examples/export_hlo.cpp",
            "tools/fusedsl_tpu.cpp", "tests/plan/fusion_test.cpp", "tests/plan/memory_test.cpp",
            "tests/backend/cpu/executor/model_test.cpp", "tests/backend/cpu/kernels/gemm_test.cpp",
            "tests/backend/cpu/kernels/attention_test.cpp", "tests/hlo/parser_test.cpp",
            "tests/export/export_test.cpp", "benchmarks/model/model_bench.cpp",
            "tests/cuda/gemm_test.cu", "tests/cuda/attention_test.cu",
            "tests/cuda_executor/executor_test.cu"]

# The units docs/compile-time.md breaks down by compiler phase and by namespace: the README's
# example, the one-block LLaMA-style model with the executor (the reference unit of a model's
# cost), the model benchmark and the heaviest test units.
BREAKDOWN_TUS = ["examples/quickstart.cpp", "benchmarks/compile_time/llama_block_executor.cpp",
                 "benchmarks/model/model_bench.cpp", "tests/export/export_test.cpp",
                 "tests/backend/cpu/executor/model_test.cpp"]


# What compile_vs_base compiles from both trees: the seed and medium programs with the CPU executor
# and nothing else (seed_medium_executor.cpp, compiled from this tree against each tree's headers),
# the README's example (which adds the HLO export), the model benchmark (which adds the bf16
# programs, the reference backend and the hand-written Eigen model) and the CUDA executor's
# benchmark (nvcc).
COMPARE_TUS = [os.path.join(HERE, "compile_time", "seed_medium_executor.cpp"),
               "examples/quickstart.cpp", "benchmarks/model/model_bench.cpp",
               "benchmarks/gpu/bench_executor.cu"]

# (vendor, family, model) -> the microarchitecture's name, for the machines results were taken on.
MICROARCHITECTURES = {("AuthenticAMD", 25, 1): "Zen 3", ("AuthenticAMD", 25, 17): "Zen 4",
                      ("AuthenticAMD", 26, 2): "Zen 5",
                      ("GenuineIntel", 6, 143): "Sapphire Rapids"}


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def cpuinfo_field(text, key):
    m = re.search(rf"^{re.escape(key)}\s*:\s*(.*)$", text, re.MULTILINE)
    return m.group(1).strip() if m else ""


def machine():
    with open("/proc/cpuinfo") as f:
        info = f.read()
    flags = set(cpuinfo_field(info, "flags").split())
    isa = [x for x in ["sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                       "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"] if x in flags]
    with open("/proc/meminfo") as f:
        mem_kib = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
    cxx = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()
    os_name = ""
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', f.read(), re.MULTILINE)
            os_name = m.group(1) if m else ""
    key = (cpuinfo_field(info, "vendor_id"), int(cpuinfo_field(info, "cpu family") or 0),
           int(cpuinfo_field(info, "model") or 0))
    return {
        "cpu_model": cpuinfo_field(info, "model name"),
        "microarchitecture": MICROARCHITECTURES.get(key, ""),
        "cpu_vendor": cpuinfo_field(info, "vendor_id"),
        "cpu_family": int(cpuinfo_field(info, "cpu family") or 0),
        "cpu_model_number": int(cpuinfo_field(info, "model") or 0),
        "isa": isa,
        "amx": "amx_tile" in flags,
        "hypervisor": "hypervisor" in flags,
        "vcpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "compiler": cxx[0] if cxx else "",
        "os": os_name,
    }


def run(cmd, **kw):
    print("record:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, **kw)
    if proc.returncode != 0:
        sys.exit(f"record: {cmd[0]} failed (exit status {proc.returncode})")
    return proc


def gbench(build, binary, out, extra=()):
    exe = os.path.join(build, binary)
    cmd = [exe, f"--benchmark_out={out}", "--benchmark_out_format=json", *extra]
    run(cmd, stdout=subprocess.DEVNULL)
    return cmd


def parse_profile(text):
    """model_profile's printout as a dict: the summary line's figures and one entry per group."""
    head = re.search(r"^(\w+): ([\d.]+) us per call .*?, ([\d.]+) of the FMA peak \(([\d.]+) "
                     r"GFLOP/s\)", text, re.MULTILINE)
    bursts = re.search(r"FMA bursts right after model calls: ([\d.]+) of the start-up peak "
                       r"\(after a pure-FMA run: ([\d.]+)\); the model: ([\d.]+)", text)
    if not head or not bursts:
        sys.exit("record: model_profile's output has an unexpected form:\n" + text)
    groups = []
    for m in re.finditer(r"^\s*(\d+) (\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$", text,
                         re.MULTILINE):
        groups.append({"group": int(m.group(1)), "kind": m.group(2), "anchor": m.group(3),
                       "mflop": float(m.group(4)), "us_per_call": float(m.group(5)),
                       "peak_fraction": None if m.group(6) == "-" else float(m.group(6))})
    return {"model": head.group(1), "us_per_call": float(head.group(2)),
            "peak_fraction": float(head.group(3)), "fma_peak_gflops": float(head.group(4)),
            "bursts_after_model_fraction": float(bursts.group(1)),
            "bursts_after_fma_fraction": float(bursts.group(2)),
            "model_over_rate_after_calls": float(bursts.group(3)),
            "groups": groups, "stdout": text}


def step(name, args, out):
    """Runs one step; returns (command lines, files written relative to out)."""
    b = args.build
    if name == "targets":
        cmd = [sys.executable, os.path.join(HERE, "cpu_targets.py"), "--build", b, "--runs", "3",
               "--keep", os.path.join(out, "cpu_targets")]
        run(cmd, stdout=subprocess.DEVNULL)
        files = sorted(os.path.join("cpu_targets", f)
                       for f in os.listdir(os.path.join(out, "cpu_targets")))
        return [cmd], files
    simple = {"gemm": "benchmarks/cpu/cpu_gemm_bench",
              "attention": "benchmarks/cpu/cpu_attention_bench",
              "row": "benchmarks/cpu/cpu_row_bench", "clock": "benchmarks/cpu/cpu_clock_bench"}
    if name in simple:
        return [gbench(b, simple[name], os.path.join(out, f"{name}.json"))], [f"{name}.json"]
    if name == "gemm_s8":
        cmd = gbench(b, "benchmarks/cpu/cpu_gemm_s8_bench", os.path.join(out, "gemm_s8.json"),
                     ["--benchmark_repetitions=9", "--benchmark_min_time=0.2"])
        return [cmd], ["gemm_s8.json"]
    if name == "models":
        cmd = gbench(b, "benchmarks/model/model_bench", os.path.join(out, "model_bench.json"),
                     ["--benchmark_min_time=1", "--benchmark_repetitions=3"])
        return [cmd], ["model_bench.json"]
    if name == "generated":
        cmd = gbench(b, "benchmarks/model/generated_bench", os.path.join(out, "generated.json"),
                     ["--benchmark_repetitions=3"])
        return [cmd], ["generated.json"]
    if name == "footprint":
        cmd = [os.path.join(b, "benchmarks/model/footprint_bench")]
        text = run(cmd, capture_output=True, text=True).stdout
        with open(os.path.join(out, "footprint.json"), "w") as f:
            json.dump(json.loads(text.strip().splitlines()[-1]), f, indent=1)
        return [cmd], ["footprint.json"]
    if name == "gpt2_decode":
        cmd = gbench(b, "benchmarks/model/gpt2_decode_bench", os.path.join(out, "gpt2_decode.json"))
        return [cmd], ["gpt2_decode.json"]
    if name == "user_models":
        cmd = [args.torch_python, os.path.join(HERE, "model/user_models.py"), "--build", b, "--out",
               os.path.join(out, "user_models.json")]
        run(cmd, stdout=subprocess.DEVNULL)
        return [cmd], ["user_models.json"]
    if name == "hf_gpt2_decode":
        cmd = [args.torch_python, os.path.join(HERE, "model/hf_gpt2_decode.py"), "--out",
               os.path.join(out, "hf_gpt2_decode.json")]
        run(cmd, stdout=subprocess.DEVNULL)
        return [cmd], ["hf_gpt2_decode.json"]
    if name == "xla_gpt2_decode":
        cmd = [args.python, os.path.join(HERE, "model/xla_gpt2_decode.py"), "--out",
               os.path.join(out, "xla_gpt2_decode.json")]
        run(cmd, stdout=subprocess.DEVNULL)
        return [cmd], ["xla_gpt2_decode.json"]
    if name == "gpt2_small_hf":
        model = os.path.join(b, "gpt2_small_hf")
        cmd = [args.torch_python, os.path.join(REPO, "tests/models/make_gpt2_reference.py"),
               "gpt2-small", model, "--prompt-len", "20", "--steps", "64",
               "--initializer-range", "0.06"]
        run(cmd, stdout=subprocess.DEVNULL)
        cmd2 = [os.path.join(b, "benchmarks/model/gpt2_small_check"), model, "--json",
                os.path.join(out, "gpt2_small_hf.json")]
        run(cmd2)
        return [cmd, cmd2], ["gpt2_small_hf.json"]
    if name in ("profile", "profile_minilm", "profile_gpt2"):
        cmds, files = [], []
        models = {"profile": (("seed", "100"), ("medium", "3")),
                  "profile_minilm": (("minilm_b1_l32", "100"), ("minilm_b8_l32", "20")),
                  "profile_gpt2": (("gpt2_seq128", "3"), ("gpt2_seq1024", "1"))}[name]
        for model, calls in models:
            cmd = [os.path.join(b, "benchmarks/model/model_profile"), calls, model]
            text = run(cmd, capture_output=True, text=True).stdout
            with open(os.path.join(out, f"model_profile_{model}.json"), "w") as f:
                json.dump(parse_profile(text), f, indent=1)
            cmds.append(cmd)
            files.append(f"model_profile_{model}.json")
        return cmds, files
    if name == "xla":
        hlo = os.path.join(b, "model_hlo")
        cmds, files = [], []
        for model in ("seed", "medium"):
            cmd = [os.path.join(b, "examples/export_hlo"), hlo, model]
            run(cmd, stdout=subprocess.DEVNULL)
            cmd2 = [args.python, os.path.join(HERE, "model/xla_model_bench.py"),
                    os.path.join(hlo, f"{model}.unfused.hlo"),
                    os.path.join(b, "benchmarks/model/model_bench"), "--model", model,
                    "--json", os.path.join(out, f"xla_{model}.json")]
            run(cmd2, stdout=subprocess.DEVNULL)
            cmds += [cmd, cmd2]
            files.append(f"xla_{model}.json")
        return cmds, files
    if name == "compile_depth":
        cmd = ["bash", os.path.join(HERE, "compile_time/measure.sh"), "--out",
               os.path.join(b, "compile_time"), "--json", os.path.join(out, "compile_depth.json")]
        run(cmd, stdout=subprocess.DEVNULL)
        return [cmd], ["compile_depth.json"]
    if name == "compile_tu":
        cmd = [sys.executable, os.path.join(HERE, "compile_time/tu_cost.py"), "--build", b,
               "--json", os.path.join(out, "compile_tu.json"), *MAIN_TUS]
        run(cmd)
        return [cmd], ["compile_tu.json"]
    if name == "compile_breakdown":
        cmd = [sys.executable, os.path.join(HERE, "compile_time/breakdown.py"), "--build", b,
               "--json", os.path.join(out, "compile_breakdown.json"), *BREAKDOWN_TUS]
        run(cmd)
        return [cmd], ["compile_breakdown.json"]
    if name == "compile_vs_base":
        if not args.base:
            sys.exit("record: compile_vs_base needs --base TREE (a checkout of the earlier commit)")
        tus = [t for t in (args.tus or COMPARE_TUS)
               if not t.endswith(".cu") or shutil.which("nvcc")]
        cmd = ["bash", os.path.join(HERE, "compile_time/compare_trees.sh"),
               os.path.abspath(args.base), REPO, os.path.join(out, "compile_vs_base.jsonl"),
               *(tus * 3)]
        if args.new_modes:
            cmd = ["env", f"NEW_MODES={args.new_modes}", *cmd]
        run(cmd, stdout=subprocess.DEVNULL)
        return [cmd], ["compile_vs_base.jsonl"]
    if name == "test_suite":
        xml = os.path.abspath(os.path.join(out, "test_suite.xml"))
        cmd = ["ctest", "--preset", "ci", "-j", str(os.cpu_count()), "--no-tests=error",
               "--output-junit", xml]
        start = time.monotonic()
        rc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL).returncode
        wall = time.monotonic() - start
        with open(os.path.join(out, "test_suite.json"), "w") as f:
            json.dump({"command": " ".join(shown(c) for c in cmd), "wall_seconds": round(wall, 1),
                       "exit_status": rc, "jobs": os.cpu_count()}, f, indent=1)
        return [cmd], ["test_suite.json", "test_suite.xml"]
    sys.exit(f"record: unknown step {name}")


def shown(arg):
    """A command-line word as the manifest keeps it: paths relative to the repository."""
    if arg == sys.executable:
        return "python3"
    if arg == REPO:
        return "."
    return arg.replace(REPO + os.sep, "")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", required=True, help="a Release build folder (ci or release preset)")
    p.add_argument("--out", required=True, help="benchmarks/results/<date>-<machine>")
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"),
                   help="the jax venv's python, for the xla step")
    p.add_argument("--torch-python", default=os.path.join(REPO, ".venv-models", "bin", "python"),
                   help="a python with torch and transformers, for the hf_gpt2_decode and "
                   "user_models steps")
    p.add_argument("--base", help="the earlier tree that compile_vs_base compares with")
    p.add_argument("--tus", nargs="+", help="compile_vs_base: the units (default: COMPARE_TUS)")
    p.add_argument("--new-modes", default="",
                   help="compile_vs_base: this tree's modes as flags separated by ';'")
    p.add_argument("--note", default="", help="a note kept in the manifest (what else ran)")
    p.add_argument("steps", nargs="*", help="steps to run (default: " + " ".join(CPU_STEPS) + ")")
    args = p.parse_args(argv)
    steps = args.steps or CPU_STEPS
    for s in steps:
        if s not in CPU_STEPS + OTHER_STEPS:
            p.error(f"unknown step {s} (one of {' '.join(CPU_STEPS + OTHER_STEPS)})")
    args.build = os.path.abspath(args.build)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    manifest_path = os.path.join(out, "manifest.json")
    manifest = {"machine": machine(), "steps": []}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest["steps"] = json.load(f).get("steps", [])
    for name in steps:
        entry = {"step": name, "started": utc_now(), "load_before": load_average()}
        cmds, files = step(name, args, out)
        entry.update(finished=utc_now(), load_after=load_average(), files=files,
                     commands=[" ".join(shown(c) for c in cmd) for cmd in cmds])
        if args.note:
            entry["note"] = args.note
        manifest["steps"] = [s for s in manifest["steps"] if s["step"] != name] + [entry]
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        print(f"record: {name} done, load average {entry['load_before']} -> {entry['load_after']}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
