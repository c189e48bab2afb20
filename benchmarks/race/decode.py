#!/usr/bin/env python3
"""GPT-2 small decode in the race: tokens per second of one decode step, fusedsl
(gpt2_decode_bench's decode cases) against transformers (hf_gpt2_decode.py) and XLA:CPU through
jax.jit (xla_gpt2_decode.py), one thread, in interleaved rounds.

  decode.py run --build BUILD --out DIR [--rounds 3] [--steps 30] [--torch-python PY]
                [--jax-python PY]
  decode.py report DIR/decode.json [--out DIR]

Each round starts every peer once, in an order that rotates with the round, as a process of its
own pinned to CPU 1 with one thread (race.py's one-thread settings); each process measures the
four cases (f32 and bf16 weights; 128 and 1023 tokens of context, each step at the same position)
and the bandwidth of a copy in its own run. A peer's figure for a case is the median over the
rounds of its tokens/s, with p10 and p90; the roofline fraction is the bytes a step must read
over that process's copy bandwidth (benchmarks/model/decode_roofline.py). The weights are random
and each program makes its own: the shapes, dtypes and bytes are the same, the values are not
(the test suite's gpt2_small_hf check compares fusedsl's logits with transformers' on the same
weights). Writes DIR/decode.json (every round's figures) and DIR/decode.md (the table).
"""
import argparse
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, here)
import race  # noqa: E402

PEERS = ["fusedsl", "transformers", "xla"]
TITLES = {"fusedsl": "fusedsl (gpt2_generator)",
          "transformers": "transformers (PyTorch eager, DynamicCache)",
          "xla": "XLA:CPU (jax.jit, static cache)"}
CASES = ["f32/ctx:128", "f32/ctx:1023", "bf16/ctx:128", "bf16/ctx:1023"]
CASE_TITLES = {"f32/ctx:128": "f32, ctx 128", "f32/ctx:1023": "f32, ctx 1023",
               "bf16/ctx:128": "bf16, ctx 128", "bf16/ctx:1023": "bf16, ctx 1023"}


def case_of(name):
    """'decode/weights:f32/ctx:128' (and the hf_/xla_ forms) -> 'f32/ctx:128'. The parts Google
    Benchmark adds for a case's settings ('min_time:1.000', 'repeats:3', ...) are left out."""
    parts = [p for p in name.split("/")
             if not p.startswith(("min_time:", "min_warmup_time:", "repeats:", "iterations:"))]
    if len(parts) != 3 or not parts[1].startswith("weights:"):
        return None
    return parts[1][len("weights:"):] + "/" + parts[2]


def read_peer(key, path):
    """{case: {tokens_per_second, roofline_fraction}} from a peer's JSON file."""
    with open(path) as f:
        doc = json.load(f)
    got = {}
    for b in doc["benchmarks"]:
        if key == "fusedsl" and b.get("run_type", "iteration") != "iteration":
            continue
        c = case_of(b["name"])
        if c in CASES:
            got[c] = {"tokens_per_second": float(b["tokens_per_second"]),
                      "roofline_fraction": float(b["roofline_fraction"])}
    missing = [c for c in CASES if c not in got]
    if missing:
        raise race.RaceError(f"{key}: {path} has no figure for {', '.join(missing)}")
    return got


def command(key, a, path):
    if key == "fusedsl":
        exe = os.path.join(a.build, "benchmarks", "model", "gpt2_decode_bench")
        if not os.access(exe, os.X_OK):
            raise race.RaceError(f"no {exe}: build the target gpt2_decode_bench")
        return [exe, "--benchmark_filter=^decode/weights", f"--benchmark_out={path}",
                "--benchmark_out_format=json"]
    script = {"transformers": "hf_gpt2_decode.py", "xla": "xla_gpt2_decode.py"}[key]
    python = a.torch_python if key == "transformers" else a.jax_python
    return [python or sys.executable, os.path.join(repo, "benchmarks", "model", script),
            "--steps", str(a.steps), "--out", path]


def summarise(results):
    """Adds each (peer, case)'s median, p10 and p90 over the rounds, and fusedsl's speedups."""
    rounds = results["rounds"]
    summary = {}
    for key in PEERS:
        for c in CASES:
            tps = [r[key][c]["tokens_per_second"] for r in rounds if key in r]
            roof = [r[key][c]["roofline_fraction"] for r in rounds if key in r]
            if not tps:
                continue
            summary.setdefault(key, {})[c] = {
                "tokens_per_second": race.quantile(tps, 0.5),
                "p10": race.quantile(tps, 0.1), "p90": race.quantile(tps, 0.9),
                "roofline_fraction": race.quantile(roof, 0.5)}
    for key in PEERS[1:]:
        for c in CASES:
            if key in summary and "fusedsl" in summary:
                summary[key][c]["fusedsl_speedup"] = (summary["fusedsl"][c]["tokens_per_second"] /
                                                      summary[key][c]["tokens_per_second"])
    results["summary"] = summary
    return results


def markdown(results):
    s = results["summary"]
    n = len(results["rounds"])
    lines = [f"GPT-2 small decode, one thread: tokens/s (median of {n} interleaved rounds "
             "[p10-p90]), the fraction of the copy-bandwidth roofline, and fusedsl's speedup "
             "over the peer:", "",
             "| peer | " + " | ".join(CASE_TITLES[c] for c in CASES) + " |",
             "|---|" + "---|" * len(CASES)]
    for key in PEERS:
        if key not in s:
            lines.append(f"| {TITLES[key]} | " + " | ".join("not run" for _ in CASES) + " |")
            continue
        cells = []
        for c in CASES:
            v = s[key][c]
            cell = (f"{v['tokens_per_second']:.1f} [{v['p10']:.1f}-{v['p90']:.1f}], "
                    f"{v['roofline_fraction']:.2f} of roofline")
            if "fusedsl_speedup" in v:
                cell += f", **{v['fusedsl_speedup']:.2f}x**"
            cells.append(cell)
        lines.append(f"| {TITLES[key]} | " + " | ".join(cells) + " |")
    m = results["machine"]
    lines += ["", f"{m.get('cpu_model', '?')} (family {m.get('cpu_family', '?')}, model "
              f"{m.get('cpu_model_number', '?')}), {m.get('cores_online', '?')} CPUs, "
              f"{'AVX-512' if m.get('avx512f') else 'no AVX-512'}; {results['started_utc']} to "
              f"{results['finished_utc']}; load average (1 min) "
              f"{results['load_average'][0]['load'][0]:.2f} at the start, "
              f"{results['load_average'][-1]['load'][0]:.2f} at the end. Each process pinned to "
              "CPU 1, one thread (OMP/MKL_NUM_THREADS=1; XLA: "
              f"{race.peer_env('xla', 1)['XLA_FLAGS']}); random weights of each program's own."]
    return "\n".join(lines) + "\n"


def run(a):
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    results = {"schema": "fusedsl-race-decode/1", "started_utc": race.now_utc(),
               "command": " ".join(sys.argv), "git_commit": race.git_commit(),
               "machine": race.machine_info(),
               "versions": {"torch_python": race.versions(a.torch_python or sys.executable),
                            "jax_python": race.versions(a.jax_python or sys.executable)},
               "settings": {"rounds": a.rounds, "steps": a.steps, "cores": race.CORES[1],
                            "threads": 1},
               "load_average": [{"when": "start", "load": os.getloadavg()}], "rounds": []}
    for r in range(a.rounds):
        order = PEERS[r % len(PEERS):] + PEERS[:r % len(PEERS)]
        got = {}
        for key in order:
            path = os.path.join(a.out, "logs", f"{key}_round{r}.json")
            log = os.path.join(a.out, "logs", f"{key}_round{r}.log")
            cmd = ["taskset", "-c", race.CORES[1]] + command(key, a, path)
            with open(log, "w") as fh:
                p = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                   env=race.peer_env(key, 1))
            if p.returncode != 0:
                raise race.RaceError(f"{key}, round {r}: exit status {p.returncode} (log: {log})")
            got[key] = read_peer(key, path)
            print(f"decode round {r} {key}: " +
                  ", ".join(f"{c} {v['tokens_per_second']:.1f} tok/s"
                            for c, v in got[key].items()), flush=True)
        results["rounds"].append(got)
    results["load_average"].append({"when": "end", "load": os.getloadavg()})
    results["finished_utc"] = race.now_utc()
    summarise(results)
    with open(os.path.join(a.out, "decode.json"), "w") as f:
        json.dump(results, f, indent=1)
    text = markdown(results)
    with open(os.path.join(a.out, "decode.md"), "w") as f:
        f.write(text)
    print(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--build", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--steps", type=int, default=30)
    r.add_argument("--torch-python")
    r.add_argument("--jax-python")
    p = sub.add_parser("report")
    p.add_argument("results")
    p.add_argument("--out")
    a = ap.parse_args(argv)
    if a.what == "run":
        run(a)
        return 0
    with open(a.results) as f:
        results = summarise(json.load(f))
    text = markdown(results)
    if a.out:
        with open(os.path.join(a.out, "decode.md"), "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
