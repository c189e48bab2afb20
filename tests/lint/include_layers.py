#!/usr/bin/env python3
"""The headers include only the layers below them.

  include_layers.py [REPO]

Every #include "fusedsl/..." in REPO/include/fusedsl/<folder>/ (REPO defaults to the repository
this script lives in) must name the folder itself or one the table LAYERS below allows it; inside
backend/, a backend (cpu, cuda, reference) includes no other backend, only what backend/ itself
holds (the shared binding by name, backend/*.hpp and backend/impl/). The umbrella headers at the
top of include/fusedsl/ are not checked. DEPRECATED lists the forwarding headers kept for one
release at a moved header's old path, which include its new one. Exits 0 when every include is
allowed, 1 otherwise, printing each offending `path:line: include`.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS = {
    "core": set(),
    "graph": {"core"},
    "expr": {"core", "graph"},
    "plan": {"core", "graph"},
    "io": {"core", "graph"},
    "text": {"core", "io"},
    "hlo": {"core"},  # the HLO IR: nothing of fusedsl's graph
    "export": {"core", "graph", "plan", "hlo"},  # fusedsl's graph to HLO
    "tpu": {"core", "hlo", "io"},  # runs HLO: the IR only, never the exporter
    "backend": {"core", "graph", "plan"},
    "models": {"core", "graph", "expr", "plan", "compile.hpp"},  # definitions: no backend
    "runtime": {"core", "graph", "expr", "plan", "backend", "io", "text", "models", "compile.hpp"},
}
BACKENDS = {"cpu", "cuda", "reference"}
DEPRECATED = {
    "hlo/export.hpp": "export/export.hpp",
    "hlo/export_sharding.hpp": "export/sharding.hpp",
    "hlo/xla_cpu_fusion.hpp": "export/xla_cpu_fusion.hpp",
    "models/bert_bucket.hpp": "runtime/bert_bucket.hpp",
    "models/sentence_embedder.hpp": "runtime/sentence_embedder.hpp",
    "models/gpt2_generator.hpp": "runtime/gpt2_generator.hpp",
    "models/gpt2_paged.hpp": "runtime/gpt2_paged.hpp",
    "models/sentence_model.hpp": "io/sentence_model.hpp",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"fusedsl/([^"]+)"')


def violations(repo):
    root = os.path.join(repo, "include", "fusedsl")
    found = []
    for folder, _, files in sorted(os.walk(root)):
        rel = os.path.relpath(folder, root)
        parts = [] if rel == "." else rel.split(os.sep)
        if not parts:
            continue  # the umbrella headers
        for name in sorted(files):
            path = "/".join(parts + [name])
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                lines = f.readlines()
            for number, line in enumerate(lines, 1):
                m = INCLUDE.match(line)
                if m and not allowed(parts, path, m.group(1)):
                    found.append(f"include/fusedsl/{path}:{number}: \"fusedsl/{m.group(1)}\"")
    return found


def allowed(parts, path, target):
    layer, target_layer = parts[0], target.split("/")[0]
    if DEPRECATED.get(path) == target:
        return True
    if layer not in LAYERS:
        return False  # a new folder: give it a row
    if target_layer != layer:
        return target_layer in LAYERS[layer]
    if layer == "backend" and len(parts) > 1 and parts[1] in BACKENDS:
        t = target.split("/")
        return len(t) == 2 or t[1] == parts[1] or t[1] == "impl"
    return True


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(HERE))
    found = violations(repo)
    for v in found:
        print(v)
    print(f"include_layers: {len(found)} include(s) outside the layers a folder may use")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
