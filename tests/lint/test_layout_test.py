#!/usr/bin/env python3
"""test_layout.py on small trees: which folders count as mirroring include/fusedsl/, which as
harness folders, and how the allowlist passes misplaced sources and fails on stale entries."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_layout  # noqa: E402


class Layout(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = self.tmp.name
        for d in ("backend/cpu/kernels", "hlo", "io"):
            os.makedirs(os.path.join(self.repo, "include", "fusedsl", d))
        self.allow = os.path.join(self.repo, "allow.txt")
        self.write_allow("")

    def tearDown(self):
        self.tmp.cleanup()

    def add(self, path):
        full = os.path.join(self.repo, "tests", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write("int main() {}\n")

    def write_allow(self, text):
        with open(self.allow, "w") as f:
            f.write(text)

    def test_mirrored_harness_and_root_sources_pass(self):
        for p in ("hlo/parser_test.cpp", "backend/cpu/kernels/gemm_test.cpp",
                  "backend/cpu/executor/model_test.cpp", "failtest/shape.cpp", "cuda/gemm_test.cu",
                  "fuzz/deep/er/fuzz_npy.cpp", "doctest_main.cpp", "io/data/notes.txt"):
            self.add(p)
        self.assertEqual(test_layout.misplaced(self.repo), [])
        self.assertEqual(test_layout.check(self.repo, self.allow), ([], []))

    def test_unmirrored_folders_and_deep_extra_levels_fail(self):
        for p in ("unit/core_test.cpp", "backend/cpu/executor/deep/a_test.cpp", "hlo/x/y/b_test.cu",
                  "cpu/gemm_test.cpp"):
            self.add(p)
        self.assertEqual(test_layout.misplaced(self.repo),
                         ["backend/cpu/executor/deep/a_test.cpp", "cpu/gemm_test.cpp",
                          "hlo/x/y/b_test.cu", "unit/core_test.cpp"])
        failures, allowed = test_layout.check(self.repo, self.allow)
        self.assertEqual(len(failures), 4)
        self.assertIn("tests/unit/core_test.cpp: not beside what it tests", failures[-1])
        self.assertEqual(allowed, [])

    def test_the_allowlist_passes_listed_folders_and_files(self):
        self.add("cpu/gemm_test.cpp")
        self.add("cpu/row_test.cpp")
        self.add("unit/core_test.cpp")
        self.write_allow("# comment\ncpu/   # the kernels\nunit/core_test.cpp\n")
        failures, allowed = test_layout.check(self.repo, self.allow)
        self.assertEqual(failures, [])
        self.assertEqual(len(allowed), 3)

    def test_a_stale_entry_fails(self):
        self.add("io/npy_test.cpp")
        self.write_allow("hlo\n")
        failures, _ = test_layout.check(self.repo, self.allow)
        self.assertEqual(len(failures), 1)
        self.assertIn("stale allowlist entry 'hlo'", failures[0])


if __name__ == "__main__":
    unittest.main()
