#!/usr/bin/env python3
"""code_size.py on small C++ texts: what it counts as a class or a function, how it measures
them, and how the allowlist passes findings and fails on stale entries."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import code_size  # noqa: E402


def body(n):
    """n - 2 statement lines: a `{` on one line and its `}` on the n-th make n lines."""
    return "".join(f"  x += {i};\n" for i in range(n - 2))


def findings(text):
    return [(f[2], f[3], f[4], f[1]) for f in code_size.scan(text, "a.hpp")]


class Functions(unittest.TestCase):
    def test_long_function_is_found(self):
        text = "namespace n {\n\ninline int f(int x) {\n" + body(121) + "}\n}\n"
        self.assertEqual(findings(text), [("function", "f", 121, 3)])

    def test_function_at_the_limit_passes(self):
        self.assertEqual(findings("int f(int x) {\n" + body(120) + "}\n"), [])

    def test_template_member_constructor_and_qualifiers(self):
        text = ("template <class T, int N = 3>\n"
                "struct S {\n"
                "  S(int a) : a_(a), b_{a} {\n" + body(121) + "  }\n"
                "  auto g(int x) const noexcept -> std::pair<int, int> {\n" + body(121) + "  }\n"
                "  bool operator==(const S& o) const {\n" + body(121) + "  }\n"
                "  int a_, b_;\n"
                "};\n"
                "template <class T>\n"
                "std::vector<T> S<T>::h(std::function<void(int)> f)\n"
                "  requires std::integral<T>\n"
                "{\n" + body(122) + "}\n")
        self.assertEqual([(k, n, length) for k, n, length, _ in findings(text)],
                         [("function", "S::S", 121), ("function", "S::g", 121),
                          ("function", "S::operator==", 121), ("function", "S::h", 122)])

    def test_lambda_if_loop_namespace_extern_are_not_functions(self):
        text = ("namespace n {\n"
                "extern \"C\" {\n"
                "void short_one() {\n"
                "  auto l = [&](int a) {\n" + body(130) + "  };\n"
                "  std::for_each(v.begin(), v.end(), [](int a) {\n" + body(130) + "  });\n"
                "  if (x) {\n" + body(130) + "  } else if (y) {\n" + body(130) + "  }\n"
                "  for (int i = 0; i < n; ++i) {\n" + body(130) + "  }\n"
                "  switch (x) {\n" + body(130) + "  }\n"
                "}\n" + "\n" * 130 + "}\n"
                "}  // namespace n\n")
        # Only the function around them is counted, and it is short without them.
        self.assertEqual([(k, n) for k, n, _, _ in findings(text)], [("function", "short_one")])
        self.assertEqual(findings(text.replace(body(130), "")), [])


class Classes(unittest.TestCase):
    def test_class_over_the_limit_is_found(self):
        text = "template <class T>\nclass big final : public base<T> {\n" + body(401) + "};\n"
        self.assertEqual(findings(text), [("class", "big", 401, 2)])

    def test_class_at_the_limit_passes(self):
        self.assertEqual(findings("struct ok {\n" + body(400) + "};\n"), [])

    def test_nested_class_and_member_names(self):
        text = ("struct outer {\n  union inner {\n" + body(401) + "  };\n"
                "  void m() {\n" + body(121) + "  }\n};\n")
        self.assertEqual([(k, n) for k, n, _, _ in findings(text)],
                         [("class", "outer::inner"), ("function", "outer::m"), ("class", "outer")])

    def test_enum_class_is_not_a_class(self):
        self.assertEqual(findings("enum class e : int {\n" + "  a,\n" * 500 + "};\n"), [])


class Literals(unittest.TestCase):
    def test_braces_in_comments_strings_and_chars_are_ignored(self):
        text = ("int f() {\n"
                "  // } a brace in a line comment\n"
                "  /* } { */ const char* s = \"}}\\\"}\";\n"
                "  const char* r = R\"x(\n}\n)\"\n}\n)x\";\n"
                "  char c = '}', d = '\\'';\n"
                "  int big = 1'000'000;\n"
                "#define CLOSE }\n"
                + body(121) + "}\n")
        self.assertEqual(findings(text), [("function", "f", 131, 1)])

    def test_only_the_first_preprocessor_branch_is_read(self):
        text = ("void k() {\n#if defined(A)\n  if (a) {\n#else\n  if (b) {\n#endif\n  }\n"
                + body(121) + "}\n")
        self.assertEqual(findings(text), [("function", "k", 127, 1)])


class Allowlist(unittest.TestCase):
    def run_tool(self, files, allowlist, *flags):
        with tempfile.TemporaryDirectory() as repo:
            for rel, text in files.items():
                path = os.path.join(repo, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            allow = os.path.join(repo, "allow.txt")
            with open(allow, "w") as f:
                f.write(allowlist)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = code_size.main([repo, "--allowlist", allow, *flags])
            return rc, out.getvalue()

    LONG = {"include/x/a.hpp": "int long_one() {\n" + body(121) + "}\nint ok() {\n}\n",
            "include/x/b.cpp": "int not_scanned() {\n" + body(200) + "}\n"}

    def test_unlisted_offender_fails(self):
        rc, out = self.run_tool(self.LONG, "# nothing allowed\n")
        self.assertEqual(rc, 1)
        self.assertIn("include/x/a.hpp:1: function long_one is 121 lines (limit 120)", out)
        self.assertNotIn("not_scanned", out)

    def test_listed_offender_passes(self):
        rc, out = self.run_tool(self.LONG, "include/x/a.hpp long_one  # known\n")
        self.assertEqual(rc, 0, out)

    def test_stale_entry_fails(self):
        rc, out = self.run_tool(self.LONG, "include/x/a.hpp long_one\n\ninclude/x/a.hpp ok\n")
        self.assertEqual(rc, 1)
        self.assertIn("allow.txt:3: stale allowlist entry 'include/x/a.hpp ok'", out)
        self.assertNotIn("long_one is", out)

    def test_list_prints_every_finding_and_passes(self):
        rc, out = self.run_tool(self.LONG, "include/x/a.hpp ok\n", "--list")
        self.assertEqual(rc, 0)
        self.assertIn("function long_one is 121 lines", out)


if __name__ == "__main__":
    unittest.main()
