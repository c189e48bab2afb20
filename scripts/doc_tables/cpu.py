"""Generators for docs/performance.md: the CPU benchmarks' Google Benchmark JSON and friends."""

import os
import re
import sys

from . import (REPO, TableError, fmt, fmt_time, gbench, generator, median, one, read_json, seconds,
               span, table)

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import cpu_targets  # noqa: E402  (the goals and their readings live in one place)


def peak_of(context):
    for key in ("fma_peak_gflops", "fma_peak_gflops_one_core"):
        if key in context:
            return float(context[key])
    return None


def peak_note(contexts):
    peaks = [p for p in (peak_of(c) for c in contexts) if p is not None]
    if not peaks:
        return []
    return [f"FMA peak of one core, measured at the start of the same run: "
            f"{span(peaks, 1)} GFLOP/s."]


def get(run, key):
    v = run.get(key)
    return None if v is None else float(v)


@generator("machine")
def machine(files, options):
    """The machine of a results folder. Reads its manifest.json (benchmarks/record.py) and the
    FMA peak every Google Benchmark file listed there measured (context fma_peak_gflops*)."""
    manifest = read_json(files[0])
    m = manifest.get("machine", {})
    d = os.path.dirname(files[0])
    peaks, loads, dates = [], [], set()
    for s in manifest.get("steps", []):
        dates.add(s.get("started", "")[:10])
        loads += [s.get("load_before", [None])[0], s.get("load_after", [None])[0]]
        for f in s.get("files", []):
            if f.endswith(".json") and not f.startswith("xla_"):
                data = read_json(os.path.join(d, f))
                if isinstance(data, dict) and "benchmarks" in data:
                    p = peak_of(data.get("context", {}))
                    if p is not None:
                        peaks.append(p)
    isa = m.get("isa", [])
    rows = [
        ("CPU", f"{m.get('cpu_model', '?')}, family {m.get('cpu_family')} model "
                f"{m.get('cpu_model_number')}" +
         (f" ({m['microarchitecture']})" if m.get("microarchitecture") else "") +
         (", a KVM guest" if m.get("hypervisor") else "")),
        ("cores", f"{m.get('vcpus', '?')} vCPUs, {m.get('memory_gib', '?')} GiB"),
        ("vector instructions", ", ".join(isa) + ("; AMX" if m.get("amx") else "; no AMX")),
        ("FMA peak, one core (measured)", f"{span(peaks, 1)} GFLOP/s over {len(peaks)} runs"
         if peaks else "not measured"),
        ("compiler", m.get("compiler", "?")),
        ("system", m.get("os", "?")),
        ("dates", ", ".join(sorted(x for x in dates if x))),
        ("load average during the runs (1 min)", span([x for x in loads if x is not None], 1)),
    ]
    return table(["", ""], rows, ["l", "l"])


@generator("cpu_targets")
def targets(files, options):
    """The CPU performance goals (benchmarks/cpu_targets.py) under the three readings of the
    FMA peak. Reads the Google Benchmark JSON files that `cpu_targets.py --keep DIR` writes
    (seed<N>.json, gemm<N>.json, attention<N>.json)."""
    found, _ = cpu_targets.load([os.path.join(REPO, f) for f in files])
    lines = cpu_targets.table(found).splitlines()
    contexts = [gbench(f)[0] for f in files]
    return lines + ["", "(n of m): runs that meet the goal. " + " ".join(peak_note(contexts))]


def shape_of(name):
    m = re.search(r"m:(\d+)/n:(\d+)/k:(\d+)", name)
    return f"{m.group(1)}×{m.group(2)}×{m.group(3)}" if m else name


@generator("gemm")
def gemm(files, options):
    """fusedsl's f32 GEMM against Eigen's, one thread, and the micro-kernel alone. Reads
    cpu_gemm_bench's Google Benchmark JSON (cases BM_gemm_fusedsl, BM_gemm_eigen,
    BM_gemm_microkernel_l1, BM_gemm_fusedsl_2threads)."""
    ctx, runs, _ = gbench(files[0])
    rows = []
    for name, rs in runs.items():
        if not name.startswith("BM_gemm_fusedsl/") or rs[0].get("error_occurred"):
            continue
        r = rs[0]
        eigen = runs.get(name.replace("fusedsl", "eigen"), [{}])[0]
        rows.append([shape_of(name), f"{get(r, 'GFLOPs'):.1f}", fmt(get(r, "peak_fraction")),
                     fmt(get(r, "peak_fraction_best")), fmt(get(r, "peak_fraction_paired")),
                     fmt(get(eigen, "peak_fraction")), fmt(get(eigen, "peak_fraction_best")),
                     f"{get(r, 'speedup_vs_eigen_best'):.2f}×"
                     if r.get("speedup_vs_eigen_best") else ""])
    for k in ("128", "512"):
        for name in (f"BM_gemm_microkernel_l1/{k}",):
            if name in runs:
                r = runs[name][0]
                rows.append([f"12×32 micro-kernel alone, k = {k}, panels in L1", "",
                             fmt(get(r, "peak_fraction")), fmt(get(r, "peak_fraction_best")),
                             fmt(get(r, "peak_fraction_paired")), "", "", ""])
    if not rows:
        raise TableError(f"{files[0]}: no BM_gemm_fusedsl case")
    lines = table(["m×n×k", "fusedsl GFLOP/s", "fusedsl: mean call", "fastest call", "paired",
                   "Eigen: mean call", "fastest call", "fusedsl over Eigen (fastest calls)"], rows)
    return lines + ["", "Fractions of the FMA peak. " + " ".join(peak_note([ctx]))]


@generator("gemm_threads")
def gemm_threads(files, options):
    """The f32 GEMM split over two threads (BM_gemm_fusedsl_2threads, wall time) against one
    (BM_gemm_fusedsl). Reads cpu_gemm_bench's Google Benchmark JSON."""
    ctx, runs, _ = gbench(files[0])
    rows = []
    for name, rs in runs.items():
        if not name.startswith("BM_gemm_fusedsl_2threads/"):
            continue
        two = rs[0]
        base = name.replace("_2threads", "").replace("/real_time", "")
        single = runs.get(base, [None])[0]
        ratio = seconds(single) / seconds(two) if single else None
        rows.append([shape_of(name), fmt_time(seconds(two)),
                     fmt_time(seconds(single)) if single else "",
                     f"{ratio:.2f}×" if ratio else "",
                     fmt(get(two, "peak_fraction_of_2_cores"))])
    if not rows:
        raise TableError(f"{files[0]}: no BM_gemm_fusedsl_2threads case")
    return table(["m×n×k", "two threads, wall time", "one thread, wall time", "speedup",
                  "fraction of two cores' FMA peak"], rows)


@generator("gemm_cold_b")
def gemm_cold_b(files, options):
    """Few-row products whose B comes from memory (BM_gemm_fusedsl_cold_b: the next of enough
    copies of B to fill 256 MiB each call), one thread and two. Reads cpu_gemm_bench's Google
    Benchmark JSON."""
    ctx, runs, _ = gbench(files[0])
    rows = []
    for name, rs in runs.items():
        m = re.search(r"BM_gemm_fusedsl_cold_b/m:(\d+)/n:(\d+)/k:(\d+)/threads:(\d+)", name)
        if not m or rs[0].get("error_occurred"):
            continue
        r = rs[0]
        rows.append([f"{m.group(1)}×{m.group(2)}×{m.group(3)}", m.group(4),
                     f"{get(r, 'GFLOPs'):.1f}", fmt(get(r, "peak_fraction")),
                     fmt(get(r, "peak_fraction_paired")) if r.get("peak_fraction_paired") else "",
                     f"{get(r, 'b_bytes_per_second') * 1e-9:.1f}"])
    if not rows:
        raise TableError(f"{files[0]}: no BM_gemm_fusedsl_cold_b case")
    lines = table(["m×n×k", "threads", "GFLOP/s", "fraction of the FMA peak (threads × one core)",
                   "paired", "B read, GB/s"], rows)
    return lines + ["", " ".join(peak_note([ctx]))]


def attention_case(name):
    m = re.search(r"seq:(\d+)/d:(\d+)/heads:(\d+)/causal:(\d)(?:/path:(\d))?", name)
    if not m:
        return None
    path = {None: "", "0": "automatic", "1": "flash", "2": "whole rows"}.get(m.group(5), m.group(5))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) == "1", path)


@generator("attention")
def attention(files, options):
    """fusedsl's f32 attention (both paths) against unfused Eigen attention, one thread. Reads
    cpu_attention_bench's Google Benchmark JSON (BM_attention_fusedsl, BM_attention_unfused_eigen;
    the AMX cases are left out)."""
    ctx, runs, _ = gbench(files[0])
    rows = []
    for name, rs in runs.items():
        if not name.startswith("BM_attention_fusedsl/") or rs[0].get("error_occurred"):
            continue
        c = attention_case(name)
        r = rs[0]
        unfused = None
        for un, urs in runs.items():
            if un.startswith("BM_attention_unfused_eigen/") and attention_case(un)[:4] == c[:4]:
                unfused = urs[0]
        speed = ""
        if r.get("speedup_vs_unfused"):
            speed = (f"{get(r, 'speedup_vs_unfused'):.2f}× / "
                     f"{get(r, 'speedup_vs_unfused_best'):.2f}×")
        rows.append([c[0], c[1], c[2], "causal" if c[3] else "full", c[4],
                     fmt_time(seconds(r, "cpu_time")), fmt(get(r, "peak_fraction")),
                     fmt(get(r, "peak_fraction_paired")),
                     f"{get(r, 'workspace_KiB'):.0f} KiB",
                     fmt_time(seconds(unfused, "cpu_time")) if unfused else "",
                     f"{get(unfused, 'score_buffer_MiB'):.2f} MiB" if unfused else "", speed])
    if not rows:
        raise TableError(f"{files[0]}: no BM_attention_fusedsl case")
    lines = table(["seq", "head dim", "heads", "mask", "path", "fused, per call",
                   "fraction of peak (mean)", "paired", "workspace", "unfused Eigen, per call",
                   "its score buffer", "speedup (mean / fastest calls)"], rows,
                  ["r", "r", "r", "l", "l", "r", "r", "r", "r", "r", "r", "r"])
    return lines + ["", "Per-call times are thread CPU time. " + " ".join(peak_note([ctx]))]


@generator("row_kernels")
def row_kernels(files, options):
    """Row kernels (softmax, layernorm) and the vector exp against Eigen and std::exp, one
    thread, items per second. Reads cpu_row_bench's Google Benchmark JSON."""
    _, runs, _ = gbench(files[0])
    rows = []
    for op in ("softmax", "layernorm"):
        for name, rs in runs.items():
            if not name.startswith(f"BM_{op}_fusedsl/"):
                continue
            m = re.search(r"rows:(\d+)/cols:(\d+)", name)
            eig = runs.get(name.replace("fusedsl", "eigen"), [None])[0]
            f_rate = get(rs[0], "items_per_second")
            e_rate = get(eig, "items_per_second") if eig else None
            rows.append([f"{op} {m.group(1)}×{m.group(2)}", f"{f_rate / 1e9:.2f} G/s",
                         f"{e_rate / 1e9:.2f} G/s" if e_rate else "",
                         f"{f_rate / e_rate:.1f}×" if e_rate else ""])
    std = runs.get("BM_exp_std/4096", [None])[0]
    for label, name in (("exp, 4096 floats", "BM_exp_fusedsl/4096"),
                        ("exp2, 4096 floats", "BM_exp2_fusedsl/4096")):
        if name in runs:
            f_rate = get(runs[name][0], "items_per_second")
            s_rate = get(std, "items_per_second") if std else None
            rows.append([label, f"{f_rate / 1e9:.2f} G/s",
                         f"{s_rate / 1e9:.2f} G/s (`std::exp` loop)" if s_rate else "",
                         f"{f_rate / s_rate:.1f}×" if s_rate else ""])
    if not rows:
        raise TableError(f"{files[0]}: no softmax, layernorm or exp case")
    return table(["case", "fusedsl", "Eigen", "ratio"], rows)


PRELUDES = {0: "pure FMA chains (what the start-up peak runs)", 1: "the GEMM micro-kernel, L1",
            2: "FMAs fed by 512-bit loads", 3: "a spin on the thread clock",
            4: "FMAs fed by broadcast loads", 5: "the micro-kernel's tile with A pre-broadcast"}


@generator("clock")
def clock(files, options):
    """Whether the FMA rate depends on what ran just before, and the micro-kernel's rate in
    short windows. Reads cpu_clock_bench's Google Benchmark JSON (BM_fma_bursts_after,
    BM_microkernel_windows)."""
    ctx, runs, _ = gbench(files[0])
    rows = []
    for name, rs in runs.items():
        m = re.match(r"BM_fma_bursts_after/prelude:(\d+)", name)
        if m:
            r = rs[0]
            rows.append([PRELUDES.get(int(m.group(1)), m.group(1)), fmt(get(r, "peak_fraction")),
                         fmt(get(r, "prelude_peak_fraction"))])
    lines = table(["~1 ms of", "FMA bursts right after it (median)", "its own rate"], rows)
    win = [rs[0] for n, rs in runs.items() if n.startswith("BM_microkernel_windows")]
    if win:
        w = win[0]
        lines += ["", f"The micro-kernel alone in ~0.2 ms windows for ~0.5 s: median "
                  f"{fmt(get(w, 'median'))}, 10th / 90th percentile {fmt(get(w, 'p10'))} / "
                  f"{fmt(get(w, 'p90'))}, {100 * get(w, 'fast_share'):.0f}% of the windows at "
                  f"≥ 0.93 of the start-up peak."]
    return lines + ["", "Fractions of the start-up FMA peak. " + " ".join(peak_note([ctx]))]


def model_case(runs, aggs, name):
    """(median wall s, median cpu s, one run with the counters, aggregate median)."""
    rs = runs.get(name)
    if not rs:
        return None
    ok = [r for r in rs if not r.get("error_occurred")]
    if not ok:
        return {"error": rs[0].get("error_message", "skipped")}
    agg = aggs.get(name, {}).get("median", ok[0])
    return {"wall": median([seconds(r) for r in ok]), "cpu": median([seconds(r, "cpu_time")
                                                                     for r in ok]),
            "runs": ok, "agg": agg}


@generator("models")
def models(files, options):
    """Whole models on the CPU: the fused executor against the reference backend and a plain
    Eigen implementation, one thread. Reads model_bench's Google Benchmark JSON (run with
    --benchmark_repetitions): every figure is the median over the repetitions, and the speedups
    are ratios of the cases' median thread CPU times in that file. Option model=seed|medium
    (default seed)."""
    model = options.get("model", "seed")
    ctx, runs, aggs = gbench(files[0])
    cases = {}
    for kind in ("reference", "eigen", "fused/1"):
        c = model_case(runs, aggs, f"{model}_{kind}")
        if c is None or "error" in c:
            raise TableError(f"{files[0]}: no measured case {model}_{kind}")
        cases[kind] = c

    def reading(c, key):
        values = [get(r, key) for r in c["runs"] if key in r]
        return fmt(median(values)) if values else ""

    rows = []
    for label, kind in (("reference backend (op by op, Eigen GEMMs)", "reference"),
                        ("plain Eigen, written by hand", "eigen"),
                        ("fusedsl, fused executor", "fused/1")):
        c = cases[kind]
        over_ref = cases["reference"]["cpu"] / c["cpu"]
        over_eigen = cases["eigen"]["cpu"] / c["cpu"]
        rows.append([label, fmt_time(c["cpu"]), reading(c, "peak_fraction"),
                     reading(c, "peak_fraction_best"), reading(c, "peak_fraction_paired"),
                     "" if kind == "reference" else f"{over_ref:.2f}×",
                     f"{over_eigen:.2f}×" if kind == "fused/1" else ""])
    reps = len(cases["fused/1"]["runs"])
    lines = table(["implementation", "per call", "fraction of peak: mean call", "fastest call",
                   "paired", "speedup over the reference", "over plain Eigen"], rows)
    return lines + ["", f"One thread, thread CPU time per call; medians of {reps} repetitions. " +
                    " ".join(peak_note([ctx]))]


@generator("threads")
def threads(files, options):
    """The fused executor on one and two threads (the default sleeping pool, and a pool that
    polls 50 µs), wall time. Reads model_bench's Google Benchmark JSON."""
    ctx, runs, aggs = gbench(files[0])
    rows = []
    for model in ("seed", "medium"):
        one_t = model_case(runs, aggs, f"{model}_fused/1")
        if one_t is None:
            continue
        for label, name in (("two threads, sleeping pool (default)", f"{model}_fused/2/real_time"),
                            ("two threads, polling pool (`threads{2, 50us}`)",
                             f"{model}_fused_polling/2/real_time")):
            c = model_case(runs, aggs, name)
            if c is None or "error" in c:
                continue
            rows.append([model, label, fmt_time(one_t["wall"]), fmt_time(c["wall"]),
                         f"{one_t['wall'] / c['wall']:.2f}×",
                         f"{get(c['agg'], 'parallel_groups'):.0f}"])
    if not rows:
        raise TableError(f"{files[0]}: no two-thread case")
    return table(["model", "pool", "one thread", "two threads", "speedup",
                  "groups split per layer"], rows, ["l", "l", "r", "r", "r", "r"]) + [
        "", "Wall time per call, medians over the repetitions."]


@generator("bf16_weights")
def bf16_weights(files, options):
    """The opt-in bf16-weight path (AMX-BF16 tiles) in model_bench: what the file holds for the
    *bf16weights_amx cases, measured or skipped with the reason. Reads model_bench's JSON."""
    _, runs, aggs = gbench(files[0])
    rows = []
    for model in ("seed", "medium"):
        c = model_case(runs, aggs, f"{model}bf16weights_amx")
        if c is None:
            continue
        if "error" in c:
            rows.append([model, "not measured", c["error"]])
        else:
            a = c["agg"]
            rows.append([model, fmt_time(c["cpu"]),
                         f"{get(a, 'speedup_vs_f32_kernels_paired'):.2f}× the f32 kernels"])
    if not rows:
        raise TableError(f"{files[0]}: no bf16weights_amx case")
    return table(["model", "bf16 weights on AMX", "note"], rows, ["l", "l", "l"])


@generator("model_profile")
def model_profile(files, options):
    """Where a model's time goes: executor::profile per fusion group, one thread. Reads the JSON
    that benchmarks/record.py makes of model_profile's printout (groups, us_per_call,
    peak_fraction, fma_peak_gflops)."""
    p = read_json(files[0])
    rows = [[g["group"], g["kind"], g["anchor"], f"{g['mflop']:.1f}",
             fmt_time(g["us_per_call"] * 1e-6), fmt(g["peak_fraction"])] for g in p["groups"]]
    lines = table(["group", "kind", "anchor op", "MFLOP per call", "per call",
                   "fraction of peak"], rows, ["r", "l", "l", "r", "r", "r"])
    return lines + ["", f"The whole call: {fmt_time(p['us_per_call'] * 1e-6)}, "
                    f"{p['peak_fraction']:.3f} of "
                    f"the FMA peak ({p['fma_peak_gflops']:.1f} GFLOP/s, measured in the same run); "
                    f"FMA bursts right after the calls ran at "
                    f"{p['bursts_after_model_fraction']:.3f} of that peak. Thread CPU time, the "
                    "best round of each group."]


@generator("xla")
def xla(files, options):
    """fusedsl's fused executor against XLA:CPU running the same exported graph, one core.
    Reads the --json files of benchmarks/model/xla_model_bench.py, one per model."""
    rows = []
    for f in files:
        r = read_json(f)
        rows.append([r["model"], fmt_time(r["xla_median_round_us"] * 1e-6),
                     fmt_time(r["xla_dispatch_us"] * 1e-6), fmt_time(r["fusedsl_wall_us"] * 1e-6),
                     f"{r['speedup_vs_xla']:.2f}×", f"{r['speedup_vs_xla_minus_dispatch']:.2f}×",
                     r["jax_version"]])
    return table(["model", "XLA:CPU per call", "XLA's dispatch", "fusedsl per call",
                  "fusedsl over XLA", "without XLA's dispatch", "jax"], rows)


@generator("embed")
def embed(files, options):
    """all-MiniLM-L6-v2 sentences per second: fusedsl, sentence-transformers and ONNX Runtime in
    one run, per thread count and batch size (medians of interleaved rounds). Reads
    benchmarks/race/embed.py's embed.json ("runs": peer, threads, batch, sentences_per_second,
    real_token_gflops, fraction_of_fma_peak, peak_rss_bytes, agreement_with_sentence_transformers;
    "rounds", "sentences")."""
    r = read_json(files[0])
    runs = r.get("runs")
    if not runs:
        raise TableError(f"{files[0]}: no runs")
    by = {(x["peer"], x["threads"], x["batch"]): x for x in runs}
    names = {"fusedsl": "fusedsl", "sentence_transformers": "sentence-transformers (PyTorch)",
             "onnxruntime": "ONNX Runtime"}
    rows = []
    for x in runs:
        st = by[("sentence_transformers", x["threads"], x["batch"])]["sentences_per_second"]
        ort = by[("onnxruntime", x["threads"], x["batch"])]["sentences_per_second"]
        rows.append([names.get(x["peer"], x["peer"]), x["threads"], x["batch"],
                     f"{x['sentences_per_second']:.1f}", f"{x['sentences_per_second'] / st:.2f}x",
                     f"{x['sentences_per_second'] / ort:.2f}x", f"{x['real_token_gflops']:.1f}",
                     fmt(x["fraction_of_fma_peak"], 2), f"{x['peak_rss_bytes'] / 1e6:.0f}"])
    lines = table(["peer", "threads", "batch", "sentences/s", "vs sentence-transformers",
                   "vs ONNX Runtime", "real-token GFLOP/s", "of FMA peak", "peak RSS (MB)"], rows)
    s = r["sentences"]
    agree = [f"{names[x['peer']]}, {x['threads']} thread(s): {a['max_abs_diff']:.1e} (smallest "
             f"cosine 1 - {1 - a['min_cosine']:.1e})"
             for x in runs if x["batch"] == runs[0]["batch"]
             and (a := x.get("agreement_with_sentence_transformers"))]
    return lines + ["", f"Medians of {r['rounds']} interleaved rounds, each one pass over "
                    f"{s['count']} sentences of {s['token_range'][0]}-{s['token_range'][1]} "
                    f"tokens ({s['tokens']} in all), tokenisation included. Real-token GFLOP/s "
                    f"counts the matmuls of the unpadded tokens; the FMA peak is the start-up "
                    f"FMA-chain peak per core times the threads. Largest |difference| from "
                    f"sentence-transformers' embeddings in the same run: "
                    + "; ".join(agree) + "."]


def by_prefix(runs, prefix, rel):
    """The iteration runs of the benchmark whose run name is `prefix` or starts with `prefix/`."""
    for name, rs in runs.items():
        if name == prefix or name.startswith(prefix + "/"):
            return [r for r in rs if not r.get("error_occurred")]
    raise TableError(f"{rel}: no benchmark named {prefix}")


@generator("generated")
def generated(files, options):
    """Programs outside the transformer composites, every group a generated kernel, one thread.
    Reads generated_bench's Google Benchmark JSON (run with --benchmark_repetitions): each reading
    is the median over the repetitions of a ratio measured in the same run (against the traffic
    floor, Eigen Tensor, feed_forward's GFLOP/s, or the FMA peak measured at start-up)."""
    rel = files[0]
    ctx, runs, _ = gbench(rel)

    def reading(prefix, key):
        rs = by_prefix(runs, prefix, rel)
        values = [get(r, key) for r in rs if key in r]
        if not values:
            raise TableError(f"{rel}: {prefix} has no counter {key}")
        return median(values), len(values), max(get(r, "interpreted_groups") or 0 for r in rs)

    def time_of(prefix):
        return median([seconds(r) for r in by_prefix(runs, prefix, rel)])

    rows, reps = [], 0
    for program, prefix, key, what, target in (
            ("`gelu_tanh(a * b + c) * d`, four [512, 2048] f32 inputs", "elementwise_fused",
             "floor_fraction", "of the same-run traffic floor (`y = a*b + c*d`)", 0.8),
            ("the same", "elementwise_fused", "speedup_vs_eigen",
             "× Eigen Tensor's expression", 1.0),
            ("SwiGLU FFN, x [256, 512], hidden 1376", "ffn_swiglu", "gflops_fraction_of_ffn",
             "of `feed_forward<\"ffn\", 1376>`'s GFLOP/s", 0.85),
            ("the same, gate and up as one GEMM pair", "ffn_swiglu", "speedup_vs_two_gemms",
             "× the same program as two GEMMs (`gemm_pairs{false}`)", None),
            ("SwiGLU FFN, one row (a decode step), hidden 1376, gate and up as one GEMM pair",
             "ffn_swiglu_row", "speedup_vs_two_gemms", "× the same program as two GEMMs", None),
            ("LLaMA-style block: RMSNorm, RoPE, 8 heads of 64, 2 kv heads, causal, SwiGLU 1376; "
             "seq 256, d 512", "llama_block", "peak_fraction", "of the FMA peak", 0.75),
            ("the same", "llama_block", "speedup_vs_two_gemms",
             "× the same block with its SwiGLU as two GEMMs", None),
            ("BERT-style block: 12 heads of 32, FFN 1536, erf GELU, key-padding mask; batch 4, "
             "seq 128, d 384", "bert_block", "peak_fraction", "of the FMA peak", 0.75)):
        value, reps, interpreted = reading(prefix, key)
        if target is None:  # a measured comparison with no target
            verdict, target_text = "", "—"
        else:
            verdict = "met" if value >= target else f"missed by {target - value:.3f}"
            target_text = f">= {target}"
        rows.append([program, fmt_time(time_of(prefix)), f"{value:.3f} {what}", target_text,
                     verdict, f"{int(interpreted)}"])
    load = ctx.get("load_avg")
    note = (f"One thread, wall time per call; medians of {reps} repetitions. " +
            " ".join(peak_note([ctx])) +
            (f" Load average (1 min) at the start: {float(load[0]):.2f}." if load else ""))
    return table(["program", "per call", "reading", "target", "", "interpreted groups"],
                 rows) + ["", note]


@generator("rotary")
def rotary(files, options):
    """Rotary embeddings in GPT-J's shapes, one thread: rotary_bench's Google Benchmark JSON (run
    with --benchmark_repetitions), one file per tree. Option labels=A,B,...: a name per file (the
    tree it was built from). Per case the median time per call, its fraction of the same-run copy
    floor, and the interleaved form's time over the halves form's, measured in the same run."""
    labels = options.get("labels", "").split(",") if options.get("labels") else []
    if labels and len(labels) != len(files):
        raise TableError(f"rotary: {len(labels)} labels for {len(files)} files")
    rows, reps = [], set()
    for i, rel in enumerate(files):
        _, runs, _ = gbench(rel)
        label = labels[i] if labels else rel
        for case, what in (("rotary_halves", "halves (GPT-NeoX)"),
                           ("rotary_interleaved", "interleaved pairs (GPT-J)")):
            rs = by_prefix(runs, case, rel)
            reps.add(len(rs))
            ratio = "—"
            if case == "rotary_interleaved":
                ratio = f"{median([get(r, 'time_vs_halves') for r in rs]):.2f}"
            rows.append([label, what, fmt_time(median([seconds(r) for r in rs])),
                         f"{median([get(r, 'floor_fraction') for r in rs]):.3f}", ratio,
                         f"{int(max(get(r, 'groups') for r in rs))}",
                         f"{int(max(get(r, 'interpreted_groups') for r in rs))}"])
    note = (f"x [256 tokens, 16 heads, 256], rotary on the first 64 dims of each head, f32, one "
            f"thread, wall time per call; medians of {'/'.join(str(r) for r in sorted(reps))} "
            f"repetitions. Copy floor: `y = x` over the same array in the same run.")
    return table(["tree", "form", "per call", "of the copy floor", "time / halves'", "kernels",
                  "interpreted groups"], rows) + ["", note]


@generator("gemm_s8")
def gemm_s8(files, options):
    """The int8 GEMM (u8 x s8, exact s32 sums) against the f32 GEMM on the same shapes, one thread,
    B packed once. Reads cpu_gemm_s8_bench's Google Benchmark JSON (run with
    --benchmark_repetitions): per shape the best repetition's GMAC/s and speedup over the f32
    case's fastest call in the same run (the best, not the median: on a shared 2-core machine a
    repetition that shares its core with another process runs at about 0.6x, all calls alike); where the file has them, the f32-activation forms too (a
    separate quantizing pass then the GEMM, and the one-pass dynamic GEMM)."""
    rel = files[0]
    ctx, runs, _ = gbench(rel)
    isa_names = {1: "VNNI (vpdpbusd)", 2: "AVX2 (16-bit vpmaddwd)", 3: "plain loops"}
    shapes, isas, reps = [], set(), set()
    for name in runs:
        if name.startswith("BM_gemm_f32/"):
            shapes.append(name.split("/", 1)[1])
    cases = ["BM_gemm_f32", "BM_gemm_u8s8_s32", "BM_gemm_u8s8_f32"]
    head = ["shape", "f32 GMAC/s", "u8s8 -> s32 GMAC/s", "vs f32", "u8s8 -> f32 GMAC/s", "vs f32"]
    if any(name.startswith("BM_gemm_dynamic/") for name in runs):
        cases += ["BM_quantize_then_gemm", "BM_gemm_dynamic"]
        head += ["f32 A, quantized by a pass first: GMAC/s", "vs f32",
                 "f32 A, quantized as packed (one pass): GMAC/s", "vs f32"]
    rows = []
    for shape in shapes:
        m, n, k = shape.split("/")
        row = [f"{m} x {n} x {k}"]
        for case in cases:
            rs = one(runs, f"{case}/{shape}", rel)
            reps.add(len(rs))
            row.append(f"{max(get(r, 'GMACs') for r in rs):.1f}")
            if case != "BM_gemm_f32":
                row.append(f"{max(get(r, 'speedup_vs_f32') for r in rs):.2f}x")
                isas.update(int(get(r, "isa")) for r in rs)
        rows.append(row)
    note = (f"m x n x k (A m x k, B k x n); one thread; GMAC/s of the fastest call, the best of "
            f"{'/'.join(str(r) for r in sorted(reps))} repetitions; int8 path: "
            f"{', '.join(isa_names.get(i, str(i)) for i in sorted(isas))}. " +
            " ".join(peak_note([ctx])))
    return table(head, rows) + ["", note]


@generator("footprint")
def footprint(files, options):
    """What a GPT-2-small-shaped stack (2 layers, seq 1024) costs in memory: footprint_bench's
    JSON (the executor's footprint() by part, and the process's peak RSS before the executor is
    built and after its first run)."""
    d = read_json(files[0])
    mib = 2.0 ** 20
    growth = (d["peak_rss_after_run_bytes"] - d["peak_rss_before_bytes"]) / mib
    budget = (d["weights_bytes"] + d["packed_weight_bytes"] + d["arena_bytes"]) / mib
    rows = [["the caller's f32 weights", f"{d['weights_bytes'] / mib:.1f} MiB"],
            ["packed weights (`footprint().packed_weights`)",
             f"{d['packed_weight_bytes'] / mib:.1f} MiB"],
            ["arena (`arena_bytes()`, a compile-time constant)",
             f"{d['arena_bytes'] / mib:.1f} MiB"],
            ["workspace (per-thread tiles)", f"{d['workspace_bytes'] / mib:.2f} MiB"],
            ["interpreter buffers", f"{d['interpreter_bytes'] / mib:.1f} MiB"],
            ["peak RSS growth, before the executor to after its first run", f"{growth:.1f} MiB"],
            ["growth / (weights + packed weights + arena)",
             f"{d['growth_over_budget']:.3f} (target <= 1.25: "
             f"{'met' if d['growth_over_budget'] <= 1.25 else 'missed'})"],
            ["interpreted groups", f"{d['interpreted_groups']}"]]
    return table(["part", "bytes"], rows) + ["", f"{d['program']}; budget {budget:.1f} MiB."]


USER_MODEL_TITLES = {
    "gptj_interleaved": "GPT-J block, rotary on interleaved pairs",
    "gptj_halves": "GPT-J block, rotary on halves",
    "t5_decoder": "T5 decoder layer (relative bias, cross-attention)",
    "moe_dense": "mixture of experts, dense",
    "moe_top2": "mixture of experts, top-2 (every expert computed)",
    "moe_top2_routed": "mixture of experts, top-2 routed, capacity 40",
    "alibi_block": "ALiBi block",
    "vit_block": "ViT front end and block",
}


@generator("user_models")
def user_models(files, options):
    """Transformer variants as users write them (benchmarks/model/user_models.py): per model,
    fusedsl's plan (kernels, copy kernels, GEMMs packing B per call, kernels from constants only
    and how many of them run per call, kernels from parameters only, run once per binding), its
    median time per call and fraction of the run's FMA
    peak, PyTorch eager's and torch.compile's times in the same run and the ratios, and the
    largest error of fusedsl's output against the float64 reference."""
    d = read_json(files[0])
    rows = []
    for name, r in d["models"].items():
        p, s = r["plan"], r["seconds"]
        constants = p["constant_kernels"]
        per_call = constants - r.get("constant_kernels_computed_once", 0)
        med = {k: s[k]["median"] for k in ("fusedsl", "torch_eager", "torch_compile")}
        rows.append([USER_MODEL_TITLES.get(name, name), str(p["kernels"]), str(p["copy_kernels"]),
                     str(p["per_call_packs"]), f"{constants} ({per_call} per call)",
                     str(r.get("parameter_kernels_computed_at_bind", "not counted")),
                     fmt_time(med["fusedsl"]), f"{r['peak_fraction']:.2f}",
                     fmt_time(med["torch_eager"]), fmt_time(med["torch_compile"]),
                     f"{med['torch_eager'] / med['fusedsl']:.2f}x",
                     f"{med['torch_compile'] / med['fusedsl']:.2f}x",
                     f"{r['error']['fusedsl']:.1e}"])
    models = d["models"]
    note = [f"One thread, f32, torch {d['torch']}; medians of {d['rounds']} interleaved rounds of "
            f"about {d['round_seconds']} s per peer; FMA peak of the core measured at the start and "
            f"end of the run: {span([x / 1e9 for x in d['fma_peak_flops']], 1)} GFLOP/s. "
            "Error: max |fusedsl - float64 PyTorch| / max |float64 PyTorch|."]
    if "gptj_interleaved" in models and "gptj_halves" in models:
        ratio = (models["gptj_interleaved"]["seconds"]["fusedsl"]["median"] /
                 models["gptj_halves"]["seconds"]["fusedsl"]["median"])
        note[0] += f" GPT-J interleaved over halves: {ratio:.2f}x the time."
    return table(["model", "kernels", "copies", "B packed per call", "from constants only",
                  "from parameters only (once per binding)", "fusedsl", "of FMA peak", "PyTorch eager", "torch.compile", "vs eager",
                  "vs torch.compile", "error"], rows) + [""] + note


@generator("decode_weights")
def decode_weights(files, options):
    """GPT-2 small's decode step with f32, bf16 and int8 weights (gpt2_decode_bench's decode/
    cases): per weight format and context, the median tokens/s over the repetitions, the bytes a
    token reads and the fraction of the copy roofline, and int8 against bf16 in the same run."""
    rel = files[0]
    ctx, runs, _ = gbench(rel)
    names = {"f32": "f32 weights and cache", "bf16": "bf16 weights and cache",
             "int8": "int8 weights, bf16 cache"}
    rows, reps = [], set()
    for context in ("128", "1023"):
        speed = {}
        for w in ("f32", "bf16", "int8"):
            prefix = f"decode/weights:{w}/ctx:{context}"
            key = next((n for n in runs if n.startswith(prefix)), None)
            if key is None:
                raise TableError(f"{rel}: no decode/weights:{w}/ctx:{context} case")
            rs = runs[key]
            reps.add(len(rs))
            speed[w] = median([get(r, "tokens_per_second") for r in rs])
            note = f"{speed[w] / speed['bf16']:.2f}x bf16" if w == "int8" else ""
            rows.append([f"{names[w]}, {context} tokens",
                         f"{get(rs[0], 'bytes_per_token') / 1e6:.0f} MB", f"{speed[w]:.1f}",
                         f"{median([get(r, 'roofline_fraction') for r in rs]):.3f}", note])
    bw = ctx.get("stream_copy_bytes_per_second")
    note = (f"One thread; the median of {'/'.join(str(r) for r in sorted(reps))} repetitions; "
            f"roofline: the bytes a token reads over the copy bandwidth measured at the start of "
            f"the run ({float(bw) / 1e9:.1f} GB/s)." if bw else "")
    head = ["case", "bytes a token", "tokens/s", "fraction of the roofline", "int8 over bf16"]
    return table(head, rows, ["l", "r", "r", "r", "r"]) + (["", note] if note else [])
