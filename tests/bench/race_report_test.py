#!/usr/bin/env python3
"""benchmarks/race/report.py (the race's tables, standard library only), checked two ways, with no
benchmark run and no third-party package:
  1. on a results dict built here with known rounds: medians and percentiles, speedups, the
     fraction of peak, target verdicts (met, missed by how much), a failed cell's reason, the seed
     document's table, the CPU-time reading;
  2. on the committed results of benchmarks/results/: `race.py report --no-plots` must give back
     the committed race.md, line for line, so the published tables are what the raw results say.
"""
import contextlib
import glob
import io
import os
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.normpath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(repo, "benchmarks", "race"))
import race  # noqa: E402
import report  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def cell(model, threads, peer, means, **extra):
    rounds = [{"mean": m, "min": m, "calls": 1, "cpu_per_wall": 0.5, "cpu_mean": 0.5 * m}
              for m in means]
    c = {"model": model, "threads": threads, "peer": peer, "status": "ok", "rounds": rounds,
         "thread_settings": {"taskset -c": "1"}, "config": {},
         "memory": {"peak_rss_bytes": 100 * 2 ** 20},
         "check": {"vs_fusedsl": 1e-7, "vs_float64_reference": 2e-7},
         "median_seconds": race.quantile(means, 0.5), "p10_seconds": race.quantile(means, 0.1),
         "p90_seconds": race.quantile(means, 0.9)}
    c.update(extra)
    return c


# ---- 1. known inputs ----
check(race.quantile([5, 1, 3], 0.5) == 3, "median of three")
check(abs(race.quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 0.1) - 2.0) < 1e-12, "p10 of 11")
check(abs(race.quantile([1.0, 2.0], 0.9) - 1.9) < 1e-12, "p90 interpolates")

seed_flops = 2 * (2 * 128 * 128 * 128 * 4 + 2 * 128 * 128 * 128 * 2 + 2 * 128 * 128 * 512 * 2)
med_flops = 1e10
results = {
    "machine": {"cpu_model": "AMD EPYC", "cpu_family": 25, "cpu_model_number": 17,
                "cores_online": 2, "avx512f": True, "amx_bf16": False},
    "build": {"isa": "avx512f", "compiler": "12.2.0", "eigen": "3.4.0"},
    "fma_peak": {"start_per_core": {"0": 100e9, "1": 100e9},
                 "end_per_core": {"0": 100e9, "1": 110e9}},
    "versions": {}, "started_utc": "t0", "finished_utc": "t1", "git_commit": "abc",
    "load_average": [{"when": "start", "load": [0.5, 0.5, 0.5]}],
    "settings": {"rounds": 3, "round_seconds": 0.3, "gap_seconds": 0.2, "tolerance": 2e-5,
                 "timing": "wall clock"},
    "models": {"seed": {"flops": seed_flops, "param_bytes": 1000,
                        "config": {"seq": 128, "d": 128}},
               "medium": {"flops": med_flops, "param_bytes": 2000,
                          "config": {"seq": 512, "d": 512}}},
    "cells": [
        cell("seed", 1, "fusedsl", [1.0e-3, 1.1e-3, 0.9e-3],
             config={"executor_buffer_bytes": 4096}),
        cell("seed", 1, "eigen", [1.4e-3, 1.5e-3, 1.6e-3]),
        cell("seed", 1, "torch_eager", [3e-3, 3e-3, 3e-3]),
        cell("seed", 1, "xla", [1.2e-3, 1.2e-3, 1.2e-3],
             config={"memory_analysis": {"temp_size_in_bytes": 2048,
                                         "argument_size_in_bytes": 1024}},
             memory={"peak_rss_bytes": 75 * 2 ** 20}),
        {"model": "seed", "threads": 1, "peer": "torch_compile", "status": "failed",
         "reason": "InductorError: no C++ compiler", "thread_settings": {}},
        cell("medium", 1, "fusedsl", [0.1, 0.1, 0.1]),
        cell("medium", 1, "onnxruntime", [0.12, 0.12, 0.12]),
    ],
}
cells = report.cells_by(results)
check(abs(report.speedup(cells, "seed", 1, "eigen") - 1.5) < 1e-12, "speedup over Eigen 1.5x")
check(report.fastest_rival(cells, "seed", 1) == ("xla", 1.2e-3), "fastest rival is XLA")
check(report.fmt_time(1.0e-3) == "1 ms" and report.fmt_time(123.4e-6) == "123 µs" and
      report.fmt_time(2.5) == "2.5 s", "time formats")
rows = {r[0]: r for r in report.target_rows(results)}
seed_row = rows["seed, 1 thread: fusedsl >= 1.5x the fastest peer"]
check(seed_row[1].startswith("1.20x (XLA:CPU (jax.jit) 1.2 ms"), f"seed figure: {seed_row[1]}")
check(seed_row[2] == "missed by 0.30x (fusedsl needs 25% more speed)", f"seed verdict: {seed_row}")
med = rows["medium, f32, 1 thread: >= 0.9 of the FMA peak or >= 1.15x the fastest peer"]
# 1e10 FLOPs in 0.1 s = 100 GFLOP/s = 1.0 of the peak: met by the first reading.
check(med[1] == "1.000 of the peak; 1.20x ONNX Runtime; on process CPU time 1.20x (ONNX Runtime)"
      and med[2] == "met", f"medium: {med}")
check(rows["bf16 on AMX"][1] == "not measured: no AMX", "the AMX row")
# A bf16-weight model on a CPU with AMX: judged against the faster PyTorch bf16 cell, only where
# fusedsl's matmuls ran on the tiles; a peer left out says why.
bf16 = dict(results, machine=dict(results["machine"], amx_bf16=True),
            models={"seed_bf16": {"flops": seed_flops, "param_bytes": 500,
                                  "config": {"seq": 128, "d": 128, "weights": "bf16"}}},
            cells=[cell("seed_bf16", 1, "fusedsl", [1e-3] * 3, config={"amx_matmuls": 12}),
                   cell("seed_bf16", 1, "torch_eager", [1.5e-3] * 3),
                   cell("seed_bf16", 1, "torch_compile", [1.2e-3] * 3),
                   {"model": "seed_bf16", "threads": 1, "peer": "eigen", "status": "not run",
                    "reason": "the hand-written Eigen model is f32 only", "thread_settings": {}}])
b_rows = {r[0]: r for r in report.target_rows(bf16)}
b_row = b_rows.get("seed, bf16 weights, 1 thread: fusedsl on AMX >= 1.3x PyTorch in bf16")
check(b_row is not None and b_row[1].startswith("1.20x (torch.compile (Inductor) 1.2 ms") and
      b_row[2] == "missed by 0.10x (fusedsl needs 8% more speed)", f"the bf16 row: {b_row}")
b_off = dict(bf16, cells=[dict(bf16["cells"][0], config={"amx_matmuls": 0})] + bf16["cells"][1:])
b_row = {r[0]: r for r in report.target_rows(b_off)}[b_row[0] if b_row else ""]
check(b_row[2].startswith("not measured: no AMX"), f"no tiles, no verdict: {b_row}")
check("| Eigen, hand-written | the hand-written Eigen model is f32 only |" in
      report.markdown(bf16, plots=False), "a peer left out of a bf16 model says why")
# The peers each model leaves out: the f32 stacks none; bf16 weights ONNX Runtime and Eigen; the
# LLaMA block Eigen (no hand-written one).
check(race.left_out(race.models.MODELS["seed"]) == {}, "the seed leaves no peer out")
check(sorted(race.left_out(race.models.MODELS["medium_bf16"])) == ["eigen", "onnxruntime"],
      "bf16 weights leave out Eigen and ONNX Runtime")
check(sorted(race.left_out(race.models.MODELS["llama"])) == ["eigen"] and
      "no hand-written Eigen LLaMA block" in race.left_out(race.models.MODELS["llama"])["eigen"],
      "the LLaMA block leaves out Eigen, saying why")
text = report.markdown(results, plots=False)
check("| torch.compile (Inductor) | failed: InductorError: no C++ compiler | not run |" in text,
      "a failed cell says why, a missing one says not run")
check("| Eigen, hand-written | 1.5 ms [1.42 ms-1.58 ms], **1.50x** |" in text,
      "median [p10-p90] and the speedup in the time table")
check("**The peak measured at the end (110.0) beats the start-up one by 10%" in text,
      "a higher end-of-run peak is flagged")
seed_doc = report.seed_document_table(results)
check("| XLA:CPU (jax.jit) | 1.2 ms | 2.50x | 75 MiB | 25% | temp 2 KiB + arguments 1 KiB |"
      in seed_doc, "the seed document's XLA row: " + seed_doc)
check("| the document's claim (XLA on a TPU against eager) |  | 2-3x |  | 20-30% |  |" in seed_doc,
      "the document's claim row")
check(seed_row[2] in text, "the targets table holds the verdict")
check("| Eigen, hand-written | 750 µs, 1.50x | not run |" in text, "the CPU-time table")

# ---- scripts/bench --all: decode.py's summary and the every-model matrix ----
import decode  # noqa: E402


def decode_round(f32_128, xla_128):
    r = {}
    for key, base in (("fusedsl", f32_128), ("transformers", 20.0), ("xla", xla_128)):
        r[key] = {c: {"tokens_per_second": base * (1 + 0.5 * i), "roofline_fraction": 0.5}
                  for i, c in enumerate(decode.CASES)}
    return r


dec = {"rounds": [decode_round(30.0, 25.0), decode_round(40.0, 10.0), decode_round(20.0, 20.0)],
       "machine": {"cpu_model": "AMD EPYC", "cpu_family": 25, "cpu_model_number": 1,
                   "cores_online": 2, "avx512f": False},
       "started_utc": "t0", "finished_utc": "t1",
       "load_average": [{"load": [0.1, 0.1, 0.1]}, {"load": [0.9, 0.9, 0.9]}]}
decode.summarise(dec)
s128 = dec["summary"]["fusedsl"]["f32/ctx:128"]
check(s128["tokens_per_second"] == 30.0 and abs(s128["p10"] - 22.0) < 1e-12,
      f"decode median and p10 over rounds: {s128}")
check(abs(dec["summary"]["xla"]["f32/ctx:128"]["fusedsl_speedup"] - 1.5) < 1e-12,
      "decode speedup: fusedsl's median 30 over XLA's 20")
check(abs(dec["summary"]["transformers"]["bf16/ctx:1023"]["fusedsl_speedup"] - 1.5) < 1e-12,
      "decode speedup, last case")
check(decode.case_of("hf_decode/weights:bf16/ctx:1023") == "bf16/ctx:1023" and
      decode.case_of("decode/weights:f32/ctx:128/min_time:1.000") == "f32/ctx:128" and
      decode.case_of("decode_paged/batch:8/ctx:128") is None, "decode case names")
dmd = decode.markdown(dec)
check("| XLA:CPU (jax.jit, static cache) | 20.0 [12.0-24.0], 0.50 of roofline, **1.50x** |" in dmd,
      "the decode table's XLA cell: " + dmd)
emb = {"runs": [{"peer": "fusedsl", "threads": 1, "batch": 1, "sentences_per_second": 60.0},
                {"peer": "sentence_transformers", "threads": 1, "batch": 1,
                 "sentences_per_second": 20.0},
                {"peer": "onnxruntime", "threads": 1, "batch": 1, "sentences_per_second": 40.0}]}
every = report.all_models_table(results, emb, dec)
check("| peer | seed | medium | MiniLM-L6, batch 1 | GPT-2 decode, f32, ctx 128 |" in every,
      "the every-model matrix's columns: " + every)
check("| PyTorch eager | 3.00x | not run | 3.00x | 1.50x |" in every,
      "PyTorch eager's row takes sentence-transformers and transformers")
check("| Eigen, hand-written | 1.50x | not run | not run: no embedding peer of this kind | "
      "not run: no decode peer of this kind |" in every, "a peer with no such benchmark says so")
check(every in report.markdown(results, plots=False, embed=emb, decode=dec),
      "the report holds the matrix when the run has the other models")
check("MiniLM" not in report.markdown(results, plots=False), "and not when it has not")

# ---- 2. the committed results regenerate the committed tables ----
committed = sorted(glob.glob(os.path.join(repo, "benchmarks", "results", "*", "race.md")))
check(committed, "no committed race.md under benchmarks/results/")
for md in committed:
    res = os.path.join(os.path.dirname(md), "results.json")
    with tempfile.TemporaryDirectory() as tmp:
        with contextlib.redirect_stdout(io.StringIO()):
            race.main(["report", res, "--out", tmp, "--no-plots"])
        with open(os.path.join(tmp, "race.md")) as f:
            regenerated = f.read()
        with open(md) as f:
            published = f.read()
    # The committed file has the plot links; the regenerated one (--no-plots) has not.
    published_tables = published.split("\n![speedup](speedup.png)")[0].rstrip("\n")
    check(regenerated.rstrip("\n") == published_tables,
          f"{md} is not what {res} gives (rerun scripts/bench --report {res})")

if failures:
    for f in failures:
        print("FAIL:", f)
    sys.exit(1)
print(f"race_report_test: all checks passed ({len(committed)} committed result set(s))")
