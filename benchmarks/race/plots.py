"""The race's figures (matplotlib, Agg): speedup.png, gflops.png and memory.png from a
results.json, with the figures of report.py (the same medians and the same-run FMA peak)."""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import report  # noqa: E402


def _bars(ax, groups, series, values, ylabel, title, log=False):
    """Grouped bars: one group per entry of `groups`, one bar per series; values[s][g] or None."""
    n = max(1, len(series))
    width = 0.8 / n
    for i, s in enumerate(series):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ys = [values[s][g] if values[s][g] is not None else 0 for g in range(len(groups))]
        # One colour per peer in every panel and plot.
        color = f"C{report.PEER_ORDER.index(s)}" if s in report.PEER_ORDER else f"C{i}"
        bars = ax.bar(xs, ys, width, label=report.PEER_NAMES.get(s, s), color=color)
        for b, v in zip(bars, values[s]):
            if v is None:
                ax.annotate("n/a", (b.get_x() + b.get_width() / 2, 0), ha="center", va="bottom",
                            fontsize=6, rotation=90)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([report.MODEL_SHORT.get(g, g) for g in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)


def _per_thread_count(results, path, draw):
    """One panel per thread count, draw(ax, threads) filling each; saved to path."""
    ts = report.threads_of(results)
    fig, axes = plt.subplots(1, len(ts), figsize=(6 * len(ts), 4), squeeze=False)
    for ax, t in zip(axes[0], ts):
        draw(ax, t)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def speedup_plot(results, path):
    cells = report.cells_by(results)
    ms = report.models_of(results)

    def draw(ax, t):
        peers = [p for p in report.peers_of(results, t) if p != "fusedsl"]
        values = {p: [report.speedup(cells, m, t, p) for m in ms] for p in peers}
        _bars(ax, ms, peers, values, "fusedsl's speedup (peer time / fusedsl time)",
              f"{t} thread{'s' if t > 1 else ''}: fusedsl's speedup over each peer")
        ax.axhline(1.0, color="black", linewidth=0.8)

    _per_thread_count(results, path, draw)


def gflops_plot(results, path):
    cells = report.cells_by(results)
    ms = report.models_of(results)

    def rate(m, t, p):
        med = report.median(cells.get((m, t, p)))
        return results["models"][m]["flops"] / med * 1e-9 if med else None

    def draw(ax, t):
        peers = report.peers_of(results, t)
        peak = report.peak_of(results, t) * 1e-9
        _bars(ax, ms, peers, {p: [rate(m, t, p) for m in ms] for p in peers},
              "GFLOP/s (matmul FLOPs / median time)",
              f"{t} thread{'s' if t > 1 else ''}: against the start-up FMA-chain peak "
              f"({peak:.0f} GFLOP/s)")
        ax.axhline(peak, color="black", linestyle="--", linewidth=0.8, label="FMA peak")
        ax.axhline(0.9 * peak, color="gray", linestyle=":", linewidth=0.8, label="0.9 of the peak")

    _per_thread_count(results, path, draw)


def memory_plot(results, path):
    cells = report.cells_by(results)
    ms = report.models_of(results)
    t = min(report.threads_of(results))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    peers = report.peers_of(results, t)
    values = {p: [((cells.get((m, t, p)) or {}).get("memory", {}).get("peak_rss_bytes") or 0) /
                  2 ** 20 or None for m in ms] for p in peers}
    _bars(axes[0], ms, peers, values, "MiB (log scale)",
          "peak RSS of each peer's process (VmHWM), one thread", log=True)
    axes[0].legend(fontsize=6)
    labels = {"buffers": "fusedsl executor buffers",
              "buffers_and_inputs": "fusedsl buffers + weights + input",
              "xla_temp": "XLA temp", "xla_temp_and_argument": "XLA temp + argument"}
    series = {label: [] for label in labels.values()}
    for m in ms:
        fp = report.footprint(results, m, t)
        for key, label in labels.items():
            series[label].append(fp[key] / 2 ** 20 if fp[key] else None)
    _bars(axes[1], ms, list(series), series, "MiB (log scale)",
          "the compiled model's memory: fusedsl's buffers against XLA's memory_analysis()",
          log=True)
    axes[1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def make_plots(results, out_dir):
    paths = []
    for name, fn in (("speedup.png", speedup_plot), ("gflops.png", gflops_plot),
                     ("memory.png", memory_plot)):
        path = os.path.join(out_dir, name)
        fn(results, path)
        paths.append(path)
    return paths
