#!/usr/bin/env python3
"""The race: fusedsl's CPU executor against the runtimes a user would otherwise pick, on the same
models with the same weights (scripts/bench runs this; docs/race.md shows the results).

  race.py run --build BUILD --out RUNDIR [--quick] [--models M ...] [--threads 1 2]
              [--rounds R] [--round-seconds S] [--peers P ...]
  race.py report RESULTS.json --out DIR [--no-plots]

`run` writes RUNDIR/weights/<model>/*.npy (seeded), starts every peer of a model in its own
process pinned with taskset (one thread: CPU 1; two threads: CPUs 0-1), checks every peer's
output against fusedsl's, and fusedsl's against a float64 NumPy model, before any timing
(models.TOLERANCE; a cell whose output differs is not timed, nor any peer of a model whose fusedsl
output is wrong, and the run ends with exit status 1 and the list of mismatches), then
times them in interleaved rounds: in round r every peer runs once, the order rotated by r, each
peer's round being K calls (K set from a warm-up so that a round takes about --round-seconds),
after one untimed call when calls are short (--rounds rounds; --long-rounds where the fastest peer
takes over a second a call). A peer's figure is the median over rounds of its
per-round mean call time, with the 10th and 90th percentiles. The start-up FMA-chain peak
(benchmarks/cpu/fma_peak.hpp) is measured on each core at the start and again at the end. It
writes RUNDIR/results.json, then the report (RUNDIR/race.md and PNG plots).

`--quick`: the three small models (one and two threads for the pre-LN one, one thread for the
others; torch.compile at one thread only), every peer's output checked, one short round, and the
check shown to refuse wrong functions (GELU-erf, the causal mask flipped, the norm placement
flipped; for the LLaMA block RoPE on interleaved pairs and the wrong key/value head for a query
head); nothing about speed is asserted.

The bf16-weight models (seed_bf16, medium_bf16) race fusedsl with cpu::amx_bf16{} against PyTorch
and XLA running the model in bfloat16, held to models.BF16_TOLERANCE; the hand-written Eigen model
and ONNX Runtime are f32 only and get a cell saying so. The LLaMA block (models.py) has no
hand-written Eigen peer; its other peers are those of the f32 models.
"""
import argparse
import datetime
import json
import os
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import models  # noqa: E402

FULL_MODELS = ["seed", "medium", "gpt2_seq128", "gpt2_seq1024", "llama", "seed_bf16",
               "medium_bf16"]
QUICK_MODELS = ["quick_post_ln", "quick_pre_ln", "quick_llama"]
# --quick's thread counts: both for the pre-LN model only, which keeps it under two minutes
# (torch.compile's setup is most of the time).
QUICK_THREADS = {"quick_post_ln": [1], "quick_pre_ln": [1, 2], "quick_llama": [1]}
PYTHON_PEERS = ["torch_eager", "torch_compile", "onnxruntime", "xla"]
# The peers that do not run a model, and why: ONNX Runtime and the hand-written Eigen model with
# bf16 weights; the Eigen model on the LLaMA block.
NO_BF16 = {"eigen": "the hand-written Eigen model is f32 only",
           "onnxruntime": "not raced in bf16 (the race's ONNX model is the f32 export)"}
NO_LLAMA = {"eigen": "no hand-written Eigen LLaMA block (the Eigen model is the GPT/BERT stack)"}


def left_out(cfg):
    """{peer: why} for the peers that do not run the model `cfg`."""
    return dict(NO_BF16 if models.is_bf16(cfg) else {}, **(NO_LLAMA if models.is_llama(cfg) else {}))
# One-thread cores and two-thread cores: CPU 0 also carries the driver and the system.
CORES = {1: "1", 2: "0,1"}
# fusedsl on two threads: the polling pool (threads{2, 50us}) splits even the seed's kernels on
# cores of its own (docs/performance.md, "Threads"); the default sleeping pool races beside it.
FUSEDSL_SPIN_US = 50


class RaceError(SystemExit):
    """A failure that stops the run (exit status 1), with the reason."""

    def __init__(self, msg):
        super().__init__(f"race: {msg}")


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def machine_info():
    info = {"cores_online": os.cpu_count()}
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name":
                    info.setdefault("cpu_model", value)
                elif key == "cpu family":
                    info.setdefault("cpu_family", int(value))
                elif key == "model":
                    info.setdefault("cpu_model_number", int(value))
                elif key == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    info["isa_flags"] = sorted(f for f in flags if f.startswith(("avx", "amx", "fma")))
    info["avx512f"] = "avx512f" in flags
    info["amx_bf16"] = "amx_bf16" in flags
    info["kernel"] = platform.release()
    try:
        info["lscpu_caches"] = [line.strip() for line in subprocess.run(
            ["lscpu"], capture_output=True, text=True).stdout.splitlines() if "cache" in line]
    except OSError:
        pass
    return info


def versions(python):
    """Versions of the peers' packages (from the peers' Python) and of the toolchain."""
    code = ("import json, importlib.metadata as m, platform\n"
            "v = {'python': platform.python_version()}\n"
            "for p in ['torch', 'jax', 'jaxlib', 'onnxruntime', 'onnx', 'onnxscript', 'numpy',"
            " 'matplotlib']:\n"
            "    try: v[p] = m.version(p)\n"
            "    except m.PackageNotFoundError: v[p] = None\n"
            "print(json.dumps(v))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    v = json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-300:]}
    return v


def git_commit():
    out = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"],
                         capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (out.stdout.strip() + ("+changes" if dirty else "")) if out.returncode == 0 else None


def quantile(values, q):
    """The q-quantile with linear interpolation between order statistics (NumPy's default)."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Peer:
    """A peer process: its command line, its replies (read by a thread) and its state."""

    def __init__(self, key, cmd, env, cores, log_path):
        self.key, self.cores, self.log_path = key, cores, log_path
        self.cmd = ["taskset", "-c", cores] + cmd
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env, bufsize=1)
        self.replies = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("@@race "):
                self.replies.put(json.loads(line[len("@@race "):]))
            else:
                self.log.write(line)
                self.log.flush()
        self.replies.put(None)

    def wait_reply(self, timeout):
        try:
            r = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise RaceError(f"{self.key}: no reply within {timeout:.0f} s (log: {self.log_path})")
        if r is None:
            self.proc.wait()
            return {"ready": False, "error": f"exited with status {self.proc.returncode} "
                                             f"({self.last_log_line()})"}
        return r

    def last_log_line(self):
        self.log.flush()
        try:
            with open(self.log_path) as f:
                lines = [line.strip() for line in f if line.strip()]
            return lines[-1][:300] if lines else "no output"
        except OSError:
            return "no log"

    def request(self, line, timeout):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        r = self.wait_reply(timeout)
        if "times" not in r:
            raise RaceError(f"{self.key}: `{line}` failed: {r.get('error', r)}")
        return r

    def memory(self):
        m = {}
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k in ("VmHWM", "VmRSS"):
                        m[k] = int(v.split()[0]) * 1024
        except OSError:
            pass
        return {"peak_rss_bytes": m.get("VmHWM"), "rss_end_bytes": m.get("VmRSS")}

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def peer_env(key, threads):
    env = dict(os.environ)
    n = str(threads)
    env.update(OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n)
    if key == "xla":
        # One host device; XLA:CPU's intra-op pool sized by PJRT_NPROC (and the affinity mask);
        # its Eigen-threaded dots only with two threads.
        env["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=1 "
                            f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}")
        env["PJRT_NPROC"] = n
        env["JAX_PLATFORMS"] = "cpu"
    return env


def thread_settings(key, threads):
    """What each peer's thread count means, as set (recorded in the results)."""
    common = {"taskset -c": CORES[threads], "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    if key == "fusedsl":
        spin = FUSEDSL_SPIN_US if threads > 1 else 0
        suffix = f", {spin}us}}" if spin else "}"
        return dict(common, executor=f"cpu::threads{{{threads}" + suffix)
    if key == "fusedsl_sleeping":
        return dict(common, executor=f"cpu::threads{{{threads}}} (sleeping pool)")
    if key == "eigen":
        return dict(common, eigen=f"Eigen::setNbThreads({threads}) (OpenMP GEMMs)")
    if key in ("torch_eager", "torch_compile"):
        return dict(common, torch=f"set_num_threads({threads}), set_num_interop_threads(1)")
    if key == "onnxruntime":
        return dict(common, onnxruntime=f"intra_op_num_threads={threads}, inter_op_num_threads=1, "
                                        "ORT_SEQUENTIAL")
    if key == "xla":
        e = peer_env(key, threads)
        return dict(common, XLA_FLAGS=e["XLA_FLAGS"], PJRT_NPROC=threads)
    raise ValueError(key)


class Race:
    def __init__(self, a):
        self.a = a
        self.out = os.path.abspath(a.out)
        self.bin_dir = os.path.join(os.path.abspath(a.build), "benchmarks", "race")
        os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
        self.results_path = os.path.join(self.out, "results.json")
        self.mismatches = []

    def binary(self, model):
        path = os.path.join(self.bin_dir, f"race_{model}")
        if not os.access(path, os.X_OK):
            raise RaceError(f"no peer program {path}: build the target race_{model}")
        return path

    def c_json(self, args, cores="1"):
        out = subprocess.run(["taskset", "-c", cores] + args, capture_output=True, text=True)
        lines = [line for line in out.stdout.splitlines() if line.startswith("@@race ")]
        if out.returncode != 0 or not lines:
            raise RaceError(f"{' '.join(args)} failed ({out.returncode}): {out.stderr[-400:]}")
        return json.loads(lines[-1][len("@@race "):])

    def fma_peaks(self, model):
        return {c: self.c_json([self.binary(model), "--fma-peak"], c)["fma_peak_flops"]
                for c in ("0", "1")}

    def save(self, results):
        tmp = self.results_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, self.results_path)

    def run(self):
        a = self.a
        python = a.python or sys.executable
        model_names = a.models or (QUICK_MODELS if a.quick else FULL_MODELS)
        for m in model_names:
            self.binary(m)
        results = {
            "schema": "fusedsl-race/1", "quick": a.quick, "started_utc": now_utc(),
            "command": " ".join(sys.argv), "git_commit": git_commit(), "machine": machine_info(),
            "versions": versions(python),
            "settings": {"rounds": a.rounds, "long_rounds": a.long_rounds,
                         "round_seconds": a.round_seconds,
                         "gap_seconds": a.gap, "tolerance": models.TOLERANCE,
                         "bf16_tolerance": models.BF16_TOLERANCE,
                         "tolerance_rule": "max |y - y_fusedsl| <= tolerance * max |y_fusedsl|, "
                                           "every element finite",
                         "weights": "x ~ normal(0, 1); linear weights [in, out] ~ normal(0, "
                                    f"1/in); biases, betas normal(0, {models.WEIGHT_STD}); gammas "
                                    f"and RMSNorm weights 1 + normal(0, {models.WEIGHT_STD}); "
                                    "LLaMA's cos and sin of the rotary angles (base "
                                    f"{models.ROPE_BASE:g}); NumPy seed {a.seed}",
                         "cores": {str(k): v for k, v in CORES.items()},
                         "threads": a.threads or "default",
                         "timing": "wall clock per call; per-round mean; median over rounds, p10, "
                                   "p90"},
            "load_average": [{"when": "start", "utc": now_utc(), "load": os.getloadavg()}],
            "models": {}, "cells": [],
        }
        describe = self.c_json([self.binary(model_names[0]), "--describe"])
        results["build"] = {k: describe[k] for k in ("isa", "compiler", "eigen")}
        results["fma_peak"] = {"method": "start-up FMA-chain peak: the best FLOP/s of runs of "
                                         "2^20 iterations of 16 independent FMA chains, one core "
                                         "(benchmarks/cpu/fma_peak.hpp measure_fma_peak)",
                               "start_per_core": self.fma_peaks(model_names[0])}
        self.save(results)
        for m in model_names:
            self.run_model(m, python, results)
        results["fma_peak"]["end_per_core"] = self.fma_peaks(model_names[0])
        results["load_average"].append({"when": "end", "utc": now_utc(), "load": os.getloadavg()})
        results["finished_utc"] = now_utc()
        self.save(results)
        return results

    def run_model(self, m, python, results):
        a = self.a
        cfg = models.MODELS[m]
        desc = self.c_json([self.binary(m), "--describe"])
        want = [(n, list(s)) for n, s in models.binding_names(cfg)]
        have = [(b["name"], b["shape"]) for b in desc["bindings"]]
        # The program prints its FLOPs with 9 significant digits.
        flops_differ = abs(desc["flops"] - models.flops(cfg)) > 1e-8 * desc["flops"]
        if sorted(want) != sorted(have) or flops_differ:
            raise RaceError(f"{m}: race_{m} binds {len(have)} tensors ({desc['flops']} FLOPs); "
                            f"models.py describes {len(want)} ({models.flops(cfg)} FLOPs): "
                            f"the two model lists differ")
        wdir = os.path.join(self.out, "weights", m)
        w = models.make_weights(cfg, wdir, a.seed)
        print(f"race: {m}: weights in {wdir}; float64 reference", flush=True)
        ref = models.reference(cfg, w)
        entry = {"config": cfg, "flops": models.flops(cfg), "title": models.TITLES[m],
                 "arena_bytes": desc["arena_bytes"],
                 "param_bytes": sum(v.nbytes // (2 if models.is_bf16(cfg) and v.ndim == 2 else 1)
                                    for k, v in w.items() if k != "x")}
        results["models"][m] = entry
        peers = a.peers or (["fusedsl", "eigen"] + PYTHON_PEERS)
        skipped = [p for p in peers if p in left_out(cfg)]
        peers = [p for p in peers if p not in left_out(cfg)]
        onnx_path = os.path.join(self.out, "onnx", f"{m}.onnx")
        onnx_error = None
        if "onnxruntime" in peers:
            os.makedirs(os.path.dirname(onnx_path), exist_ok=True)
            out = subprocess.run([python, os.path.join(here, "peer.py"), "--export-onnx",
                                  onnx_path, "--model", m, "--weights", wdir],
                                 capture_output=True, text=True, env=peer_env("torch", 2))
            lines = [json.loads(x[7:]) for x in out.stdout.splitlines() if x.startswith("@@race ")]
            if out.returncode == 0 and lines and "exported" in lines[-1]:
                entry["onnx_export"] = lines[-1]["exported"]
            else:
                onnx_error = lines[-1].get("error") if lines else out.stderr[-300:]
                entry["onnx_export"] = {"error": onnx_error}
        fused_ref = None
        thread_counts = a.threads or (QUICK_THREADS.get(m, [1, 2]) if a.quick else [1, 2])
        for threads in thread_counts:
            keys = list(peers)
            if a.quick and threads > 1 and "torch_compile" in keys:
                # Its thread setting is eager PyTorch's, checked at two threads; its compile is
                # most of --quick's time.
                keys.remove("torch_compile")
            if threads > 1 and "fusedsl" in keys:
                keys.insert(keys.index("fusedsl") + 1, "fusedsl_sleeping")
            fused_ref = self.run_cell_group(m, cfg, threads, keys, python, wdir, ref, fused_ref,
                                            onnx_path, onnx_error, results)
            for key in skipped:
                results["cells"].append({"model": m, "threads": threads, "peer": key,
                                         "status": "not run", "reason": left_out(cfg)[key],
                                         "thread_settings": thread_settings(key, threads)})
        if a.quick:
            entry["negative_controls"] = self.negative_controls(cfg, w, fused_ref)
        self.save(results)

    def negative_controls(self, cfg, w, fused):
        """The output check must refuse a wrong function: each variant's float64 output against
        fusedsl's must be off by more than the tolerance."""
        if models.is_llama(cfg):
            variants = {"causal mask flipped": dict(causal=not cfg["causal"]),
                        "RoPE on interleaved pairs instead of halves": dict(rope_pairs=True),
                        "query head h reading kv head h mod kv_heads": dict(kv_cyclic=True)}
        else:
            variants = {"GELU with erf instead of tanh": dict(gelu=models.gelu_erf),
                        "causal mask flipped": dict(causal=not cfg["causal"]),
                        "pre-LN and post-LN swapped": dict(pre_ln=not cfg["pre_ln"])}
        out = {}
        for name, kw in variants.items():
            err = models.relative_error(fused, models.reference(cfg, w, **kw))
            out[name] = err
            if not err > models.TOLERANCE:
                raise RaceError(f"the output check cannot tell '{name}' from the model: "
                                f"{err:.3g} <= tolerance {models.TOLERANCE}")
            print(f"race: negative control '{name}': {err:.3g} > {models.TOLERANCE} (refused)")
        return out

    def start_peer(self, key, m, threads, python, wdir, onnx_path):
        out_npy = os.path.join(self.out, "outputs", f"{m}.t{threads}.{key}.npy")
        os.makedirs(os.path.dirname(out_npy), exist_ok=True)
        if key in ("fusedsl", "fusedsl_sleeping", "eigen"):
            spin = FUSEDSL_SPIN_US if key == "fusedsl" and threads > 1 else 0
            cmd = [self.binary(m), "--peer", "eigen" if key == "eigen" else "fusedsl",
                   "--weights", wdir, "--output", out_npy, "--threads", str(threads),
                   "--spin-us", str(spin)]
        else:
            cmd = [python, os.path.join(here, "peer.py"), "--peer", key, "--model", m,
                   "--weights", wdir, "--output", out_npy, "--threads", str(threads),
                   "--onnx", onnx_path]
        log = os.path.join(self.out, "logs", f"{m}.t{threads}.{key}.log")
        return Peer(key, cmd, peer_env(key, threads), CORES[threads], log), out_npy

    def run_cell_group(self, m, cfg, threads, keys, python, wdir, ref, fused_ref, onnx_path,
                       onnx_error, results):
        import numpy as np
        a = self.a
        results["load_average"].append({"when": f"{m} threads {threads}", "utc": now_utc(),
                                        "load": os.getloadavg()})
        cells, live = {}, []
        try:
            for key in keys:
                cell = {"model": m, "threads": threads, "peer": key,
                        "thread_settings": thread_settings(key, threads)}
                cells[key] = cell
                results["cells"].append(cell)
                if key == "onnxruntime" and onnx_error:
                    cell.update(status="failed", reason=f"ONNX export failed: {onnx_error}")
                    continue
                print(f"race: {m}, {threads} thread(s): starting {key}", flush=True)
                t0 = time.perf_counter()
                peer, out_npy = self.start_peer(key, m, threads, python, wdir, onnx_path)
                r = peer.wait_reply(a.setup_timeout)
                cell["setup_seconds"] = time.perf_counter() - t0
                if not r.get("ready"):
                    peer.stop()
                    cell.update(status="failed", reason=r.get("error", "no reason given"))
                    print(f"race:   {key} failed: {cell['reason']}", flush=True)
                    if key == "fusedsl":
                        raise RaceError(f"{m}: fusedsl failed to start: {cell['reason']}")
                    continue
                cell["config"] = r.get("config", {})
                cell["memory"] = {"rss_ready_bytes": r.get("rss_bytes"),
                                  "rss_after_import_bytes": r.get("rss_after_import_bytes")}
                y = np.load(out_npy)
                err64 = models.relative_error(y, ref)
                tol = models.tolerance(cfg)
                if key == "fusedsl" and not err64 <= tol:
                    # No peer is timed against a wrong function; the run goes on with the other
                    # models and ends with exit status 1.
                    peer.stop()
                    why = (f"fusedsl's output is off the float64 reference by {err64:.3g} of its "
                           f"scale (tolerance {tol})")
                    cell.update(status="wrong output", reason=why,
                                check={"vs_float64_reference": err64})
                    self.mismatches.append(f"{m}, {threads} thread(s): {why}")
                    print(f"race: MISMATCH {m}, {threads} thread(s): {why}", flush=True)
                    for other in keys[keys.index(key) + 1:]:
                        results["cells"].append({
                            "model": m, "threads": threads, "peer": other, "status": "not timed",
                            "reason": "fusedsl's output is wrong",
                            "thread_settings": thread_settings(other, threads)})
                    break
                if key == "fusedsl" and fused_ref is None:
                    fused_ref = y
                err = models.relative_error(y, fused_ref)
                cell["check"] = {"vs_fusedsl": err, "vs_float64_reference": err64}
                if not err <= tol:
                    peer.stop()
                    why = (f"output differs from fusedsl's by {err:.3g} of its scale (tolerance "
                           f"{tol}; float64 reference: {err64:.3g})")
                    cell.update(status="wrong output", reason=why)
                    self.mismatches.append(f"{m}, {threads} thread(s), {key}: {why}")
                    print(f"race: MISMATCH {m}, {threads} thread(s), {key}: {why}", flush=True)
                    continue
                print(f"race:   {key} ready in {cell['setup_seconds']:.1f} s; output vs fusedsl "
                      f"{err:.2g}, vs float64 {cell['check']['vs_float64_reference']:.2g}",
                      flush=True)
                cell["status"] = "ok"
                live.append(peer)
            if not live:
                return fused_ref
            # Warm-up (excluded): one untimed and one timed call; its time sets K.
            plan = {}
            for peer in live:
                t = peer.request("run 1 1", a.call_timeout)["times"][0]
                k = max(1, min(1000, round(a.round_seconds / max(t, 1e-9))))
                warm = 1 if t < 0.05 else 0
                plan[peer.key] = (k, warm)
                cells[peer.key].update(calls_per_round=k, untimed_calls_per_round=warm,
                                       warmup_call_seconds=t, rounds=[])
            # Models whose calls take over a second get --long-rounds rounds (the seq-1024 stack).
            fastest_warmup = min((c.get("warmup_call_seconds", 0) for c in cells.values()
                                 if c.get("status") == "ok"), default=0)
            n_rounds = a.long_rounds if fastest_warmup > 1.0 else a.rounds
            results["settings"].setdefault("rounds_per_model", {})[f"{m} threads {threads}"] = \
                n_rounds
            for r in range(n_rounds):
                order = live[r % len(live):] + live[:r % len(live)] if live else []
                for peer in order:
                    k, warm = plan[peer.key]
                    rep = peer.request(f"run {k} {warm}", a.call_timeout * (k + warm))
                    mean = statistics.fmean(rep["times"])
                    cells[peer.key]["rounds"].append(
                        {"mean": mean, "min": min(rep["times"]), "calls": len(rep["times"]),
                         "cpu_per_wall": rep["cpu_per_wall"],
                         "cpu_mean": mean * rep["cpu_per_wall"]})
                    time.sleep(a.gap)
                print(f"race: {m}, {threads} thread(s): round {r + 1}/{n_rounds} "
                      f"(load {os.getloadavg()[0]:.2f})", flush=True)
            for peer in live:
                cells[peer.key]["memory"].update(peer.memory())
                means = [x["mean"] for x in cells[peer.key]["rounds"]]
                if means:
                    cells[peer.key]["median_seconds"] = statistics.median(means)
                    cells[peer.key]["p10_seconds"] = quantile(means, 0.1)
                    cells[peer.key]["p90_seconds"] = quantile(means, 0.9)
        finally:
            for peer in live:
                peer.stop()
            self.save(results)
        return fused_ref


def report(a):
    import report as rep
    with open(a.results) as f:
        results = json.load(f)
    os.makedirs(a.out, exist_ok=True)
    # The other benchmarks of a `scripts/bench --all` run, beside results.json.
    extra = {}
    for name in ("embed", "decode"):
        path = os.path.join(os.path.dirname(os.path.abspath(a.results)), f"{name}.json")
        if os.path.exists(path):
            with open(path) as f:
                extra[name] = json.load(f)
    text = rep.markdown(results, plots=not a.no_plots, **extra)
    with open(os.path.join(a.out, "race.md"), "w") as f:
        f.write(text)
    written = [os.path.join(a.out, "race.md")]
    if not a.no_plots:
        import plots
        written += plots.make_plots(results, a.out)
    for path in written:
        print(f"race: wrote {path}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the race")
    r.add_argument("--build", required=True, help="the CMake build folder with the race_* targets")
    r.add_argument("--out", required=True, help="the run folder")
    r.add_argument("--quick", action="store_true", help="small shapes, agreement only")
    r.add_argument("--models", nargs="+", choices=sorted(models.MODELS))
    r.add_argument("--peers", nargs="+", choices=["fusedsl", "eigen"] + PYTHON_PEERS)
    r.add_argument("--threads", nargs="+", type=int, choices=[1, 2],
                   help="thread counts (default 1 2; --quick: 1 2 for quick_pre_ln, 1 otherwise)")
    r.add_argument("--rounds", type=int, help="rounds (default 11; quick 1)")
    r.add_argument("--long-rounds", type=int, default=7,
                   help="rounds for a model whose fastest peer takes over 1 s a call (default 7)")
    r.add_argument("--round-seconds", type=float, help="a peer's time per round (default 0.3)")
    r.add_argument("--gap", type=float, default=0.2,
                   help="seconds between two peers' turns, so that no pool still spins (0.2)")
    r.add_argument("--seed", type=int, default=1, help="the weights' random seed (1)")
    r.add_argument("--python", help="the Python of the peers (default: this one)")
    r.add_argument("--setup-timeout", type=float, default=3600)
    r.add_argument("--call-timeout", type=float, default=600)
    r.add_argument("--no-report", action="store_true")
    p = sub.add_parser("report", help="tables and plots from a results.json")
    p.add_argument("results")
    p.add_argument("--out", required=True)
    p.add_argument("--no-plots", action="store_true", help="the markdown tables only")
    a = ap.parse_args(argv)
    if a.cmd == "report":
        return report(a)
    if shutil.which("taskset") is None:
        raise RaceError("taskset (util-linux) is needed to pin the peers")
    a.rounds = a.rounds or (1 if a.quick else 11)
    a.round_seconds = a.round_seconds or (0.02 if a.quick else 0.3)
    t0 = time.perf_counter()
    race = Race(a)
    results = race.run()
    print(f"race: done in {time.perf_counter() - t0:.0f} s; results in {a.out}/results.json")
    if not a.no_report:
        report(argparse.Namespace(results=os.path.join(a.out, "results.json"), out=a.out,
                                  no_plots=False))
    if race.mismatches:
        results["mismatches"] = race.mismatches
        race.save(results)
        print("race: FAILED: outputs that differ (those cells were not timed):\n  " +
              "\n  ".join(race.mismatches), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
