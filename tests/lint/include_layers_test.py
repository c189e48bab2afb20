#!/usr/bin/env python3
"""include_layers.py on a small tree: the layer table, the rule between backends, and the
deprecated forwarding headers."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import include_layers  # noqa: E402


class Layers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def header(self, path, *includes):
        full = os.path.join(self.repo, "include", "fusedsl", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write("#pragma once\n" + "".join(f'#include "fusedsl/{i}"\n' for i in includes))

    def test_layers_below_pass(self):
        self.header("hlo/ir.hpp", "core/error.hpp", "hlo/shape.hpp")
        self.header("export/export.hpp", "hlo/ir.hpp", "plan/fusion.hpp", "graph/node.hpp")
        self.header("tpu/execute.hpp", "hlo/ir.hpp", "io/npy.hpp")
        self.header("backend/cpu/executor.hpp", "backend/bindings.hpp", "backend/impl/b.ipp",
                    "backend/cpu/kernels/gemm.hpp", "plan/lower.hpp")
        self.header("fusedsl.hpp", "models/bert.hpp", "backend/cpu/executor.hpp")
        self.assertEqual(include_layers.violations(self.repo), [])

    def test_a_layer_above_another_backend_or_a_new_folder_fails(self):
        self.header("hlo/printer.hpp", "core/error.hpp", "export/export.hpp")
        self.header("tpu/run.hpp", "export/export.hpp")
        self.header("backend/cpu/executor.hpp", "backend/cuda/executor.hpp")
        self.header("newarea/x.hpp", "core/error.hpp")
        self.assertEqual(include_layers.violations(self.repo), [
            'include/fusedsl/backend/cpu/executor.hpp:2: "fusedsl/backend/cuda/executor.hpp"',
            'include/fusedsl/hlo/printer.hpp:3: "fusedsl/export/export.hpp"',
            'include/fusedsl/newarea/x.hpp:2: "fusedsl/core/error.hpp"',
            'include/fusedsl/tpu/run.hpp:2: "fusedsl/export/export.hpp"',
        ])

    def test_a_deprecated_path_may_include_its_new_one_only(self):
        self.header("hlo/export.hpp", "export/export.hpp")
        self.assertEqual(include_layers.violations(self.repo), [])
        self.header("hlo/export.hpp", "export/sharding.hpp")
        self.assertEqual(len(include_layers.violations(self.repo)), 1)


if __name__ == "__main__":
    unittest.main()
