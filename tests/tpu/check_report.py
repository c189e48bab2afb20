"""Checks a fusedsl-tpu JSON report and Chrome trace: valid JSON with the required fields."""
import json
import sys

report = json.load(open(sys.argv[1]))
for key in ("total_time_s", "mxu_utilization", "hbm_bytes", "vmem_peak_bytes", "kernels", "ops"):
    assert key in report, f"report lacks {key}"
assert report["total_time_s"] > 0
assert 0 <= report["mxu_utilization"] <= 1
names = [op["name"] for op in report["ops"]]
assert len(names) == len(set(names)) and names, "one entry per op, each once"
for op in report["ops"]:
    assert op["unit"] in ("MXU", "VPU", "none"), op
for k in report["kernels"]:
    assert k["bound"] in ("MXU", "HBM", "VPU", "overhead", "none"), k
    assert k["time_s"] >= k["roofline_s"] * (1 - 1e-12), k
trace = json.load(open(sys.argv[2]))
events = trace["traceEvents"]
threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
assert threads == {"DMA", "MXU", "VPU"}, threads
spans = [e for e in events if e["ph"] == "X"]
assert spans and all(e["dur"] >= 0 and e["tid"] in (1, 2, 3) for e in spans)
assert {e["tid"] for e in spans} == {1, 2, 3}, "DMA, MXU and VPU tracks all used"
print(f"ok: {len(report['ops'])} ops, {len(report['kernels'])} kernels, {len(spans)} trace events")
