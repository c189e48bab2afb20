#!/usr/bin/env python3
"""Runs the GPT-2 decode step's HLO on the TPU-style backend (fusedsl-tpu) and reports its cost.

  run_decode_tpu.py FUSEDSL_TPU DIR [--json OUT.json]    DIR: what gpt2_decode_hlo_cases wrote

On each chip model (v4, v5e, v5p, v6e):
  - the small reference model's modules (DIR/tiny/<k>_<program>) run on their values; the results
    must match the CPU executor's (fusedsl-tpu --check, exit 3 when they do not);
  - GPT-2 small's modules (DIR/small: embedding, one layer, head; random values) are scheduled and
    run; one step is the embedding, n_layer layers and the head. The step must be HBM-bound: the
    HBM bytes it moves are within 10% above the weights and caches it must read
    (DIR/small/bytes.txt), and its roofline lower bound (the cost model's, per kernel the largest
    of MXU, VPU and HBM time) is within 10% of those bytes over the chip's HBM bandwidth. The
    table also gives the share of the scheduled time in kernels whose busiest unit is HBM and in
    kernels dominated by the per-kernel step overhead.
Prints a table per chip; --json writes it as a list of records. Exit 0 passed, 1 failed.
"""
import json
import os
import subprocess
import sys
import tempfile

CHIPS = ["v4", "v5e", "v5p", "v6e"]


def run_tpu(tool, module, args):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        r = subprocess.run([tool, module, "--json", report] + args, capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"exit {r.returncode}: {r.stdout[-2000:]}{r.stderr[-2000:]}"
        with open(report) as f:
            return json.load(f), ""


def by_bound(report):
    t = {}
    for k in report["kernels"]:
        t[k["bound"]] = t.get(k["bound"], 0.0) + k["time_s"]
    return t


def main():
    argv = sys.argv[1:]
    out_json = None
    if "--json" in argv:
        i = argv.index("--json")
        out_json = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) != 2:
        print(__doc__)
        return 2
    tool, root = argv
    ok = True
    tiny = os.path.join(root, "tiny")
    programs = sorted((d for d in os.listdir(tiny) if d[0].isdigit()), key=lambda d: int(d.split("_")[0]))
    for chip in CHIPS:
        for p in programs:
            d = os.path.join(tiny, p)
            _, err = run_tpu(tool, os.path.join(d, "module.hlo"), ["--chip", chip, "--inputs", d, "--check", d])
            print(f"{'PASS' if not err else 'FAIL'} {chip} small reference model {p}: results "
                  f"{'match the CPU executor' if not err else err}")
            ok &= not err
    small = os.path.join(root, "small")
    sizes = dict(line.split() for line in open(os.path.join(small, "bytes.txt")))
    layers, need = int(sizes["layers"]), int(sizes["weights"]) + int(sizes["cache"])
    records = []
    print(f"GPT-2 small decode step on the TPU-style backend ({layers} layers; weights + caches "
          f"{need / 1e6:.1f} MB)")
    print(f"{'chip':5} {'step time':>11} {'roofline':>11} {'needed/BW':>11} {'HBM bytes':>11} "
          f"{'over needed':>11} {'HBM-bound share':>16} {'overhead share':>15} {'tokens/s':>9}")
    for chip in CHIPS:
        reports = {}
        for p in ("embed", "layer", "head"):
            r, err = run_tpu(tool, os.path.join(small, p, "module.hlo"), ["--chip", chip, "--seed", "0"])
            if err:
                print(f"FAIL {chip} GPT-2 small {p}: {err}")
                ok = False
                break
            reports[p] = r
        if len(reports) != 3:
            continue
        count = {"embed": 1, "layer": layers, "head": 1}
        time = sum(count[p] * r["total_time_s"] for p, r in reports.items())
        roofline = sum(count[p] * r["roofline_time_s"] for p, r in reports.items())
        bw = reports["layer"]["chip_spec"]["hbm_bytes_per_s"]
        hbm = sum(count[p] * r["hbm_bytes"] for p, r in reports.items())
        shares = {}
        for p, r in reports.items():
            for b, t in by_bound(r).items():
                shares[b] = shares.get(b, 0.0) + count[p] * t
        busiest = max(shares, key=shares.get)
        rec = {"chip": chip, "step_time_s": time, "hbm_bytes": hbm, "needed_bytes": need,
               "hbm_over_needed": hbm / need, "hbm_bound_share": shares.get("HBM", 0.0) / time,
               "overhead_share": shares.get("overhead", 0.0) / time, "tokens_per_s": 1.0 / time,
               "roofline_time_s": roofline, "needed_over_bandwidth_s": need / bw,
               "hbm_bytes_per_s": bw, "busiest": busiest}
        records.append(rec)
        print(f"{chip:5} {time * 1e6:8.1f} us {roofline * 1e6:8.1f} us {need / bw * 1e6:8.1f} us "
              f"{hbm / 1e6:8.1f} MB {hbm / need:11.3f} "
              f"{rec['hbm_bound_share']:16.3f} {rec['overhead_share']:15.3f} {1.0 / time:9.0f}")
        good = 1.0 <= hbm / need <= 1.1 and abs(roofline - need / bw) <= 0.1 * need / bw
        if not good:
            print(f"FAIL {chip}: HBM bytes {hbm / need:.3f}x the needed, roofline {roofline * 1e6:.1f} us "
                  f"against {need / bw * 1e6:.1f} us for the needed bytes")
        ok &= good
    if out_json:
        with open(out_json, "w") as f:
            json.dump(records, f, indent=1)
    print("decode step on the TPU-style backend: " + ("all passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
