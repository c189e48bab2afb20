"""Generators for docs/race.md: the race's results.json (benchmarks/race/race.py run), with the
embedding and decode benchmarks' embed.json and decode.json of the same run (scripts/bench --all).
The tables come from benchmarks/race/report.py, the code that writes each run's own race.md."""

import os
import sys

from . import REPO, TableError, generator, read_json

sys.path.insert(0, os.path.join(REPO, "benchmarks", "race"))
import report  # noqa: E402  (standard library only, like this package)


def race_files(files):
    """results.json, and embed.json and decode.json when named, read."""
    by_name = {os.path.basename(f): f for f in files}
    if "results.json" not in by_name:
        raise TableError(f"race tables need a results.json among {', '.join(files)}")
    results = read_json(by_name["results.json"])
    if results.get("schema") != "fusedsl-race/1":
        raise TableError(f"{by_name['results.json']}: not a race results file (schema "
                         f"{results.get('schema')!r})")
    embed = read_json(by_name["embed.json"]) if "embed.json" in by_name else None
    decode = read_json(by_name["decode.json"]) if "decode.json" in by_name else None
    return results, embed, decode


def table_lines(text):
    """The Markdown table of report.py's text, without the intro line above it."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        raise TableError("the race report wrote no table")
    return lines[start:]


@generator("race_matrix")
def race_matrix(files, options):
    """fusedsl's speedup over each peer on every model at one thread. Reads a run's results.json
    (the race's models: the peer's median time a call over fusedsl's) and, when named, its
    embed.json (all-MiniLM-L6-v2: sentences/s) and decode.json (GPT-2 small decode: tokens/s)."""
    results, embed, decode = race_files(files)
    return table_lines(report.all_models_table(results, embed, decode))


@generator("race_targets")
def race_targets(files, options):
    """The race's targets and their verdicts. Reads a run's results.json."""
    results, _, _ = race_files(files)
    return table_lines(report.targets_table(results))
