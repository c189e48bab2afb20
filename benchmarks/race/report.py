"""The race's tables, as Markdown, from a results.json (race.py run writes it). Standard library
only, so the report's test needs no third-party package; plots.py draws the figures.

Every figure comes from the one results file: times are medians over rounds (p10-p90 beside
them), speedups are a peer's median over fusedsl's in the same run and thread count, fractions of
peak are against the start-up FMA-chain peak of the same run, times the thread count.
"""
import math

PEER_NAMES = {
    "fusedsl": "fusedsl (cpu::executor)",
    "fusedsl_sleeping": "fusedsl, sleeping pool",
    "eigen": "Eigen, hand-written",
    "torch_eager": "PyTorch eager",
    "torch_compile": "torch.compile (Inductor)",
    "onnxruntime": "ONNX Runtime",
    "xla": "XLA:CPU (jax.jit)",
}
PEER_ORDER = list(PEER_NAMES)
MODEL_SHORT = {"seed": "seed", "medium": "medium", "gpt2_seq128": "GPT-2 seq 128",
               "gpt2_seq1024": "GPT-2 seq 1024", "quick_post_ln": "quick post-LN",
               "quick_pre_ln": "quick pre-LN", "quick_llama": "quick LLaMA",
               "llama": "LLaMA block", "seed_bf16": "seed, bf16 weights",
               "medium_bf16": "medium, bf16 weights"}
# Peers that fusedsl is compared with (its own sleeping pool is a variant, not a peer).
RIVALS = ["eigen", "torch_eager", "torch_compile", "onnxruntime", "xla"]


def fmt_time(s):
    if s is None or not math.isfinite(s):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale or unit == "µs":
            v = s / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return "-"


def fmt_bytes(b):
    if b is None:
        return "-"
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}" if b / scale < 100 else f"{b / scale:.0f} {unit}"
    return f"{b} B"


def peak_per_core(results):
    """The start-up FMA-chain peak of one core: the higher of the two cores' start-up readings (the
    cores are alike; on a shared machine a lower reading is another tenant's load)."""
    return max(results["fma_peak"]["start_per_core"].values())


def peak_of(results, threads):
    """The peak of `threads` cores: threads x the one-core start-up peak."""
    return threads * peak_per_core(results)


def cells_by(results):
    return {(c["model"], c["threads"], c["peer"]): c for c in results["cells"]}


def models_of(results):
    return list(results["models"])


def threads_of(results):
    return sorted({c["threads"] for c in results["cells"]})


def peers_of(results, threads):
    present = {c["peer"] for c in results["cells"] if c["threads"] == threads}
    return [p for p in PEER_ORDER if p in present]


def median(cell):
    return cell.get("median_seconds") if cell and cell.get("status") == "ok" else None


def why_empty(cell):
    if cell is None:
        return "not run"
    if cell.get("status") == "failed":
        return "failed: " + cell.get("reason", "?").replace("|", "/")
    if cell.get("status") == "wrong output":
        return "not timed: wrong output (see the checks)"
    if cell.get("status") == "not timed":
        return "not timed: " + cell.get("reason", "?").replace("|", "/")
    if cell.get("status") == "not run":
        return cell.get("reason", "not run").replace("|", "/")
    if cell.get("median_seconds") is None:
        return "no rounds"
    return None


def speedup(cells, model, threads, peer):
    f = median(cells.get((model, threads, "fusedsl")))
    p = median(cells.get((model, threads, peer)))
    return p / f if f and p else None


def fastest_rival(cells, model, threads):
    """(peer, median) of the fastest rival that ran, or (None, None)."""
    best = (None, None)
    for peer in RIVALS:
        t = median(cells.get((model, threads, peer)))
        if t is not None and (best[1] is None or t < best[1]):
            best = (peer, t)
    return best


def table(intro, columns, rows):
    """A Markdown table under an intro line: `rows` is [(name, [cell text, ...]), ...]."""
    lines = [intro, "", "| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]
    return "\n".join(lines)


def model_thread_columns(results):
    cols = [(m, t) for m in models_of(results) for t in threads_of(results)]
    return cols, ["peer"] + [f"{MODEL_SHORT.get(m, m)}, {t}T" for m, t in cols]


def footprint(results, model, threads):
    """fusedsl's executor buffers and XLA's memory_analysis() for one model: a dict of bytes (None
    where a peer did not run)."""
    cells = cells_by(results)
    f = (cells.get((model, threads, "fusedsl")) or {}).get("config", {})
    x = (cells.get((model, threads, "xla")) or {}).get("config", {}).get("memory_analysis", {})
    m = results["models"][model]
    inputs = m["param_bytes"] + 4 * m["config"]["seq"] * m["config"]["d"]
    buf, temp, arg = (f.get("executor_buffer_bytes"), x.get("temp_size_in_bytes"),
                      x.get("argument_size_in_bytes"))
    return {"inputs": inputs, "arena": f.get("arena_bytes"), "packed": f.get("packed_weight_bytes"),
            "buffers": buf, "buffers_and_inputs": buf + inputs if buf is not None else None,
            "xla_temp": temp, "xla_argument": arg,
            "xla_temp_and_argument": temp + arg if temp is not None and arg is not None else None}


def time_table(results, threads):
    cells = cells_by(results)
    ms = models_of(results)
    per_model = results["settings"].get("rounds_per_model", {})
    counts = sorted({per_model.get(f"{m} threads {threads}", results["settings"]["rounds"])
                     for m in ms})
    rounds = "/".join(str(n) for n in counts)
    rows = []
    for peer in peers_of(results, threads):
        row = []
        for m in ms:
            c = cells.get((m, threads, peer))
            empty = why_empty(c)
            if empty:
                row.append(empty)
                continue
            s = (f"{fmt_time(c['median_seconds'])} [{fmt_time(c['p10_seconds'])}-"
                 f"{fmt_time(c['p90_seconds'])}]")
            x = speedup(cells, m, threads, peer)
            if peer != "fusedsl" and x is not None:
                s += f", **{x:.2f}x**"
            row.append(s)
        rows.append((PEER_NAMES.get(peer, peer), row))
    return table(f"Time per call, {threads} thread{'s' if threads > 1 else ''} (median of {rounds} "
                 f"round{'s' if counts != [1] else ''} [p10-p90]; after each, fusedsl's speedup "
                 f"over that peer):", ["peer"] + [MODEL_SHORT.get(m, m) for m in ms], rows)


def speedup_table(results):
    cells = cells_by(results)
    cols, names = model_thread_columns(results)
    rows = []
    for peer in [p for p in PEER_ORDER if p != "fusedsl"]:
        if any((m, t, peer) in cells for m, t in cols):
            rows.append((PEER_NAMES.get(peer, peer), [
                f"{x:.2f}x" if (x := speedup(cells, m, t, peer)) is not None else
                (why_empty(cells.get((m, t, peer))) or "fusedsl has no time") for m, t in cols]))
    return table("Speedup of fusedsl over each peer (the peer's median time / fusedsl's, same run, "
                 "same thread count; above 1: fusedsl is faster):", names, rows)


def gflops_table(results):
    cells = cells_by(results)
    cols, names = model_thread_columns(results)
    rows = []
    for peer in PEER_ORDER:
        if not any((m, t, peer) in cells for m, t in cols):
            continue
        row = []
        for m, t in cols:
            med = median(cells.get((m, t, peer)))
            if med is None:
                row.append(why_empty(cells.get((m, t, peer))) or "-")
                continue
            rate = results["models"][m]["flops"] / med
            row.append(f"{rate * 1e-9:.1f} ({rate / peak_of(results, t):.2f})")
        rows.append((PEER_NAMES.get(peer, peer), row))
    return table("GFLOP/s (matmul FLOPs, attention's included, causal not halved) and the fraction "
                 "of the start-up FMA-chain peak of the cores in use:", names, rows)


def memory_table(results):
    cells = cells_by(results)
    ms = models_of(results)
    t = min(threads_of(results))
    rows = []
    for peer in peers_of(results, t):
        row = []
        for m in ms:
            c = cells.get((m, t, peer))
            hwm = (c or {}).get("memory", {}).get("peak_rss_bytes")
            row.append(fmt_bytes(hwm) if hwm else (why_empty(c) or "-"))
        rows.append((PEER_NAMES.get(peer, peer), row))
    rss = table("Peak resident memory of each peer's process (VmHWM: interpreter, libraries, "
                "weights, compilation and the calls; one thread):",
                ["peer"] + [MODEL_SHORT.get(m, m) for m in ms], rows)
    keys = ["inputs", "arena", "packed", "buffers", "xla_temp", "xla_argument",
            "xla_temp_and_argument", "buffers_and_inputs"]
    own = table("What the compiled model holds: fusedsl's executor buffers (arena + scratch + "
                "packed GEMM panels, counted by a replacement aligned operator new in the peer "
                "program, since the executor reports only arena_bytes()) against XLA's "
                "compiled.memory_analysis(); the weights themselves are the bound tensors "
                "(fusedsl) and the arguments (XLA):",
                ["model", "weights + input", "fusedsl arena", "fusedsl packed panels",
                 "fusedsl all buffers", "XLA temp", "XLA argument", "XLA temp + argument",
                 "fusedsl buffers + weights + input"],
                [(MODEL_SHORT.get(m, m), [fmt_bytes(footprint(results, m, t)[k]) for k in keys])
                 for m in ms])
    return rss + "\n\n" + own


def cpu_reading(cells, model, threads):
    """One thread: fusedsl's ratio to the fastest rival on the process-CPU-time reading, as text."""
    if threads != 1:
        return ""
    f = round_median(cells.get((model, 1, "fusedsl")), "cpu_mean")
    rivals = [(round_median(cells.get((model, 1, p)), "cpu_mean"), p) for p in RIVALS]
    rivals = [(v, p) for v, p in rivals if v]
    if not f or not rivals:
        return ""
    v, p = min(rivals)
    return f"; on process CPU time {v / f:.2f}x ({PEER_NAMES[p]})"


def target_rows(results):
    """(target, figure, verdict) for each target the results can judge."""
    cells = cells_by(results)
    rows = []
    ms = models_of(results)
    for t in threads_of(results):
        tt = f"{t} thread{'s' if t > 1 else ''}"
        if "seed" in ms:
            f = median(cells.get(("seed", t, "fusedsl")))
            peer, best = fastest_rival(cells, "seed", t)
            if not f and cells.get(("seed", t, "fusedsl")) is not None:
                rows.append((f"seed, {tt}: fusedsl >= 1.5x the fastest peer",
                             why_empty(cells.get(("seed", t, "fusedsl"))), "not measured"))
            if f and best:
                x = best / f
                rows.append((f"seed, {tt}: fusedsl >= 1.5x the fastest peer",
                             f"{x:.2f}x ({PEER_NAMES[peer]} {fmt_time(best)}, fusedsl "
                             f"{fmt_time(f)}){cpu_reading(cells, 'seed', t)}",
                             "met" if x >= 1.5 else f"missed by {1.5 - x:.2f}x (fusedsl needs "
                             f"{(1.5 / x - 1) * 100:.0f}% more speed)"))
        for m in ("medium", "gpt2_seq1024"):
            if m not in ms:
                continue
            fc = cells.get((m, t, "fusedsl"))
            f = median(fc)
            peer, best = fastest_rival(cells, m, t)
            if not f:
                if fc is not None:
                    rows.append((f"{MODEL_SHORT[m]}, f32, {tt}: >= 0.9 of the FMA peak or >= 1.15x "
                                 "the fastest peer", why_empty(fc), "not measured"))
                continue
            frac = results["models"][m]["flops"] / f / peak_of(results, t)
            x = best / f if best else None
            met = frac >= 0.9 or (x is not None and x >= 1.15)
            figure = (f"{frac:.3f} of the peak; {x:.2f}x {PEER_NAMES[peer]}" if x else
                      f"{frac:.3f} of the peak") + cpu_reading(cells, m, t)
            if met:
                verdict = "met"
            else:
                short_peak = (0.9 / frac - 1) * 100
                short_x = (1.15 / x - 1) * 100 if x else math.inf
                verdict = (f"missed: {0.9 - frac:.3f} short of 0.9 of the peak and "
                           f"{1.15 - x:.2f}x short of 1.15x; the nearer needs "
                           f"{min(short_peak, short_x):.0f}% more speed")
            rows.append((f"{MODEL_SHORT[m]}, f32, {tt}: >= 0.9 of the FMA peak or >= 1.15x the "
                         "fastest peer", figure, verdict))
    rows += bf16_target_rows(results, cells)
    return rows


def bf16_target_rows(results, cells):
    """bf16 weights on AMX against PyTorch in bf16 (the faster of eager and torch.compile):
    fusedsl >= 1.3x, judged only where fusedsl's matmuls ran on AMX tiles."""
    amx = results["machine"].get("amx_bf16")
    ms = [m for m in models_of(results) if results["models"][m]["config"].get("weights") == "bf16"]
    if not ms:
        return [("bf16 on AMX", "not measured: " + ("no AMX" if not amx else
                 "no bf16-weight model in this run"), "not measured")]
    rows = []
    for m in ms:
        for t in threads_of(results):
            tt = f"{t} thread{'s' if t > 1 else ''}"
            name = f"{MODEL_SHORT.get(m, m)}, {tt}: fusedsl on AMX >= 1.3x PyTorch in bf16"
            fc = cells.get((m, t, "fusedsl"))
            f = median(fc)
            torch = [(p, median(cells.get((m, t, p)))) for p in ("torch_eager", "torch_compile")]
            torch = [(p, v) for p, v in torch if v is not None]
            if not f or not torch:
                why = why_empty(fc) if not f else "no PyTorch bf16 cell timed"
                rows.append((name, why or "not run", "not measured"))
                continue
            peer, best = min(torch, key=lambda pv: pv[1])
            x = best / f
            tiles = (fc.get("config") or {}).get("amx_matmuls", 0)
            figure = (f"{x:.2f}x ({PEER_NAMES[peer]} {fmt_time(best)}, fusedsl {fmt_time(f)}; "
                      f"{tiles} matmuls on AMX tiles)")
            if not amx or not tiles:
                verdict = "not measured: no AMX (fusedsl ran f32 on the widened weights)"
            elif x >= 1.3:
                verdict = "met"
            else:
                verdict = (f"missed by {1.3 - x:.2f}x (fusedsl needs {(1.3 / x - 1) * 100:.0f}% "
                           "more speed)")
            rows.append((name, figure, verdict))
    return rows


def targets_table(results):
    lines = ["| target | figure (same run, medians) | verdict |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in target_rows(results)]
    return "\n".join(lines)


def seed_document_table(results):
    """The seeds' section 11 experiment: eager PyTorch against XLA (and fusedsl), 2 layers,
    d_model 128, 4 heads, batch 1, seq 128."""
    cells = cells_by(results)
    if "seed" not in results["models"]:
        return None
    ts = threads_of(results)
    eager = {t: cells.get(("seed", t, "torch_eager")) for t in ts}
    lines = ["| | " + " | ".join(f"time, {t}T" for t in ts) + " | " +
             " | ".join(f"faster than eager, {t}T" for t in ts) +
             " | peak RSS (1T) | less peak memory than eager | compiled model's own memory |",
             "|---" * (2 * len(ts) + 4) + "|"]
    for peer in ("torch_eager", "xla", "fusedsl"):
        row = [PEER_NAMES[peer]]
        for t in ts:
            row.append(fmt_time(median(cells.get(("seed", t, peer)))))
        for t in ts:
            e, p = median(eager[t]), median(cells.get(("seed", t, peer)))
            row.append(f"{e / p:.2f}x" if e and p and peer != "torch_eager" else "-")
        c1 = cells.get(("seed", ts[0], peer)) or {}
        hwm = c1.get("memory", {}).get("peak_rss_bytes")
        ehwm = (eager[ts[0]] or {}).get("memory", {}).get("peak_rss_bytes")
        row.append(fmt_bytes(hwm))
        row.append(f"{(1 - hwm / ehwm) * 100:.0f}%" if hwm and ehwm and peer != "torch_eager"
                   else "-")
        cfg = c1.get("config", {})
        if peer == "xla" and cfg.get("memory_analysis"):
            ma = cfg["memory_analysis"]
            row.append(f"temp {fmt_bytes(ma.get('temp_size_in_bytes'))} + arguments "
                       f"{fmt_bytes(ma.get('argument_size_in_bytes'))}")
        elif peer == "fusedsl" and cfg.get("executor_buffer_bytes") is not None:
            row.append(f"buffers {fmt_bytes(cfg['executor_buffer_bytes'])} + bound weights "
                       f"{fmt_bytes(results['models']['seed']['param_bytes'])}")
        else:
            row.append("not reported (no allocator statistics on the CPU)")
        lines.append("| " + " | ".join(row) + " |")
    claim = (["the document's claim (XLA on a TPU against eager)"] + [""] * len(ts) +
             ["2-3x"] * len(ts) + ["", "20-30%", ""])
    lines.append("| " + " | ".join(claim) + " |")
    return "\n".join(lines)


def agreement_table(results):
    cells = cells_by(results)
    ms = models_of(results)
    rows = []
    for t in threads_of(results):
        for peer in peers_of(results, t):
            row = []
            for m in ms:
                c = cells.get((m, t, peer)) or {}
                chk = c.get("check")
                if c.get("status") == "wrong output":
                    row.append("**" + c.get("reason", "wrong output").replace("|", "/") + "**")
                    continue
                if not chk:
                    row.append(why_empty(cells.get((m, t, peer))) or "-")
                    continue
                vf = chk.get("vs_fusedsl")
                row.append(("-" if vf is None else f"{vf:.1e}") +
                           f" ({chk['vs_float64_reference']:.1e})")
            rows.append((f"{PEER_NAMES.get(peer, peer)}, {t}T", row))
    bf16 = [m for m in ms if results["models"][m]["config"].get("weights") == "bf16"]
    bf16_tol = (f"; {results['settings']['bf16_tolerance']:g} for the bf16-weight models"
                if bf16 and "bf16_tolerance" in results["settings"] else "")
    return table(f"Output agreement before timing: max |y - y_fusedsl| / max |y_fusedsl| "
                 f"(tolerance {results['settings']['tolerance']:g}{bf16_tol}; in brackets the "
                 f"same against the float64 NumPy reference):",
                 ["peer, threads"] + [MODEL_SHORT.get(m, m) for m in ms], rows)


def settings_list(results):
    cells = cells_by(results)
    out = []
    for t in threads_of(results):
        for peer in peers_of(results, t):
            c = next((c for (m, tt, p), c in cells.items() if tt == t and p == peer), None)
            if c is None:
                continue
            s = ", ".join(f"{k} {v}" for k, v in c["thread_settings"].items())
            out.append(f"- {PEER_NAMES.get(peer, peer)}, {t}T: {s}")
    return "\n".join(out)


def round_median(cell, key):
    vals = sorted(r[key] for r in (cell or {}).get("rounds", []) if r.get(key))
    return vals[len(vals) // 2] if vals and cell.get("status") == "ok" else None


def cpu_time_table(results):
    """One thread: the median over rounds of the process CPU time per call. It leaves out the time
    slices other tenants of the machine took from the core, so it moves less with the load than the
    wall time (their cache pollution still shows)."""
    cells = cells_by(results)
    ms = models_of(results)
    rows = []
    for peer in peers_of(results, 1):
        row = []
        for m in ms:
            c = cells.get((m, 1, peer))
            v = round_median(c, "cpu_mean")
            f = round_median(cells.get((m, 1, "fusedsl")), "cpu_mean")
            if v is None:
                row.append(why_empty(c) or "-")
            else:
                row.append(fmt_time(v) + (f", {v / f:.2f}x" if f and peer != "fusedsl" else ""))
        rows.append((PEER_NAMES.get(peer, peer), row))
    return table("One thread, process CPU time per call (median over rounds; the time other "
                 "tenants held the core left out; after each, fusedsl's ratio on this reading):",
                 ["peer"] + [MODEL_SHORT.get(m, m) for m in ms], rows)


def cores_used(results):
    """Median over each cell's rounds of process CPU time / wall time, as a thread-count check."""
    cells = cells_by(results)
    ms = models_of(results)
    rows = []
    for t in threads_of(results):
        for peer in peers_of(results, t):
            rows.append((f"{PEER_NAMES.get(peer, peer)}, {t}T", [
                f"{v:.2f}" if (v := round_median(cells.get((m, t, peer)), "cpu_per_wall")) else "-"
                for m in ms]))
    return table("Process CPU time per wall time during the timed calls (median over rounds; about "
                 "the number of busy threads):",
                 ["peer, threads"] + [MODEL_SHORT.get(m, m) for m in ms], rows)


def header(results):
    m = results["machine"]
    peak = results["fma_peak"]
    start = ", ".join(f"CPU {k} {v * 1e-9:.1f}" for k, v in sorted(peak["start_per_core"].items()))
    end = ", ".join(f"CPU {k} {v * 1e-9:.1f}" for k, v in sorted(peak.get("end_per_core",
                                                                           {}).items()))
    v = results["versions"]
    loads = "; ".join(f"{x['when']} {x['load'][0]:.2f}" for x in results["load_average"])
    lines = [
        f"- Machine: {m.get('cpu_model', '?')} (family {m.get('cpu_family', '?')}, model "
        f"{m.get('cpu_model_number', '?')}), {m.get('cores_online')} CPUs, "
        f"{'AVX-512' if m.get('avx512f') else 'no AVX-512'}, "
        f"{'AMX' if m.get('amx_bf16') else 'no AMX'}; fusedsl built for "
        f"{results['build']['isa']} with {results['build']['compiler']} (-O2 -march=native), "
        f"Eigen {results['build']['eigen']}.",
        f"- Start-up FMA-chain peak (GFLOP/s, one core each): {start}" +
        (f"; at the end: {end}" if end else "") + ". Fractions of peak are against the higher "
        "start-up figure times the thread count." + low_peak_warning(results),
        f"- Run {results['started_utc']} to {results.get('finished_utc', '(unfinished)')}; "
        f"load average (1 min): {loads}.",
        f"- Versions: Python {v.get('python')}, torch {v.get('torch')}, jax {v.get('jax')} / "
        f"jaxlib {v.get('jaxlib')}, onnxruntime {v.get('onnxruntime')}, onnx {v.get('onnx')}, "
        f"onnxscript {v.get('onnxscript')}, numpy {v.get('numpy')}, matplotlib "
        f"{v.get('matplotlib')}.",
        f"- Method: {results['settings']['timing']}; {results['settings']['rounds']} rounds "
        f"({results['settings'].get('long_rounds', results['settings']['rounds'])} where the "
        f"fastest peer takes over 1 s a call), "
        f"each peer about {results['settings']['round_seconds']} s a round, peers' order rotated "
        f"each round, {results['settings']['gap_seconds']} s between turns; warm-up excluded.",
    ]
    return "\n".join(lines)


def low_peak_warning(results):
    """A sentence when the end-of-run peak beats the start-up one by over 5% (every fraction of
    peak is then too high), as fma_peak.hpp's warn_if_peak_was_low."""
    start = peak_per_core(results)
    end = max(results["fma_peak"].get("end_per_core", {"": 0}).values())
    if end and end > 1.05 * start:
        return (f" **The peak measured at the end ({end * 1e-9:.1f}) beats the start-up one by "
                f"{(end / start - 1) * 100:.0f}%: the fractions of peak read high.**")
    return ""


# The models that run as benchmarks of their own beside the race (scripts/bench --all): which
# race peer each of their peers is, and why a race peer has no cell there.
EMBED_PEERS = {"torch_eager": "sentence_transformers", "onnxruntime": "onnxruntime"}
DECODE_PEERS = {"torch_eager": "transformers", "xla": "xla"}


def all_models_table(results, embed=None, decode=None):
    """fusedsl's speedup over each peer on every model at one thread: the race's models (time a
    call), all-MiniLM-L6-v2 embeddings (embed.json: sentences/s, tokenisation included) and GPT-2
    small decode (decode.json: tokens/s). An empty cell says why."""
    cells = cells_by(results)
    cols = [("race", m) for m in models_of(results)]
    names = ["peer"] + [f"{MODEL_SHORT.get(m, m)}" for m in models_of(results)]
    if embed:
        runs = {(r["peer"], r["threads"], r["batch"]): r for r in embed["runs"]}
        batches = sorted({r["batch"] for r in embed["runs"] if r["threads"] == 1})
        cols += [("embed", b) for b in batches]
        names += [f"MiniLM-L6, batch {b}" for b in batches]
    if decode:
        import decode as dec  # its cases and their titles (standard library only, like this file)
        cols += [("decode", c) for c in dec.CASES]
        names += [f"GPT-2 decode, {dec.CASE_TITLES[c]}" for c in dec.CASES]

    def cell(peer, kind, what):
        if kind == "race":
            x = speedup(cells, what, 1, peer)
            if x is not None:
                return f"{x:.2f}x"
            return why_empty(cells.get((what, 1, peer))) or "fusedsl has no time"
        if kind == "embed":
            if peer not in EMBED_PEERS:
                return "not run: no embedding peer of this kind"
            f, r = runs.get(("fusedsl", 1, what)), runs.get((EMBED_PEERS[peer], 1, what))
            if not f or not r:
                return "not run"
            return f"{f['sentences_per_second'] / r['sentences_per_second']:.2f}x"
        if peer not in DECODE_PEERS:
            return "not run: no decode peer of this kind"
        v = decode["summary"].get(DECODE_PEERS[peer], {}).get(what, {})
        return f"{v['fusedsl_speedup']:.2f}x" if "fusedsl_speedup" in v else "not run"

    rows = [(PEER_NAMES[p], [cell(p, k, w) for k, w in cols]) for p in RIVALS
            if any((m, 1, p) in cells for m in models_of(results)) or
            (embed and p in EMBED_PEERS) or (decode and p in DECODE_PEERS)]
    return table("Speedup of fusedsl over each peer on every model, one thread (the race's models: "
                 "time a call; MiniLM-L6: sentences/s, tokenisation included, embed.json; GPT-2 "
                 "decode: tokens/s of a step, decode.json; the PyTorch eager peer is "
                 "sentence-transformers for MiniLM and transformers for decode):", names, rows)


def markdown(results, plots=True, embed=None, decode=None):
    out = ["# The race: results", "", header(results), ""]
    if embed or decode:
        out += [all_models_table(results, embed, decode), ""]
    for t in threads_of(results):
        out += [time_table(results, t), ""]
    out += [speedup_table(results), "", gflops_table(results), "", memory_table(results), ""]
    out += ["## Targets", "", targets_table(results), ""]
    seed = seed_document_table(results)
    if seed:
        out += ["## The seed document's experiment (section 11: 2 layers, d_model 128, 4 heads, "
                "batch 1, seq 128)", "", seed, ""]
    out += ["## Checks and settings", "", agreement_table(results), "", cores_used(results), ""]
    if 1 in threads_of(results):
        out += [cpu_time_table(results), ""]
    out += ["Thread settings:", "", settings_list(results), ""]
    if plots:
        out += ["![speedup](speedup.png)", "", "![GFLOP/s](gflops.png)", "",
                "![memory](memory.png)", ""]
    return "\n".join(out)
