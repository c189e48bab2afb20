#!/usr/bin/env python3
"""The embedding benchmark: all-MiniLM-L6-v2 sentence embeddings, sentences per second, fusedsl
(sentence_embedder, embed_peer.cpp) against sentence-transformers (PyTorch) and ONNX Runtime
(embed_peer.py), tokenisation included, on the committed sentences (embed_sentences.txt: 256
sentences of 8-64 tokens).

  embed.py --model DIR --build BUILD --out DIR [--threads 1 2] [--rounds 5] [--batches 1 32]

Each peer is a process of its own, pinned with taskset as in race.py (one thread: CPU 1; two:
CPUs 0 and 1), with the thread variables of its thread count in its environment; fusedsl on two
threads runs the polling pool (cpu::threads{2, 50us}, race.py's FUSEDSL_SPIN_US; ONNX Runtime's
intra-op pool spins by default too). Every peer first
embeds all sentences; the run stops unless fusedsl's and ONNX Runtime's embeddings agree with
sentence-transformers' (each sentence's cosine >= 0.99999, every component within 1e-4). Then, in
each round, for each batch size, every peer (in an order that rotates with the round) makes one
timed pass over all sentences in calls of that many sentences; the first round adds one untimed
pass before each. The figures are medians over the rounds. GFLOP/s counts the matmul FLOPs of the
real tokens only (bert_config::flops per sentence, padding excluded), against the start-up
FMA-chain peak of the core (benchmarks/cpu/fma_peak.hpp) measured in the same run.

Writes DIR/embed.json (every time, the agreement, the peers' peak RSS, machine and versions) and
DIR/embed.md (the table).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, here)
import race  # noqa: E402

PEERS = ["fusedsl", "sentence_transformers", "onnxruntime"]
D, LAYERS, FFN = 384, 6, 1536


def flops(tokens):
    """Matmul FLOPs of one sentence of `tokens` tokens (models/bert.hpp bert_config::flops)."""
    n = float(tokens)
    return LAYERS * (2 * n * D * D * 4 + 2 * n * n * D * 2 + 2 * n * D * FFN * 2)


def token_counts(model_dir, sentences):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    return [len(tok.encode(s).ids) for s in sentences]


def agreement(got, want):
    g, w = got.astype(np.float64), want.astype(np.float64)
    cos = (g * w).sum(1) / np.sqrt((g * g).sum(1) * (w * w).sum(1))
    finite = bool(np.isfinite(g).all())
    return {"min_cosine": float(cos.min()) if finite else None,
            "max_abs_diff": float(np.abs(g - w).max()) if finite else None,
            "finite": finite,
            "ok": finite and bool(cos.min() >= 0.99999) and bool(np.abs(g - w).max() <= 1e-4)}


def start(key, threads, a, out):
    env = dict(os.environ)
    n = str(threads)
    env.update(OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n)
    output = os.path.join(out, f"{key}_t{threads}.npy")
    common = ["--model", a.model, "--sentences", a.sentences, "--output", output,
              "--threads", n]
    if key == "fusedsl":
        # Two threads: the polling pool, as in race.py (ONNX Runtime's pool spins too).
        spin = race.FUSEDSL_SPIN_US if threads > 1 else 0
        cmd = ([os.path.join(a.build, "benchmarks", "race", "race_embed_fusedsl")] + common
               + ["--spin-us", str(spin)])
        if a.fusedsl_call_cost is not None:
            cmd += ["--call-cost", repr(a.fusedsl_call_cost)]
    else:
        cmd = [sys.executable, os.path.join(here, "embed_peer.py"), "--peer", key,
               "--onnx", os.path.join(out, "minilm.onnx")] + common
    p = race.Peer(f"{key}_t{threads}", cmd, env, race.CORES[threads],
                  os.path.join(out, f"{key}_t{threads}.log"))
    r = p.wait_reply(900)
    if not r.get("ready"):
        raise race.RaceError(f"{key} ({threads} threads) did not start: {r.get('error', r)}")
    return p, output


def fma_peak(a, core):
    exe = os.path.join(a.build, "benchmarks", "race", "race_embed_fusedsl")
    out = subprocess.run(["taskset", "-c", core, exe, "--fma-peak"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.split("@@race ", 1)[1])["fma_peak_flops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sentences", default=os.path.join(here, "embed_sentences.txt"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--fusedsl-call-cost", type=float, default=None,
                    help="embedder_options::call_cost_tokens (default: the embedder's); 1e6 "
                         "splits each call into as few encoder calls as can be (chunks of 8)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(a.sentences, encoding="utf-8") as f:
        sentences = f.read().splitlines()
    counts = token_counts(a.model, sentences)
    real_flops = sum(flops(n) for n in counts)
    results = {
        "what": "all-MiniLM-L6-v2 sentence embeddings per second, tokenisation included",
        "started": race.now_utc(), "machine": race.machine_info(),
        "versions": race.versions(sys.executable), "commit": race.git_commit(),
        "load_average_start": open("/proc/loadavg").read().split()[:3],
        "sentences": {"file": os.path.relpath(a.sentences, repo),
                      "count": len(sentences), "tokens": sum(counts),
                      "token_range": [min(counts), max(counts)]},
        "real_token_flops_per_pass": real_flops,
        "fma_peak_flops_per_core": {c: fma_peak(a, c) for c in ("0", "1")},
        "rounds": a.rounds, "fusedsl_call_cost_tokens": a.fusedsl_call_cost, "runs": [],
    }
    for threads in a.threads:
        peers, outputs = {}, {}
        try:
            for key in PEERS:
                peers[key], outputs[key] = start(key, threads, a, a.out)
            ref = np.load(outputs["sentence_transformers"])
            agree = {k: agreement(np.load(outputs[k]), ref) for k in ("fusedsl", "onnxruntime")}
            for k, v in agree.items():
                print(f"threads {threads}: {k} vs sentence-transformers: {v}", flush=True)
                if not v["ok"]:
                    raise race.RaceError(f"{k}'s embeddings differ from sentence-transformers'")
            times = {(k, b): [] for k in PEERS for b in a.batches}
            work = {}  # fusedsl's padded tokens and encoder calls per pass, by batch
            for r in range(a.rounds):
                order = PEERS[r % len(PEERS):] + PEERS[:r % len(PEERS)]
                for b in a.batches:
                    for k in order:
                        reply = peers[k].request(f"run {b} 1 {1 if r == 0 else 0}", 1800)
                        t = reply["times"]
                        times[(k, b)] += t
                        if "padded_tokens_per_pass" in reply:
                            work[(k, b)] = {f: reply[f] for f in ("padded_tokens_per_pass",
                                                                  "encoder_calls_per_pass")}
                        print(f"threads {threads} round {r} batch {b} {k}: "
                              f"{len(sentences) / t[0]:.1f} sentences/s", flush=True)
            peak = max(results["fma_peak_flops_per_core"].values()) * threads
            for (k, b), ts in times.items():
                med = statistics.median(ts)
                results["runs"].append({
                    "peer": k, "threads": threads, "batch": b, "pass_seconds": ts,
                    "median_pass_seconds": med,
                    "sentences_per_second": len(sentences) / med,
                    "real_token_gflops": real_flops / med * 1e-9,
                    "fraction_of_fma_peak": real_flops / med / peak,
                    "agreement_with_sentence_transformers": agree.get(k),
                    "thread_settings": race.thread_settings(
                        "torch_eager" if k == "sentence_transformers" else k, threads),
                    "peak_rss_bytes": peers[k].memory()["peak_rss_bytes"],
                    **work.get((k, b), {})})
        finally:
            for p in peers.values():
                p.stop()
    results["load_average_end"] = open("/proc/loadavg").read().split()[:3]
    results["finished"] = race.now_utc()
    with open(os.path.join(a.out, "embed.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    with open(os.path.join(a.out, "embed.md"), "w") as f:
        f.write(table(results))
    print(table(results))


def table(results):
    rows = ["| threads | batch | peer | sentences/s | vs sentence-transformers | vs ONNX Runtime "
            "| real-token GFLOP/s | of FMA peak | peak RSS (MB) |",
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    by = {(r["peer"], r["threads"], r["batch"]): r for r in results["runs"]}
    for r in results["runs"]:
        st = by[("sentence_transformers", r["threads"], r["batch"])]["sentences_per_second"]
        ort = by[("onnxruntime", r["threads"], r["batch"])]["sentences_per_second"]
        rows.append(f"| {r['threads']} | {r['batch']} | {r['peer']} "
                    f"| {r['sentences_per_second']:.1f} | {r['sentences_per_second'] / st:.2f}x "
                    f"| {r['sentences_per_second'] / ort:.2f}x | {r['real_token_gflops']:.1f} "
                    f"| {r['fraction_of_fma_peak']:.2f} | {r['peak_rss_bytes'] / 1e6:.0f} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
